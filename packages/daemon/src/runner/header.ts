/**
 * The driver's header: what every other rank does next, sent by rank 0 before each step. A fixed-size
 * Float64Array (token ids and seeds are exact in f64), so a follower receives it into one buffer kept
 * for the instance's life:
 *
 *   [0] op        1 begin, 2 forward, 3 stop
 *   [1] n         forward: tokens in this step
 *   [2] sample    forward: 1 when the last stage samples after it
 *   [3..6]        begin: temperature, top_p, top_k, seed of the sequence's sampler
 *   [7] capacity  begin: tokens the sequence's KV cache holds
 *   [8] slot      begin/forward: which of the driver's concurrent sequences (KV cache slot)
 *   [9] payload   begin: bytes of the request payload that follows the header to the sampling rank
 *                 (JSON: output constraint, logprobs), 0 for none
 *   [10..10+n)    forward: the token ids
 */
import type { SamplingOptions } from '@orchard/engine';

export type Header =
  | { op: 'begin'; slot: number; capacity: number; sampling: Required<SamplingOptions>; payloadBytes: number }
  | { op: 'forward'; slot: number; sample: boolean; tokens: Float64Array }
  | { op: 'stop' };

const OP = 0;
const N = 1;
const SAMPLE = 2;
const TEMPERATURE = 3;
const TOP_P = 4;
const TOP_K = 5;
const SEED = 6;
const CAPACITY = 7;
const SLOT = 8;
const PAYLOAD = 9;
/** Fields before the token ids. */
const FIELDS = 10;
const OPS = { begin: 1, forward: 2, stop: 3 } as const;

export class HeaderCodec {
  /** The wire buffer: encode() fills it, recv() into it, then decode(). */
  readonly buffer: Float64Array;
  readonly maxTokens: number;

  constructor(maxTokens: number) {
    this.maxTokens = maxTokens;
    this.buffer = new Float64Array(FIELDS + maxTokens);
  }

  /** Writes `h` into the buffer and returns it (valid until the next encode). */
  encode(h: Header): Float64Array {
    const b = this.buffer;
    b.fill(0);
    b[OP] = OPS[h.op];
    if (h.op === 'stop') return b;
    b[SLOT] = h.slot;
    if (h.op === 'begin') {
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
    b[N] = n;
    b[SAMPLE] = h.sample ? 1 : 0;
    b.set(h.tokens, FIELDS);
    return b;
  }

  /** Reads the buffer; a forward's tokens are a view into it (valid until the next receive). */
  decode(): Header {
    const b = this.buffer;
    switch (b[OP]) {
      case OPS.stop:
        return { op: 'stop' };
      case OPS.begin:
        return { op: 'begin', slot: b[SLOT], capacity: b[CAPACITY], sampling: { temperature: b[TEMPERATURE], topP: b[TOP_P], topK: b[TOP_K], seed: b[SEED] }, payloadBytes: b[PAYLOAD] };
      case OPS.forward: {
        const n = b[N];
        if (!Number.isInteger(n) || n < 1 || n > this.maxTokens) throw new Error(`data plane: forward header with ${n} tokens (1..${this.maxTokens})`);
        return { op: 'forward', slot: b[SLOT], sample: b[SAMPLE] === 1, tokens: b.subarray(FIELDS, FIELDS + n) };
      }
      default:
        throw new Error(`data plane: unknown header op ${b[OP]}`);
    }
  }
}
