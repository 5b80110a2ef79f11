/**
 * tiktoken vocabularies (Kimi K2's `tiktoken.model`): one "base64-bytes rank" line per token, the
 * split pattern in the model's tokenization_*.py (never run: the patterns are kept here per module),
 * special tokens from tokenizer_config.json's added_tokens_decoder. Turned into the equivalent
 * byte-level BPE tokenizer.json as transformers' TikTokenConverter does: tokens spelled in GPT-2's
 * byte-to-unicode alphabet with id = rank, merges = every split of a token into two tokens, ranked
 * by the token's rank; `ignore_merges` because tiktoken takes a piece that is a token as it is.
 */
import { byteToUnicode } from './byte-level.js';
import { KIMI_K2_PATTERN } from '../gguf/pre-tokenizers.js';

/** The split pattern of each tokenizer module whose tiktoken vocabulary we read (auto_map's module name). */
export const TIKTOKEN_PATTERNS: Readonly<Record<string, string>> = {
  // moonshotai/Kimi-K2-* tokenization_kimi.py, TikTokenTokenizer.pat_str
  tokenization_kimi: KIMI_K2_PATTERN,
};

/** Kimi's TikTokenTokenizer.num_reserved_special_tokens: ids after the ranks reserved for specials. */
export const TIKTOKEN_RESERVED_SPECIALS = 256;

/** Parses tiktoken.model text: each line "base64 rank". `where` names the file in errors. */
export function parseTiktokenRanks(text: string, where: string): Uint8Array[] {
  const tokens: Uint8Array[] = [];
  const lines = text.split('\n');
  lines.forEach((line, i) => {
    if (!line.trim()) return;
    const [b64, rankText] = line.trim().split(/\s+/);
    const rank = Number(rankText);
    if (!b64 || !Number.isInteger(rank) || rank < 0) throw new Error(`${where}: line ${i + 1} is not "base64 rank"`);
    if (tokens[rank]) throw new Error(`${where}: rank ${rank} appears twice (line ${i + 1})`);
    tokens[rank] = new Uint8Array(Buffer.from(b64, 'base64'));
  });
  for (let r = 0; r < tokens.length; r++) if (!tokens[r]) throw new Error(`${where}: rank ${r} is missing`);
  return tokens;
}

/** Tokens' bytes in GPT-2's byte-to-unicode spelling (the form of byte-level tokenizer.json vocabularies). */
export function byteLevelSpelling(tokens: readonly Uint8Array[]): string[] {
  const table = byteToUnicode();
  return tokens.map((t) => {
    let s = '';
    for (const b of t) s += table[b];
    return s;
  });
}

/** BPE merges of a rank-ordered byte-level vocabulary (id = rank): TikTokenConverter's order. */
export function mergesFromRanks(spelled: readonly string[]): [string, string][] {
  const rank = new Map<string, number>();
  spelled.forEach((s, r) => rank.set(s, r));
  const merges: [string, string][] = [];
  for (let r = 0; r < spelled.length; r++) {
    const chars = Array.from(spelled[r]);
    if (chars.length < 2) continue;
    const local: [string, string, number, number][] = [];
    for (let i = 1; i < chars.length; i++) {
      const l = chars.slice(0, i).join('');
      const rt = chars.slice(i).join('');
      const lr = rank.get(l);
      const rr = rank.get(rt);
      if (lr !== undefined && rr !== undefined) local.push([l, rt, lr, rr]);
    }
    local.sort((a, b) => a[2] - b[2] || a[3] - b[3]);
    for (const [l, rt] of local) merges.push([l, rt]);
  }
  return merges;
}

export interface TiktokenSpecs {
  /** Token bytes by rank. */
  ranks: readonly Uint8Array[];
  pattern: string;
  /** Special tokens: id → text (ids from ranks.length on). */
  specials: ReadonlyMap<number, string>;
  /** Specials that are text to the tokenizer (`special: false` in added_tokens_decoder). */
  plain?: ReadonlySet<number>;
}

/** The byte-level BPE tokenizer.json equivalent to a tiktoken encoding. */
export function tiktokenTokenizerJson(t: TiktokenSpecs): Record<string, unknown> {
  const spelled = byteLevelSpelling(t.ranks);
  const vocab: Record<string, number> = {};
  spelled.forEach((s, r) => (vocab[s] = r));
  const added = [...t.specials].sort((a, b) => a[0] - b[0]).map(([id, content]) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: !t.plain?.has(id),
  }));
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: t.pattern }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: true,
      vocab,
      merges: mergesFromRanks(spelled),
    },
  };
}

/**
 * The special tokens of a Kimi-style tiktoken directory: `<|reserved_token_N|>` for the reserved ids
 * after the ranks, named by tokenizer_config.json's added_tokens_decoder.
 */
export function tiktokenSpecials(rankCount: number, addedTokensDecoder: unknown): { specials: Map<number, string>; plain: Set<number> } {
  const specials = new Map<number, string>();
  const plain = new Set<number>();
  for (let id = rankCount; id < rankCount + TIKTOKEN_RESERVED_SPECIALS; id++) specials.set(id, `<|reserved_token_${id}|>`);
  if (addedTokensDecoder && typeof addedTokensDecoder === 'object') {
    for (const [idText, entry] of Object.entries(addedTokensDecoder as Record<string, unknown>)) {
      const id = Number(idText);
      const content = (entry as { content?: unknown })?.content;
      if (!Number.isInteger(id) || typeof content !== 'string') continue;
      specials.set(id, content);
      if ((entry as { special?: unknown }).special === false) plain.add(id);
    }
  }
  return { specials, plain };
}
