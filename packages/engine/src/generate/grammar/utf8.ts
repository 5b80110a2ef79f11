/**
 * Keeps constrained output valid UTF-8. A byte-level vocabulary has tokens that are single bytes or
 * end mid-character; xgrammar reads such bytes leniently (it accepts lead bytes C0, C1 and F5-F7 and
 * overlong forms), so a grammar alone can yield bytes that decode to U+FFFD — a string that parses
 * but breaks a schema's maxLength or enum. This guard allows a token only if its bytes continue a
 * well-formed sequence (Unicode Table 3-7), by a transition table precomputed per vocabulary.
 */
import { byteToUnicode } from '../../tokenizer/byte-level.js';
import type { TokenVocabulary } from '../../tokenizer/vocabulary.js';

/** States: 0 at a character boundary, 1-3 needing that many 80..BF bytes, 4-7 a restricted second byte. */
const STATES = 8;

function step(state: number, b: number): number {
  const cont = b >= 0x80 && b <= 0xbf;
  switch (state) {
    case 0:
      if (b <= 0x7f) return 0;
      if (b >= 0xc2 && b <= 0xdf) return 1;
      if (b === 0xe0) return 4;
      if ((b >= 0xe1 && b <= 0xec) || b === 0xee || b === 0xef) return 2;
      if (b === 0xed) return 5;
      if (b === 0xf0) return 6;
      if (b >= 0xf1 && b <= 0xf3) return 3;
      if (b === 0xf4) return 7;
      return -1;
    case 1:
      return cont ? 0 : -1;
    case 2:
      return cont ? 1 : -1;
    case 3:
      return cont ? 2 : -1;
    case 4: // E0: A0..BF (no overlong forms)
      return b >= 0xa0 && b <= 0xbf ? 1 : -1;
    case 5: // ED: 80..9F (no surrogates)
      return b >= 0x80 && b <= 0x9f ? 1 : -1;
    case 6: // F0: 90..BF (no overlong forms)
      return b >= 0x90 && b <= 0xbf ? 2 : -1;
    case 7: // F4: 80..8F (nothing past U+10FFFF)
      return b >= 0x80 && b <= 0x8f ? 2 : -1;
  }
  return -1;
}

/** The bytes a token adds to the text, or null for a token with no text (special, undefined). */
function tokenBytes(vocab: TokenVocabulary, token: string, unbyte: Map<string, number>): Uint8Array | null {
  if (token === '') return null;
  if (vocab.kind === 'byte_level') {
    const out: number[] = [];
    for (const ch of token) {
      const b = unbyte.get(ch);
      if (b === undefined) return Buffer.from(token, 'utf8'); // not in the byte alphabet: text as is
      out.push(b);
    }
    return Uint8Array.from(out);
  }
  if (vocab.kind === 'byte_fallback') {
    const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(token);
    if (m) return Uint8Array.of(parseInt(m[1], 16));
    return Buffer.from(token.replace(/▁/g, ' '), 'utf8');
  }
  return Buffer.from(token, 'utf8');
}

/** next[state * V + id]: the state after the token, -1 where it would break UTF-8. */
const tables = new WeakMap<TokenVocabulary, Map<number, Int8Array>>();

function transitions(vocab: TokenVocabulary, V: number): Int8Array {
  let byV = tables.get(vocab);
  if (!byV) tables.set(vocab, (byV = new Map()));
  let next = byV.get(V);
  if (next) return next;
  next = new Int8Array(STATES * V).fill(-1);
  const unbyte = new Map(byteToUnicode().map((c, b) => [c, b]));
  for (let id = 0; id < V; id++) {
    const bytes = tokenBytes(vocab, vocab.tokens[id] ?? '', unbyte);
    for (let s0 = 0; s0 < STATES; s0++) {
      let s = s0;
      if (bytes === null) s = s0 === 0 ? 0 : -1; // a token without text only between characters
      else for (let i = 0; i < bytes.length && s >= 0; i++) s = step(s, bytes[i]);
      next[s0 * V + id] = s;
    }
  }
  byV.set(V, next);
  return next;
}

export interface Utf8Guard {
  /** Per id, the state after it from here: negative where the token would break UTF-8. */
  allowed(): Int8Array;
  accept(id: number): void;
}

export function utf8Guard(vocab: TokenVocabulary, vocabSize: number): Utf8Guard {
  const next = transitions(vocab, vocabSize);
  let state = 0;
  return {
    allowed: () => next.subarray(state * vocabSize, (state + 1) * vocabSize),
    accept(id) {
      state = Math.max(0, next[state * vocabSize + id]);
    },
  };
}
