/**
 * The tokenizer stored in a GGUF file's metadata, as a `ModelTokenizer`. llama.cpp's `gpt2` model
 * (byte-level BPE: `tokenizer.ggml.tokens` in byte-to-unicode spelling, `tokenizer.ggml.merges` as
 * "a b") becomes an equivalent tokenizer.json for @huggingface/tokenizers; CONTROL and USER_DEFINED
 * tokens become added tokens. Pre-tokenization uses the GPT-2 split regex whatever
 * `tokenizer.ggml.pre` names (Qwen2/Llama 3 use slightly different regexes: text can split differently
 * at digits and contractions; ids given directly are unaffected). SentencePiece (`llama`) vocabularies
 * are refused with a message pointing to --prompt-ids.
 */
import { basename } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { ModelFormatError, UnsupportedModelError } from '../errors.js';
import { byteLevelBpeTokenizerJson } from '../tokenizer/byte-level.js';
import { modelTokenizer, type ModelTokenizer } from '../tokenizer/load.js';
import { readGgufFile } from './read.js';

const CONTROL = 3;
const USER_DEFINED = 4;

export function loadGgufTokenizer(path: string): ModelTokenizer {
  const file = basename(path);
  const h = readGgufFile(path);
  const m = (k: string) => h.metadata.get(k);
  const model = m('tokenizer.ggml.model');
  if (model !== 'gpt2') {
    throw new UnsupportedModelError(
      `${file}: tokenizer.ggml.model ${JSON.stringify(model ?? null)} is not supported for text (only gpt2 byte-level BPE); give token ids instead (--prompt-ids)`,
    );
  }
  const tokens = m('tokenizer.ggml.tokens');
  if (!Array.isArray(tokens) || tokens.some((t) => typeof t !== 'string')) {
    throw new ModelFormatError(`${file}: tokenizer.ggml.tokens must be an array of strings`, path, 'tokenizer.ggml.tokens');
  }
  const types = m('tokenizer.ggml.token_type');
  const merges = m('tokenizer.ggml.merges') ?? [];
  if (!Array.isArray(merges)) throw new ModelFormatError(`${file}: tokenizer.ggml.merges must be an array`, path, 'tokenizer.ggml.merges');
  const vocab: Record<string, number> = {};
  const added: Record<string, unknown>[] = [];
  (tokens as string[]).forEach((t, id) => {
    const type = Array.isArray(types) ? types[id] : 1;
    if (type === CONTROL || type === USER_DEFINED) {
      added.push({ id, content: t, single_word: false, lstrip: false, rstrip: false, normalized: false, special: type === CONTROL });
    }
    if (!(t in vocab)) vocab[t] = id;
  });
  const json = byteLevelBpeTokenizerJson(added, vocab, merges.map(String), true);
  const tokenText = (key: string): string => {
    const id = m(key);
    return typeof id === 'number' && typeof tokens[id] === 'string' ? (tokens[id] as string) : '';
  };
  const config = { add_bos_token: m('tokenizer.ggml.add_bos_token') === true, bos_token: tokenText('tokenizer.ggml.bos_token_id'), eos_token: tokenText('tokenizer.ggml.eos_token_id') };
  let tok: Tokenizer;
  try {
    tok = new Tokenizer(json, config);
  } catch (err) {
    throw new ModelFormatError(`${file}: cannot build the tokenizer from its metadata (${(err as Error).message})`, path, 'tokenizer.ggml.tokens');
  }
  const ct = m('tokenizer.chat_template');
  const chatTemplate = typeof ct === 'string' ? ct : null;
  const bos = config.add_bos_token ? (m('tokenizer.ggml.bos_token_id') as number | undefined) : undefined;
  const encode: ModelTokenizer['encode'] = (text, options) => {
    const ids = tok.encode(text, { add_special_tokens: options?.addSpecialTokens ?? true }).ids;
    return (options?.addSpecialTokens ?? true) && typeof bos === 'number' && ids[0] !== bos ? [bos, ...ids] : ids;
  };
  const specials = { bos_token: config.bos_token, eos_token: config.eos_token };
  return modelTokenizer(tok, json, chatTemplate, specials, { message: `${file}: no tokenizer.chat_template`, path, field: 'tokenizer.chat_template' }, encode);
}
