/**
 * The tokenizer stored in a GGUF file's metadata, as a `ModelTokenizer`, rebuilt as the equivalent
 * tokenizer.json for @huggingface/tokenizers:
 * - `gpt2` (byte-level BPE: `tokenizer.ggml.tokens` in byte-to-unicode spelling, `tokenizer.ggml.merges`
 *   as "a b") with the pre-tokenizer `tokenizer.ggml.pre` names, as llama.cpp maps the names
 *   (pre-tokenizers.ts); an unknown name is refused by name. Kimi K2 files may carry no merges: they
 *   are then derived from the token order (tiktoken ranks).
 * - `llama` (SentencePiece: pieces, scores, byte-fallback `<0xNN>` tokens; sentencepiece.ts), with
 *   `tokenizer.ggml.add_space_prefix` (default true, as llama.cpp).
 * CONTROL and USER_DEFINED tokens become added tokens. BOS is added when `tokenizer.ggml.add_bos_token`
 * says so, else by llama.cpp's default for the model and pre; decoding cleans up spaces before
 * punctuation where llama.cpp's clean_spaces does.
 */
import { basename } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { ModelFormatError, UnsupportedModelError } from '../errors.js';
import { byteLevelBpeTokenizerJson } from '../tokenizer/byte-level.js';
import { modelTokenizer, type ModelTokenizer } from '../tokenizer/load.js';
import { sentencePieceTokenizerJson } from '../tokenizer/sentencepiece.js';
import { mergesFromRanks } from '../tokenizer/tiktoken.js';
import { PRE_TOKENIZERS, preTokenizerJson } from './pre-tokenizers.js';
import { readGgufFile } from './read-split.js';

const CONTROL = 3;
const USER_DEFINED = 4;

type Meta = (key: string) => unknown;

function byteLevelJson(file: string, path: string, m: Meta, tokens: string[]): { json: Record<string, unknown>; addBos: boolean; cleanSpaces: boolean } {
  const preName = m('tokenizer.ggml.pre');
  const name = typeof preName === 'string' && preName ? preName : 'default';
  const pre = PRE_TOKENIZERS[name];
  if (!pre) {
    throw new UnsupportedModelError(
      `${file}: tokenizer.ggml.pre ${JSON.stringify(name)} is not a pre-tokenizer we know (known: ${Object.keys(PRE_TOKENIZERS).join(', ')}); give token ids instead (--prompt-ids)`,
    );
  }
  const types = m('tokenizer.ggml.token_type');
  let merges = m('tokenizer.ggml.merges');
  if (merges === undefined && name === 'kimi-k2') merges = mergesFromRanks(tokens).map((p) => p.join(' '));
  merges ??= [];
  if (!Array.isArray(merges)) throw new ModelFormatError(`${file}: tokenizer.ggml.merges must be an array`, path, 'tokenizer.ggml.merges');
  const vocab: Record<string, number> = {};
  const added: Record<string, unknown>[] = [];
  tokens.forEach((t, id) => {
    const type = Array.isArray(types) ? types[id] : 1;
    if (type === CONTROL || type === USER_DEFINED) {
      added.push({ id, content: t, single_word: false, lstrip: false, rstrip: false, normalized: false, special: type === CONTROL });
    }
    if (!(t in vocab)) vocab[t] = id;
  });
  const json = byteLevelBpeTokenizerJson(added, vocab, merges.map(String), true);
  json.pre_tokenizer = preTokenizerJson(pre);
  if (pre.normalizer) json.normalizer = pre.normalizer;
  (json.model as Record<string, unknown>).ignore_merges = pre.ignoreMerges;
  return { json, addBos: pre.addBos, cleanSpaces: pre.cleanSpaces };
}

function sentencePieceJson(file: string, path: string, m: Meta, tokens: string[]): Record<string, unknown> {
  const scores = m('tokenizer.ggml.scores');
  if (!Array.isArray(scores) || scores.length < tokens.length || scores.some((s) => typeof s !== 'number')) {
    throw new ModelFormatError(`${file}: tokenizer.ggml.scores must be a number per token for a llama (SentencePiece) vocabulary`, path, 'tokenizer.ggml.scores');
  }
  const types = m('tokenizer.ggml.token_type');
  const unk = m('tokenizer.ggml.unknown_token_id');
  return sentencePieceTokenizerJson({
    pieces: tokens,
    scores: scores as number[],
    types: Array.isArray(types) ? (types as number[]) : undefined,
    addSpacePrefix: m('tokenizer.ggml.add_space_prefix') !== false,
    unkId: typeof unk === 'number' ? unk : 0,
  });
}

export function loadGgufTokenizer(path: string): ModelTokenizer {
  const file = basename(path);
  const h = readGgufFile(path);
  const m: Meta = (k) => h.metadata.get(k);
  const model = m('tokenizer.ggml.model');
  const tokens = m('tokenizer.ggml.tokens');
  if (model !== 'gpt2' && model !== 'llama') {
    throw new UnsupportedModelError(
      `${file}: tokenizer.ggml.model ${JSON.stringify(model ?? null)} is not supported for text (gpt2 byte-level BPE and llama SentencePiece are); give token ids instead (--prompt-ids)`,
    );
  }
  if (!Array.isArray(tokens) || tokens.some((t) => typeof t !== 'string')) {
    throw new ModelFormatError(`${file}: tokenizer.ggml.tokens must be an array of strings`, path, 'tokenizer.ggml.tokens');
  }
  let json: Record<string, unknown>;
  let addBosDefault: boolean;
  let cleanSpaces: boolean;
  if (model === 'gpt2') ({ json, addBos: addBosDefault, cleanSpaces } = byteLevelJson(file, path, m, tokens as string[]));
  else {
    json = sentencePieceJson(file, path, m, tokens as string[]);
    addBosDefault = true;
    cleanSpaces = false;
  }

  // llama.cpp's default special ids of a SentencePiece vocabulary: <s> 1, </s> 2.
  const specialId = (key: string, spmDefault: number): unknown => m(key) ?? (model === 'llama' ? spmDefault : undefined);
  const tokenText = (key: string): string => {
    const id = specialId(key, key === 'tokenizer.ggml.bos_token_id' ? 1 : 2);
    return typeof id === 'number' && typeof tokens[id] === 'string' ? (tokens[id] as string) : '';
  };
  const addBosKey = m('tokenizer.ggml.add_bos_token');
  const addBos = typeof addBosKey === 'boolean' ? addBosKey : addBosDefault;
  const config = { add_bos_token: addBos, clean_up_tokenization_spaces: cleanSpaces, bos_token: tokenText('tokenizer.ggml.bos_token_id'), eos_token: tokenText('tokenizer.ggml.eos_token_id') };
  let tok: Tokenizer;
  try {
    tok = new Tokenizer(json, config);
  } catch (err) {
    throw new ModelFormatError(`${file}: cannot build the tokenizer from its metadata (${(err as Error).message})`, path, 'tokenizer.ggml.tokens');
  }
  const ct = m('tokenizer.chat_template');
  const chatTemplate = typeof ct === 'string' ? ct : null;
  const bos = addBos ? specialId('tokenizer.ggml.bos_token_id', 1) : undefined;
  const encode: ModelTokenizer['encode'] = (text, options) => {
    const ids = tok.encode(text, { add_special_tokens: false }).ids;
    return (options?.addSpecialTokens ?? true) && typeof bos === 'number' && ids[0] !== bos ? [bos, ...ids] : ids;
  };
  const specials = { bos_token: config.bos_token, eos_token: config.eos_token };
  return modelTokenizer(tok, json, chatTemplate, specials, { message: `${file}: no tokenizer.chat_template`, path, field: 'tokenizer.chat_template' }, encode);
}
