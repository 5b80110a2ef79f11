/**
 * The driver's header: what every other rank does next, sent by rank 0 before each step. A fixed-size
 * Float64Array (token ids and seeds are exact in f64), so a follower receives it into one buffer kept
 * for the instance's life:
 *
 *   [0] op        1 begin, 2 forward, 3 stop, 4 end
 *   [1] n         forward: tokens in this step, all sequences together
 *   [2] m         forward: sequences in this step (segments)
 *   [3..6]        begin: temperature, top_p, top_k, seed of the sequence's sampler
 *   [7] capacity  begin: tokens the sequence's KV cache holds
 *   [8] slot      begin/end: which of the driver's concurrent sequences (KV cache slot)
 *   [9] payload   begin: bytes of the request payload that follows the header to the sampling rank
 *                 (JSON: output constraint, logprobs), 0 for none
 *   [10] cached   begin: prompt tokens every rank copies from its prefix cache (the driver sends those
 *                 tokens, Int32, to every rank right after the header)
 *   [11] blocks   begin: the blocks every rank's prefix cache keeps (0: no prefix cache)
 *   [10..10+n)    forward: the token ids, segment after segment
 *   [10+N+3i..)   forward: segment i's slot, its token count, and 1 when the last stage samples its last
 *                 row (N = the most tokens a step carries; a segment has at least one token)
 */
import type { SamplingOptions } from '@orchard/engine';

/** One sequence's part of a forward step: its rows are the next `n` of the step's tokens. */
export interface Segment {
  slot: number;
  n: number;
  /** The last stage samples a token from the segment's last row. */
  sample: boolean;
}

export type Header =
  | { op: 'begin'; slot: number; capacity: number; sampling: Required<SamplingOptions>; payloadBytes: number; cached: number; prefixBlocks: number }
  | { op: 'forward'; segments: Segment[]; tokens: Float64Array }
  | { op: 'end'; slot: number }
  | { op: 'stop' };

const OP = 0;
const N = 1;
const SEGMENTS = 2;
const TEMPERATURE = 3;
const TOP_P = 4;
const TOP_K = 5;
const SEED = 6;
const CAPACITY = 7;
const SLOT = 8;
const PAYLOAD = 9;
const CACHED = 10;
const BLOCKS = 11;
/** Fields before the token ids. */
const FIELDS = 12;
const OPS = { begin: 1, forward: 2, stop: 3, end: 4 } as const;

export class HeaderCodec {
  /** The wire buffer: encode() fills it, recv() into it, then decode(). */
  readonly buffer: Float64Array;
  readonly maxTokens: number;

  constructor(maxTokens: number) {
    this.maxTokens = maxTokens;
    this.buffer = new Float64Array(FIELDS + 4 * maxTokens);
  }

  /** Writes `h` into the buffer and returns it (valid until the next encode). */
  encode(h: Header): Float64Array {
    const b = this.buffer;
    b.fill(0);
    b[OP] = OPS[h.op];
    if (h.op === 'stop') return b;
    if (h.op === 'end') {
      b[SLOT] = h.slot;
      return b;
    }
    if (h.op === 'begin') {
      b[SLOT] = h.slot;
      b[CACHED] = h.cached;
      b[BLOCKS] = h.prefixBlocks;
      b[TEMPERATURE] = h.sampling.temperature;
      b[TOP_P] = h.sampling.topP;
      b[TOP_K] = h.sampling.topK;
      b[SEED] = h.sampling.seed;
      b[CAPACITY] = h.capacity;
      b[PAYLOAD] = h.payloadBytes;
      return b;
    }
    const n = h.tokens.length;
    if (n < 1 || n > this.maxTokens) throw new RangeError(`a forward header carries 1..${this.maxTokens} tokens, got ${n}`);
    if (h.segments.reduce((a, s) => a + s.n, 0) !== n || h.segments.some((s) => s.n < 1)) throw new RangeError(`a forward header's segments must split its ${n} tokens, each taking at least one`);
    b[N] = n;
    b[SEGMENTS] = h.segments.length;
    b.set(h.tokens, FIELDS);
    h.segments.forEach((s, i) => b.set([s.slot, s.n, s.sample ? 1 : 0], FIELDS + this.maxTokens + 3 * i));
    return b;
  }

  /** Reads the buffer; a forward's tokens are a view into it (valid until the next receive). */
  decode(): Header {
    const b = this.buffer;
    switch (b[OP]) {
      case OPS.stop:
        return { op: 'stop' };
      case OPS.begin:
        return { op: 'begin', slot: b[SLOT], capacity: b[CAPACITY], sampling: { temperature: b[TEMPERATURE], topP: b[TOP_P], topK: b[TOP_K], seed: b[SEED] }, payloadBytes: b[PAYLOAD], cached: b[CACHED], prefixBlocks: b[BLOCKS] };
      case OPS.end:
        return { op: 'end', slot: b[SLOT] };
      case OPS.forward: {
        const n = b[N];
        const m = b[SEGMENTS];
        if (!Number.isInteger(n) || n < 1 || n > this.maxTokens) throw new Error(`data plane: forward header with ${n} tokens (1..${this.maxTokens})`);
        if (!Number.isInteger(m) || m < 1 || m > n) throw new Error(`data plane: forward header with ${m} segments for ${n} tokens`);
        const segments: Segment[] = [];
        let total = 0;
        for (let i = 0; i < m; i++) {
          const at = FIELDS + this.maxTokens + 3 * i;
          segments.push({ slot: b[at], n: b[at + 1], sample: b[at + 2] === 1 });
          total += b[at + 1];
        }
        if (total !== n) throw new Error(`data plane: forward header whose segments hold ${total} of its ${n} tokens`);
        return { op: 'forward', segments, tokens: b.subarray(FIELDS, FIELDS + n) };
      }
      default:
        throw new Error(`data plane: unknown header op ${b[OP]}`);
    }
  }
}
