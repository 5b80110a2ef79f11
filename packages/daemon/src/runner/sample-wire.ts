/**
 * What travels between the driver and a sampling rank of another stage besides the header: the
 * request's sampling payload (after a BEGIN header, to the sampling rank only) and the sampled token
 * coming back, with its logprobs when the request asked for them.
 *
 *   payload  UTF-8 JSON { constraint?, logprobs?, stopTokenIds, penalties?, history? }
 *   reply    Int32Array [id]                                     without logprobs
 *            Float64Array [id, logprob, top ids (k), top logprobs (k)] with k = logprobs requested (<= 20)
 *   verified Int32Array [n], then n replies                     a draft's check: the n tokens confirmed
 */
import type { ConstraintSpec, SamplingPenalties, TokenLogprob } from '@orchard/engine';

export interface SamplingPayload {
  constraint?: ConstraintSpec;
  logprobs?: number;
  stopTokenIds: number[];
  /** Sampling beyond the header's four knobs (min-p, typical-p, penalties, logit bias). */
  penalties?: SamplingPenalties;
  /** The prompt's last tokens the penalties' window starts with. */
  history?: number[];
}

/** Logprob alternatives a reply can carry (OpenAI's top_logprobs limit). */
export const MAX_TOP = 20;

export function encodePayload(p: SamplingPayload): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(p));
}

export function decodePayload(bytes: Uint8Array): SamplingPayload {
  const p = JSON.parse(new TextDecoder().decode(bytes)) as SamplingPayload;
  if (!Array.isArray(p.stopTokenIds)) throw new Error('data plane: sampling payload without stopTokenIds');
  if (p.logprobs !== undefined && !(Number.isInteger(p.logprobs) && p.logprobs >= 0 && p.logprobs <= MAX_TOP)) throw new Error(`data plane: sampling payload asks for ${p.logprobs} logprobs (0..${MAX_TOP})`);
  return p;
}

/** One sequence's token reply: its size follows whether (and how many) logprobs were asked for. */
export class TokenReply {
  readonly buffer: Int32Array | Float64Array;
  readonly #top: number;

  constructor(logprobs: number | undefined) {
    this.#top = logprobs ?? -1;
    this.buffer = logprobs === undefined ? new Int32Array(1) : new Float64Array(2 + 2 * logprobs);
  }

  encode(id: number, lp?: TokenLogprob): Int32Array | Float64Array {
    const b = this.buffer;
    b[0] = id;
    if (this.#top < 0) return b;
    if (!lp) throw new Error('data plane: a token reply that asked for logprobs has none');
    b[1] = lp.logprob;
    for (let i = 0; i < this.#top; i++) {
      b[2 + i] = lp.top[i]?.id ?? -1;
      b[2 + this.#top + i] = lp.top[i]?.logprob ?? -Infinity;
    }
    return b;
  }

  decode(): { id: number; logprob?: TokenLogprob } {
    const b = this.buffer;
    const id = b[0];
    if (this.#top < 0) return { id };
    const top: TokenLogprob['top'] = [];
    for (let i = 0; i < this.#top && b[2 + i] >= 0; i++) top.push({ id: b[2 + i], logprob: b[2 + this.#top + i] });
    return { id, logprob: { id, logprob: b[1], top } };
  }
}
