/**
 * tiktoken vocabularies in Kimi K2's layout (kimi.ts: real o200k ranks, Kimi's specials and
 * template). js-tiktoken, a separate BPE implementation, gives the reference ids under Kimi's split
 * pattern.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tiktoken } from 'js-tiktoken/lite';
import { afterAll, describe, expect, it } from 'vitest';
import { KIMI_K2_PATTERN } from '../../src/gguf/pre-tokenizers.js';
import { loadTokenizer } from '../../src/format/tokenizer.js';
import { tempDir } from '../helpers.js';
import { expectSameIds, metaValue, writeTokenizerGguf } from './families.js';
import { RANKS, ranks, specialId, writeKimiDir } from './kimi.js';
import { ALL_STRINGS } from './strings.js';
import { writeGguf, type GgufMetadata } from '../../src/gguf/write.js';

const tmp = tempDir('tiktoken');
afterAll(tmp.cleanup);

const kimiDir = writeKimiDir(tmp.dir, 'kimi');
const kimi = loadTokenizer(kimiDir);

describe('a Kimi-style tiktoken directory', () => {
  it('gives js-tiktoken ids under Kimi pattern', () => {
    // js-tiktoken compiles the pattern with JavaScript's RegExp as it is: no (?i:...) groups there.
    const patStr = KIMI_K2_PATTERN.replaceAll("(?i:'s|'t|'re|'ve|'m|'ll|'d)", "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])");
    const reference = new Tiktoken({ pat_str: patStr, special_tokens: {}, bpe_ranks: `! 0 ${ranks.map((b) => b.toString('base64')).join(' ')}` });
    const mismatches = ALL_STRINGS.filter((s) => {
      const want = reference.encode(s);
      const got = kimi.encode(s, { addSpecialTokens: false });
      return want.length !== got.length || want.some((id, i) => id !== got[i]);
    });
    expect(mismatches).toEqual([]);
    for (const s of ALL_STRINGS) expect(kimi.decode(kimi.encode(s, { addSpecialTokens: false }))).toBe(s);
  });

  it('splits Han runs apart from other letters, as Kimi pattern does', () => {
    const pieces = (s: string) => kimi.encode(s, { addSpecialTokens: false }).map((id) => kimi.decode([id]));
    expect(pieces('apple工作Apple').join('|')).toMatch(/^apple\|工.*\|Apple$/);
  });

  it('takes special tokens from added_tokens_decoder and renders the chat template', () => {
    const prompt = kimi.applyChatTemplate([{ role: 'user', content: 'Hi there' }]);
    expect(prompt).toBe('<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|><|im_user|>user<|im_middle|>Hi there<|im_end|><|im_assistant|>assistant<|im_middle|>');
    const ids = kimi.encode(prompt, { addSpecialTokens: false });
    expect(ids[0]).toBe(specialId('<|im_system|>'));
    expect(ids.at(-1)).toBe(specialId('<|im_middle|>'));
    expect(ids.filter((id) => id >= RANKS)).toHaveLength(8);
    expect(kimi.decode(ids)).toBe('systemYou are a helpful assistantuserHi thereassistant');
    expect(kimi.decode(ids, { skipSpecialTokens: false })).toBe(prompt);
    // the reserved ids no name was given keep tiktoken's placeholder names
    expect(kimi.decode([RANKS + 200], { skipSpecialTokens: false })).toBe(`<|reserved_token_${RANKS + 200}|>`);
  });

  it('converts to a GGUF with pre kimi-k2 that tokenizes alike, with its merges or without them', () => {
    const file = join(tmp.dir, 'kimi.gguf');
    const metadata = writeTokenizerGguf(kimiDir, file, RANKS + 256);
    expect(metaValue(metadata, 'tokenizer.ggml.model')).toBe('gpt2');
    expect(metaValue(metadata, 'tokenizer.ggml.pre')).toBe('kimi-k2');
    expectSameIds(kimi, loadTokenizer(file), ALL_STRINGS);
    // llama.cpp reads kimi-k2 vocabularies that carry no merges: they follow from the token order.
    const noMerges: GgufMetadata = { ...metadata, 'general.architecture': { type: 'STRING', value: 'llama' } };
    delete noMerges['tokenizer.ggml.merges'];
    const bare = join(tmp.dir, 'kimi-no-merges.gguf');
    writeGguf(bare, noMerges, []);
    expectSameIds(kimi, loadTokenizer(bare), ALL_STRINGS);
  });
});

describe('directories without tokenizer.json', () => {
  it('refuses a tiktoken.model whose tokenizer module has no known pattern, naming it', () => {
    expect(() => loadTokenizer(writeKimiDir(tmp.dir, 'other', 'tokenization_other.OtherTokenizer'))).toThrow(/tokenizer module "tokenization_other"/);
  });

  it('names the files it looked for', () => {
    const dir = join(tmp.dir, 'empty');
    mkdirSync(dir);
    expect(() => loadTokenizer(dir)).toThrow(/no tokenizer \(looked for tokenizer\.json, tiktoken\.model, tokenizer\.model\)/);
  });

  it('refuses a malformed tiktoken.model naming the line', () => {
    const dir = writeKimiDir(tmp.dir, 'bad');
    writeFileSync(join(dir, 'tiktoken.model'), 'IQ== 0\nnot-a-rank\n');
    expect(() => loadTokenizer(dir)).toThrow(/tiktoken\.model: line 2 is not "base64 rank"/);
  });
});
