/**
 * Picks the next token from logits: greedy when temperature is 0, otherwise temperature-scaled
 * softmax restricted by top-k then top-p, drawn with a seeded PRNG so a seed reproduces a run.
 */
import { Prng } from '../numeric/prng.js';

export interface SamplingOptions {
  /** 0 = greedy (argmax, lowest id on ties). @default 0 */
  temperature?: number;
  /** Keep the k most likely tokens; 0 = all. @default 0 */
  topK?: number;
  /** Keep the smallest set of most likely tokens whose probability reaches p; 1 = all. @default 1 */
  topP?: number;
  /** PRNG seed. @default 0 */
  seed?: number;
}

export function validateSampling(o: SamplingOptions): void {
  const bad = (name: string, want: string, got: unknown) => new RangeError(`${name} must be ${want}, got ${got}`);
  if (o.temperature !== undefined && !(o.temperature >= 0 && Number.isFinite(o.temperature))) throw bad('temperature', 'a number >= 0', o.temperature);
  if (o.topK !== undefined && !(Number.isInteger(o.topK) && o.topK >= 0)) throw bad('topK', 'an integer >= 0', o.topK);
  if (o.topP !== undefined && !(o.topP > 0 && o.topP <= 1)) throw bad('topP', 'in (0, 1]', o.topP);
  if (o.seed !== undefined && !Number.isInteger(o.seed)) throw bad('seed', 'an integer', o.seed);
}

export function argmax(logits: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}

export class Sampler {
  readonly temperature: number;
  readonly topK: number;
  readonly topP: number;
  readonly #rng: Prng;

  constructor(options: SamplingOptions = {}) {
    validateSampling(options);
    this.temperature = options.temperature ?? 0;
    this.topK = options.topK ?? 0;
    this.topP = options.topP ?? 1;
    this.#rng = new Prng(options.seed ?? 0);
  }

  sample(logits: ArrayLike<number>): number {
    if (this.temperature === 0 || this.topK === 1) return argmax(logits);
    const V = logits.length;
    // Candidates by descending logit (ties: lower id first); top-k cuts the list.
    const ids = this.topK > 0 && this.topK < V ? topKIds(logits, this.topK) : Array.from({ length: V }, (_, i) => i);
    ids.sort((a, b) => logits[b] - logits[a] || a - b);
    const max = logits[ids[0]];
    const probs = ids.map((i) => Math.exp((logits[i] - max) / this.temperature));
    let total = probs.reduce((a, b) => a + b, 0);
    if (this.topP < 1) {
      let cum = 0;
      let keep = 0;
      while (keep < probs.length) {
        cum += probs[keep++] / total;
        if (cum >= this.topP) break;
      }
      probs.length = keep;
      ids.length = keep;
      total = probs.reduce((a, b) => a + b, 0);
    }
    let r = this.#rng.next() * total;
    for (let i = 0; i < probs.length; i++) {
      r -= probs[i];
      if (r < 0) return ids[i];
    }
    return ids[ids.length - 1];
  }
}

/** Ids of the k largest logits (ties: lower id wins), unordered — a size-k min-heap, O(V log k). */
function topKIds(logits: ArrayLike<number>, k: number): number[] {
  const heap: number[] = [];
  // a is "smaller" than b when its logit is lower, or equal with a higher id.
  const less = (a: number, b: number) => logits[a] < logits[b] || (logits[a] === logits[b] && a > b);
  const down = (i: number) => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heap.length && less(heap[l], heap[m])) m = l;
      if (r < heap.length && less(heap[r], heap[m])) m = r;
      if (m === i) return;
      [heap[i], heap[m]] = [heap[m], heap[i]];
      i = m;
    }
  };
  for (let id = 0; id < logits.length; id++) {
    if (heap.length < k) {
      heap.push(id);
      for (let i = heap.length - 1; i > 0; ) {
        const p = (i - 1) >> 1;
        if (!less(heap[i], heap[p])) break;
        [heap[i], heap[p]] = [heap[p], heap[i]];
        i = p;
      }
    } else if (less(heap[0], id)) {
      heap[0] = id;
      down(0);
    }
  }
  return heap;
}

/** A sampled token's log-probability and the most likely alternatives (OpenAI's `logprobs`). */
export interface TokenLogprob {
  id: number;
  logprob: number;
  /** The `top` most likely ids at this step, most likely first (ties: lower id first). */
  top: { id: number; logprob: number }[];
}

/**
 * Log-probabilities under the model's distribution at this step: log-softmax of the raw logits (before
 * temperature, top-k/p or a grammar's mask, as OpenAI reports them). `top` alternatives, 0..20.
 */
export function tokenLogprob(logits: ArrayLike<number>, id: number, top: number): TokenLogprob {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  const logZ = max + Math.log(sum);
  const ids = top > 0 ? topKIds(logits, Math.min(top, logits.length)).sort((a, b) => logits[b] - logits[a] || a - b) : [];
  return { id, logprob: logits[id] - logZ, top: ids.map((i) => ({ id: i, logprob: logits[i] - logZ })) };
}
