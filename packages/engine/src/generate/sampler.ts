/**
 * Picks the next token from logits, as llama-server and Ollama offer sampling:
 *
 *   1. logit_bias: a bias added to chosen ids' logits (-Infinity bans one);
 *   2. penalties on the last `repeatLastN` tokens of the sequence (prompt included, as llama.cpp
 *      feeds its penalty window): for a token seen c > 0 times, repeat divides a positive logit by
 *      the penalty (multiplies a negative one), then frequency and presence subtract c * f + p;
 *   3. greedy (argmax, lowest id on ties) when temperature is 0; otherwise
 *   4. top-k, temperature-scaled softmax, then typical-p, top-p and min-p cut the candidates, each
 *      keeping at least one, and a seeded PRNG draws from what is left (a seed reproduces a run).
 *
 * Temperature comes before the probability cuts, as in Hugging Face's warpers, vLLM and Ollama's own
 * engine (llama.cpp cuts first, on untempered probabilities; the two agree at temperature 1).
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

/** What shapes the logits beyond the four basic knobs (each off at its default). */
export interface SamplingPenalties {
  /** Drop tokens whose probability is below min_p times the most likely one's. 0 = off. @default 0 */
  minP?: number;
  /** Locally typical sampling: keep the tokens closest to the distribution's entropy until their mass reaches p. 1 = off. @default 1 */
  typicalP?: number;
  /** Repeat penalty (> 1 discourages, < 1 encourages) for tokens in the window. 1 = off. @default 1 */
  repeatPenalty?: number;
  /** Subtracted once per occurrence of a token in the window. 0 = off. @default 0 */
  frequencyPenalty?: number;
  /** Subtracted once from every token present in the window. 0 = off. @default 0 */
  presencePenalty?: number;
  /** The penalties' window: the sequence's last n tokens (prompt included); 0 = none. @default 64 */
  repeatLastN?: number;
  /** Token id → value added to its logit (-Infinity bans it). */
  logitBias?: Record<number, number>;
}

export type FullSamplingOptions = SamplingOptions & SamplingPenalties;

/** The penalty window llama.cpp and Ollama use when none is given. */
export const DEFAULT_REPEAT_LAST_N = 64;

export function validateSampling(o: FullSamplingOptions): void {
  const bad = (name: string, want: string, got: unknown) => new RangeError(`${name} must be ${want}, got ${got}`);
  const finite = (v: number | undefined) => v === undefined || Number.isFinite(v);
  if (o.temperature !== undefined && !(o.temperature >= 0 && Number.isFinite(o.temperature))) throw bad('temperature', 'a number >= 0', o.temperature);
  if (o.topK !== undefined && !(Number.isInteger(o.topK) && o.topK >= 0)) throw bad('topK', 'an integer >= 0', o.topK);
  if (o.topP !== undefined && !(o.topP > 0 && o.topP <= 1)) throw bad('topP', 'in (0, 1]', o.topP);
  if (o.seed !== undefined && !Number.isInteger(o.seed)) throw bad('seed', 'an integer', o.seed);
  if (o.minP !== undefined && !(o.minP >= 0 && o.minP <= 1)) throw bad('minP', 'in [0, 1]', o.minP);
  if (o.typicalP !== undefined && !(o.typicalP > 0 && o.typicalP <= 1)) throw bad('typicalP', 'in (0, 1]', o.typicalP);
  if (o.repeatPenalty !== undefined && !(o.repeatPenalty > 0 && Number.isFinite(o.repeatPenalty))) throw bad('repeatPenalty', 'a number > 0', o.repeatPenalty);
  if (!finite(o.frequencyPenalty)) throw bad('frequencyPenalty', 'a finite number', o.frequencyPenalty);
  if (!finite(o.presencePenalty)) throw bad('presencePenalty', 'a finite number', o.presencePenalty);
  if (o.repeatLastN !== undefined && !(Number.isInteger(o.repeatLastN) && o.repeatLastN >= 0)) throw bad('repeatLastN', 'an integer >= 0', o.repeatLastN);
  for (const [id, v] of Object.entries(o.logitBias ?? {})) {
    if (!/^\d+$/.test(id)) throw bad('logitBias key', 'a token id (an integer >= 0)', id);
    if (typeof v !== 'number' || Number.isNaN(v) || v === Infinity) throw bad(`logitBias[${id}]`, 'a number or -Infinity', v);
  }
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
  readonly minP: number;
  readonly typicalP: number;
  readonly repeatPenalty: number;
  readonly frequencyPenalty: number;
  readonly presencePenalty: number;
  readonly repeatLastN: number;
  readonly #bias: [number, number][];
  readonly #rng: Prng;
  /** The penalty window: the sequence's last repeatLastN tokens, oldest first. */
  readonly #window: number[];

  /**
   * `history`: the tokens the sequence holds before the first sample (its prompt); the penalties'
   * window starts with their tail. Each sampled token joins it.
   */
  constructor(options: FullSamplingOptions = {}, history: ArrayLike<number> = []) {
    validateSampling(options);
    this.temperature = options.temperature ?? 0;
    this.topK = options.topK ?? 0;
    this.topP = options.topP ?? 1;
    this.minP = options.minP ?? 0;
    this.typicalP = options.typicalP ?? 1;
    this.repeatPenalty = options.repeatPenalty ?? 1;
    this.frequencyPenalty = options.frequencyPenalty ?? 0;
    this.presencePenalty = options.presencePenalty ?? 0;
    this.repeatLastN = options.repeatLastN ?? DEFAULT_REPEAT_LAST_N;
    this.#bias = Object.entries(options.logitBias ?? {}).map(([id, v]) => [Number(id), v]);
    this.#rng = new Prng(options.seed ?? 0);
    const n = this.penalizes ? Math.min(this.repeatLastN, history.length) : 0;
    this.#window = Array.from({ length: n }, (_, i) => history[history.length - n + i]);
  }

  /** Whether any penalty reads the sequence's history. */
  get penalizes(): boolean {
    return this.repeatLastN > 0 && (this.repeatPenalty !== 1 || this.frequencyPenalty !== 0 || this.presencePenalty !== 0);
  }

  /** The penalty window's tokens, oldest first (for tests and diagnostics). */
  get window(): readonly number[] {
    return this.#window;
  }

  /**
   * The logits after logit_bias and the penalties: a copy when either changes them (the caller's
   * logits stay the model's own, for logprobs), else the same array.
   */
  adjust(logits: ArrayLike<number>): ArrayLike<number> {
    if (this.#bias.length === 0 && (!this.penalizes || this.#window.length === 0)) return logits;
    const out = Float32Array.from(logits);
    for (const [id, v] of this.#bias) {
      if (id >= out.length) throw new RangeError(`logitBias names token ${id}; the vocabulary has ${out.length}`);
      out[id] += v;
    }
    if (!this.penalizes) return out;
    const counts = new Map<number, number>();
    for (const id of this.#window) counts.set(id, (counts.get(id) ?? 0) + 1);
    for (const [id, c] of counts) {
      if (id < 0 || id >= out.length) continue;
      let l = out[id];
      l = l <= 0 ? l * this.repeatPenalty : l / this.repeatPenalty;
      out[id] = l - c * this.frequencyPenalty - this.presencePenalty;
    }
    return out;
  }

  /** Picks a token; it joins the penalty window. */
  sample(logits: ArrayLike<number>): number {
    const id = this.#draw(this.adjust(logits));
    if (this.penalizes) {
      this.#window.push(id);
      if (this.#window.length > this.repeatLastN) this.#window.shift();
    }
    return id;
  }

  /**
   * The candidates a sample draws from and their (unnormalised) weights, most likely first — what
   * the cuts leave. Greedy leaves one.
   */
  candidates(logits: ArrayLike<number>): { ids: number[]; weights: number[] } {
    if (this.temperature === 0 || this.topK === 1) return { ids: [argmax(logits)], weights: [1] };
    const V = logits.length;
    // Candidates by descending logit (ties: lower id first); top-k cuts the list.
    const ids = this.topK > 0 && this.topK < V ? topKIds(logits, this.topK) : Array.from({ length: V }, (_, i) => i);
    ids.sort((a, b) => logits[b] - logits[a] || a - b);
    const max = logits[ids[0]];
    let probs = ids.map((i) => Math.exp((logits[i] - max) / this.temperature));
    const keep = (n: number) => {
      n = Math.max(1, n);
      probs.length = Math.min(probs.length, n);
      ids.length = probs.length;
    };
    if (this.typicalP < 1) {
      const total = sum(probs);
      const p = probs.map((w) => w / total);
      const entropy = -p.reduce((h, q) => (q > 0 ? h + q * Math.log(q) : h), 0);
      // Most typical first: surprisal closest to the entropy (ties: the more likely, then lower id).
      const order = p.map((_, i) => i).sort((a, b) => Math.abs(-Math.log(p[a]) - entropy) - Math.abs(-Math.log(p[b]) - entropy) || a - b);
      let cum = 0;
      let n = 0;
      while (n < order.length) {
        cum += p[order[n++]];
        if (cum >= this.typicalP) break;
      }
      const kept = order.slice(0, Math.max(1, n)).sort((a, b) => a - b);
      const keptIds = kept.map((i) => ids[i]);
      probs = kept.map((i) => probs[i]);
      ids.length = 0;
      ids.push(...keptIds);
    }
    if (this.topP < 1) {
      const total = sum(probs);
      let cum = 0;
      let n = 0;
      while (n < probs.length) {
        cum += probs[n++] / total;
        if (cum >= this.topP) break;
      }
      keep(n);
    }
    if (this.minP > 0) {
      // probs[0] is the most likely's weight: keep those at least min_p of it.
      const floor = this.minP * probs[0];
      let n = 0;
      while (n < probs.length && probs[n] >= floor) n++;
      keep(n);
    }
    return { ids, weights: probs };
  }

  #draw(logits: ArrayLike<number>): number {
    const { ids, weights } = this.candidates(logits);
    if (this.temperature === 0 || this.topK === 1) return ids[0];
    // A draw even when one candidate is left: the PRNG's position follows the step, not the cuts.
    let r = this.#rng.next() * sum(weights);
    for (let i = 0; i < weights.length; i++) {
      r -= weights[i];
      if (r < 0) return ids[i];
    }
    return ids[ids.length - 1];
  }
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
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

const PENALTY_KEYS = ['minP', 'typicalP', 'repeatPenalty', 'frequencyPenalty', 'presencePenalty', 'repeatLastN', 'logitBias'] as const;

/** The penalty options a request sets (those it leaves out stay out: a sampling rank gets them as JSON). */
export function penaltiesOf(o: FullSamplingOptions): SamplingPenalties {
  const out: Record<string, unknown> = {};
  for (const k of PENALTY_KEYS) if (o[k] !== undefined) out[k] = o[k];
  return out as SamplingPenalties;
}

/** The prompt tokens a sampler of these options reads (the penalty window's start): none without penalties. */
export function penaltyHistory(o: FullSamplingOptions, prompt: ArrayLike<number>): number[] {
  const s = new Sampler({ ...penaltiesOf(o) }, prompt);
  return [...s.window];
}
