/**
 * GGUF tokenizers give the Hugging Face ids: each real vocabulary is written to GGUF by our
 * converter (tokenizer.ggml.pre named from its pre_tokenizer), read back, and run on llama.cpp's
 * tokenizer test strings plus code, numbers and multilingual text against its own tokenizer.json.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadTokenizer } from '../../src/tokenizer/load.js';
import { tempDir } from '../helpers.js';
import { expectSameIds, lenmlDir, metaValue, writeTokenizerGguf } from './families.js';
import { ALL_STRINGS } from './strings.js';

const tmp = tempDir('gguf-families');
afterAll(tmp.cleanup);

const FAMILIES = [
  { pkg: 'qwen3', pre: 'qwen2', model: 'gpt2' },
  { pkg: 'llama3_1', pre: 'llama-bpe', model: 'gpt2' },
  { pkg: 'deepseek_v3', pre: 'deepseek-v3', model: 'gpt2' },
  { pkg: 'gptoss', pre: 'gpt-4o', model: 'gpt2' },
  { pkg: 'llama2', pre: undefined, model: 'llama' },
] as const;

describe.each(FAMILIES)('$pkg vocabulary through GGUF', ({ pkg, pre, model }) => {
  const dir = lenmlDir(pkg);
  const file = join(tmp.dir, `${pkg}.gguf`);

  it(`is written as ${model}${pre ? ` with pre ${pre}` : ''} and tokenizes like tokenizer.json`, () => {
    const metadata = writeTokenizerGguf(dir, file);
    expect(metaValue(metadata, 'tokenizer.ggml.model')).toBe(model);
    expect(metaValue(metadata, 'tokenizer.ggml.pre')).toBe(pre);
    const hf = loadTokenizer(dir);
    const fromGguf = loadTokenizer(file);
    expectSameIds(hf, fromGguf, ALL_STRINGS);
    for (const s of ALL_STRINGS.slice(-8)) expect(fromGguf.decode(fromGguf.encode(s, { addSpecialTokens: false }))).toBe(hf.decode(hf.encode(s, { addSpecialTokens: false })));
  }, 120_000);
});
