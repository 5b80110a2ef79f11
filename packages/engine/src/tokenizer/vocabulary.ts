/**
 * A tokenizer's vocabulary as text, for constrained decoding: each id's token spelled as
 * tokenizer.json spells it, and how that spelling maps to text. Read from tokenizer.json itself
 * (model vocabulary plus added tokens), never re-derived by encoding.
 */
import { byteToUnicode } from './byte-level.js';

export interface TokenVocabulary {
  /**
   * Each id's token: `byte_level` in GPT-2's byte-to-unicode alphabet, `byte_fallback` in
   * SentencePiece spelling (`▁` for a space, `<0x0A>` for a byte), `raw` as text. '' for an id the
   * tokenizer does not define.
   */
  tokens: string[];
  kind: 'byte_level' | 'byte_fallback' | 'raw';
  /** The tokenizer puts a space before the text (SentencePiece's "▁" on the first word). */
  prependSpace: boolean;
  /** Special tokens (`special: true` added tokens, dropped when decoding): id → text. */
  specials: Record<number, string>;
}

type Json = Record<string, unknown>;

function decoderTypes(d: unknown): string[] {
  if (!d || typeof d !== 'object') return [];
  const o = d as Json;
  const own = typeof o.type === 'string' ? [o.type] : [];
  const inner = Array.isArray(o.decoders) ? o.decoders.flatMap(decoderTypes) : [];
  return [...own, ...inner];
}

function prependsSpace(tokenizer: Json): boolean {
  const parts = [tokenizer.normalizer, tokenizer.pre_tokenizer].flatMap(function walk(x: unknown): Json[] {
    if (!x || typeof x !== 'object') return [];
    const o = x as Json;
    return [o, ...(Array.isArray(o.normalizers) ? o.normalizers.flatMap(walk) : []), ...(Array.isArray(o.pretokenizers) ? o.pretokenizers.flatMap(walk) : [])];
  });
  return parts.some(
    (p) =>
      (p.type === 'Prepend' && p.prepend === '▁') ||
      (p.type === 'Metaspace' && (p.prepend_scheme === 'always' || p.prepend_scheme === 'first' || p.add_prefix_space === true)),
  );
}

/** The vocabulary of a parsed tokenizer.json. */
export function vocabularyOf(tokenizer: Json): TokenVocabulary {
  const model = (tokenizer.model ?? {}) as Json;
  const types = decoderTypes(tokenizer.decoder);
  const kind: TokenVocabulary['kind'] = types.includes('ByteLevel') ? 'byte_level' : types.includes('ByteFallback') ? 'byte_fallback' : 'raw';
  const tokens: string[] = [];
  const put = (id: number, t: string) => {
    if (Number.isInteger(id) && id >= 0) tokens[id] = t;
  };
  const v = model.vocab;
  if (Array.isArray(v)) v.forEach((entry, id) => put(id, String(Array.isArray(entry) ? entry[0] : entry))); // Unigram: [piece, score]
  else if (v && typeof v === 'object') for (const [t, id] of Object.entries(v as Record<string, number>)) put(id, t);
  // Added tokens are stored as plain text; spell them like the rest so they decode to that text.
  const bytes = byteToUnicode();
  const spell = (text: string) => (kind === 'byte_level' ? Array.from(Buffer.from(text, 'utf8'), (b) => bytes[b]).join('') : kind === 'byte_fallback' ? text.replace(/ /g, '▁') : text);
  const specials: Record<number, string> = {};
  for (const a of Array.isArray(tokenizer.added_tokens) ? (tokenizer.added_tokens as Json[]) : []) {
    if (typeof a.content !== 'string' || typeof a.id !== 'number') continue;
    put(a.id, spell(a.content));
    if (a.special === true) specials[a.id] = a.content;
  }
  for (let i = 0; i < tokens.length; i++) tokens[i] ??= '';
  return { tokens, kind, prependSpace: prependsSpace(tokenizer), specials };
}
