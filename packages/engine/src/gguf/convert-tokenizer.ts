/**
 * A Hugging Face model directory's tokenizer as GGUF metadata, as llama.cpp's convert_hf_to_gguf.py
 * writes it:
 * - byte-level BPE (tokenizer.json, or a tiktoken.model rebuilt as one) → `tokenizer.ggml.model =
 *   gpt2`, the token strings and merges as they are, and `tokenizer.ggml.pre` naming the split
 *   (pre-tokenizers.ts: llama.cpp tells it by hashing a test string's ids; the split itself names
 *   the same entry). A vocabulary without merges splits alike under any pre: `default`. A split
 *   llama.cpp has no name for is refused, as llama.cpp's converter refuses it.
 * - A SentencePiece tokenizer.model (read when there is no tokenizer.json) → `llama` with its own
 *   pieces, scores and types.
 * - SentencePiece-style BPE tokenizer.json (byte_fallback, "▁" for spaces: Llama 2, Mistral, TinyLlama) →
 *   `tokenizer.ggml.model = llama` with scores (a merged piece scores minus the rank of the first
 *   merge that makes it, so merging by score is merging by rank), BYTE/CONTROL/UNKNOWN/USER_DEFINED
 *   token types and add_space_prefix.
 * Padded to vocab_size with unused `[PADn]` tokens.
 */
import { ModelFormatError, UnsupportedModelError } from '../errors.js';
import { chatTemplateOf, readTokenizerFiles } from '../tokenizer/load.js';
import { SPM_TOKEN_TYPE, type SentencePieceVocabulary } from '../tokenizer/sentencepiece.js';
import { preNameOf } from './pre-tokenizers.js';
import { gguf, type GgufMetadata } from './write.js';

export interface TokenizerIds {
  vocabSize: number;
  bosTokenId: number | null;
  eosTokenIds: readonly number[];
}

interface TokenizerJson {
  model?: { type?: string; vocab?: Record<string, number>; merges?: (string | [string, string])[]; byte_fallback?: boolean; ignore_merges?: boolean; unk_token?: string | null };
  added_tokens?: { id: number; content: string; special?: boolean }[];
  normalizer?: unknown;
  pre_tokenizer?: unknown;
  post_processor?: unknown;
}

/** Whether the tokenizer puts "▁" before the text (Prepend normalizer or a prepending Metaspace). */
function prependsSpace(tok: TokenizerJson): boolean {
  const parts: Record<string, unknown>[] = [];
  const walk = (x: unknown) => {
    if (!x || typeof x !== 'object') return;
    const o = x as Record<string, unknown>;
    parts.push(o);
    for (const k of ['normalizers', 'pretokenizers']) if (Array.isArray(o[k])) (o[k] as unknown[]).forEach(walk);
  };
  walk(tok.normalizer);
  walk(tok.pre_tokenizer);
  return parts.some((p) => (p.type === 'Prepend' && p.prepend === '▁') || (p.type === 'Metaspace' && (p.prepend_scheme === 'always' || p.prepend_scheme === 'first' || p.add_prefix_space === true)));
}

/** A tokenizer.model's pieces with their own scores and types, as llama.cpp's _set_vocab_sentencepiece writes them. */
function sentencePieceMetadata(sp: SentencePieceVocabulary, tc: Record<string, unknown>, source: string, ids: TokenizerIds): GgufMetadata {
  if (sp.pieces.length > ids.vocabSize) throw new ModelFormatError(`${source}: ${sp.pieces.length} pieces exceed vocab_size ${ids.vocabSize}`, source);
  const pad = (i: number) => i >= sp.pieces.length;
  const names = Array.from({ length: ids.vocabSize }, (_, i) => (pad(i) ? `[PAD${i}]` : sp.pieces[i]));
  const m: GgufMetadata = {
    'tokenizer.ggml.model': gguf.str('llama'),
    'tokenizer.ggml.tokens': gguf.arr('STRING', names),
    'tokenizer.ggml.scores': gguf.arr('FLOAT32', names.map((_, i) => (pad(i) ? -1000 : sp.scores[i]))),
    'tokenizer.ggml.token_type': gguf.arr('INT32', names.map((_, i) => (pad(i) ? SPM_TOKEN_TYPE.UNUSED : (sp.types?.[i] ?? SPM_TOKEN_TYPE.NORMAL)))),
    'tokenizer.ggml.add_space_prefix': gguf.bool(sp.addSpacePrefix),
    'tokenizer.ggml.add_bos_token': gguf.bool(tc.add_bos_token !== false),
  };
  if (sp.unkId !== undefined) m['tokenizer.ggml.unknown_token_id'] = gguf.u32(sp.unkId);
  if (ids.bosTokenId !== null) m['tokenizer.ggml.bos_token_id'] = gguf.u32(ids.bosTokenId);
  if (ids.eosTokenIds.length) m['tokenizer.ggml.eos_token_id'] = gguf.u32(ids.eosTokenIds[0]);
  return m;
}

export function ggufTokenizerMetadata(dir: string, ids: TokenizerIds): GgufMetadata {
  const { tokenizerJson, tokenizerConfig, source, sentencePiece } = readTokenizerFiles(dir);
  const template = chatTemplateOf(dir, tokenizerConfig);
  const chat: GgufMetadata = template ? { 'tokenizer.chat_template': gguf.str(template) } : {};
  if (sentencePiece) return { ...sentencePieceMetadata(sentencePiece, tokenizerConfig, source, ids), ...chat };
  const tok = tokenizerJson as TokenizerJson;
  if (tok.model?.type !== 'BPE' || !tok.model.vocab) {
    throw new UnsupportedModelError(`GGUF export: ${source} is not a BPE tokenizer (model.type ${JSON.stringify(tok.model?.type)})`);
  }
  const spm = tok.model.byte_fallback === true;
  const tokens: (string | undefined)[] = new Array(ids.vocabSize).fill(undefined);
  const types = new Array<number>(ids.vocabSize).fill(SPM_TOKEN_TYPE.UNUSED);
  const put = (content: string, id: number, type: number) => {
    if (!Number.isInteger(id) || id < 0 || id >= ids.vocabSize) {
      throw new ModelFormatError(`${source}: token ${JSON.stringify(content)} has id ${id} outside vocab_size ${ids.vocabSize}`, source, content);
    }
    tokens[id] = content;
    types[id] = type;
  };
  for (const [content, id] of Object.entries(tok.model.vocab)) put(content, id, spm && /^<0x[0-9A-Fa-f]{2}>$/.test(content) ? SPM_TOKEN_TYPE.BYTE : SPM_TOKEN_TYPE.NORMAL);
  for (const a of tok.added_tokens ?? []) {
    const type = a.special === false ? SPM_TOKEN_TYPE.USER_DEFINED : spm && a.content === tok.model.unk_token ? SPM_TOKEN_TYPE.UNKNOWN : SPM_TOKEN_TYPE.CONTROL;
    put(a.content, a.id, type);
  }
  const names = tokens.map((t, i) => t ?? `[PAD${i}]`);
  const merges = (tok.model.merges ?? []).map((m) => (Array.isArray(m) ? m.join(' ') : m));

  const tc = tokenizerConfig;
  const m: GgufMetadata = {};
  if (spm) {
    // A merged piece scores minus its merge's rank; pieces no merge makes (characters, bytes, specials) score lowest.
    const scores = new Array<number>(ids.vocabSize).fill(-1e9);
    const idOf = new Map(names.map((t, i) => [t, i]));
    merges.forEach((merge, rank) => {
      const id = idOf.get(merge.replace(' ', ''));
      if (id !== undefined && scores[id] === -1e9) scores[id] = -rank;
    });
    m['tokenizer.ggml.model'] = gguf.str('llama');
    m['tokenizer.ggml.tokens'] = gguf.arr('STRING', names);
    m['tokenizer.ggml.scores'] = gguf.arr('FLOAT32', scores);
    m['tokenizer.ggml.token_type'] = gguf.arr('INT32', types);
    m['tokenizer.ggml.add_space_prefix'] = gguf.bool(prependsSpace(tok));
    // SentencePiece tokenizers add BOS unless told not to (LlamaTokenizer's default).
    m['tokenizer.ggml.add_bos_token'] = gguf.bool(typeof tc.add_bos_token === 'boolean' ? tc.add_bos_token : true);
    const unk = tok.model.unk_token ? idOf.get(tok.model.unk_token) : undefined;
    if (unk !== undefined) m['tokenizer.ggml.unknown_token_id'] = gguf.u32(unk);
  } else {
    const named = preNameOf(tok.pre_tokenizer, tok.model.ignore_merges === true);
    if (!named && merges.length) {
      throw new UnsupportedModelError(`GGUF export: ${source}'s pre_tokenizer is not one llama.cpp names (tokenizer.ggml.pre): ${JSON.stringify(tok.pre_tokenizer).slice(0, 300)}`);
    }
    m['tokenizer.ggml.model'] = gguf.str('gpt2');
    m['tokenizer.ggml.pre'] = gguf.str(named ?? 'default');
    m['tokenizer.ggml.tokens'] = gguf.arr('STRING', names);
    m['tokenizer.ggml.token_type'] = gguf.arr('INT32', types);
    m['tokenizer.ggml.merges'] = gguf.arr('STRING', merges);
    m['tokenizer.ggml.add_bos_token'] = gguf.bool(typeof tc.add_bos_token === 'boolean' ? tc.add_bos_token : templateAddsBos(tok.post_processor));
  }
  if (ids.bosTokenId !== null) m['tokenizer.ggml.bos_token_id'] = gguf.u32(ids.bosTokenId);
  if (ids.eosTokenIds.length) m['tokenizer.ggml.eos_token_id'] = gguf.u32(ids.eosTokenIds[0]);
  return { ...m, ...chat };
}

/**
 * Whether a tokenizer.json post-processor puts a special token first (Llama 3's TemplateProcessing,
 * alone or in a Sequence): gguf-py reads add_bos from it when tokenizer_config.json does not say.
 */
function templateAddsBos(pp: unknown): boolean {
  if (!pp || typeof pp !== 'object') return false;
  const o = pp as { type?: unknown; processors?: unknown; single?: unknown };
  if (o.type === 'Sequence' && Array.isArray(o.processors)) return o.processors.some(templateAddsBos);
  return o.type === 'TemplateProcessing' && Array.isArray(o.single) && !!(o.single[0] as { SpecialToken?: unknown } | undefined)?.SpecialToken;
}
