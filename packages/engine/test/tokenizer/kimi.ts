/**
 * A Kimi-style tiktoken directory (tiktoken.model + tokenizer_config.json naming tokenization_kimi
 * in auto_map, Kimi's special tokens and chat template, no tokenizer.json). No npm package ships
 * Kimi's tiktoken.model, so the ranks are a real tiktoken vocabulary's: gpt-oss's o200k (its
 * tokenizer.json ids are the tiktoken ranks), the first 40k (a prefix of BPE ranks is a vocabulary).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { byteToUnicode } from '../../src/tokenizer/byte-level.js';
import { lenmlDir } from './families.js';

export const RANKS = 40_000;
const o200k = JSON.parse(readFileSync(join(lenmlDir('gptoss'), 'tokenizer.json'), 'utf8')) as { model: { vocab: Record<string, number> } };
const unicodeToByte = new Map(byteToUnicode().map((c, b) => [c, b]));
export const ranks: Buffer[] = [];
for (const [spelled, id] of Object.entries(o200k.model.vocab)) {
  if (id < RANKS) ranks[id] = Buffer.from(Array.from(spelled, (c) => unicodeToByte.get(c)!));
}

/** Kimi K2's special tokens (tokenizer_config.json added_tokens_decoder), placed after our ranks. */
const SPECIALS = ['[BOS]', '[EOS]', '<|im_end|>', '<|im_user|>', '<|im_assistant|>', '<|im_system|>', '<|im_middle|>', '<|tool_calls_section_begin|>', '<|tool_calls_section_end|>', '<|tool_call_begin|>', '<|tool_call_argument_begin|>', '<|tool_call_end|>'];
export const specialId = (s: string) => RANKS + SPECIALS.indexOf(s);

/** Writes the directory as `root`/`name`; `autoMap` names the tokenizer module. */
export function writeKimiDir(root: string, name: string, autoMap = 'tokenization_kimi.TikTokenTokenizer'): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'tiktoken.model'), ranks.map((b, r) => `${b.toString('base64')} ${r}\n`).join(''));
  const addedTokensDecoder = Object.fromEntries(SPECIALS.map((content, i) => [String(RANKS + i), { content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true }]));
  writeFileSync(
    join(dir, 'tokenizer_config.json'),
    JSON.stringify({
      added_tokens_decoder: addedTokensDecoder,
      auto_map: { AutoTokenizer: [autoMap, null] },
      bos_token: '[BOS]',
      eos_token: '[EOS]',
      chat_template: readFileSync(new URL('../fixtures/chat-templates/moonshotai-Kimi-K2.jinja', import.meta.url), 'utf8'),
      tokenizer_class: 'TikTokenTokenizer',
    }),
  );
  return dir;
}

