/**
 * Drafting with a checkpoint's multi-token-prediction layer (model/mtp.ts). The MTP cache keeps one row
 * per position j whose model hidden state h_j and next token t_{j+1} are both known (confirmed ones
 * only). To draft after the model has run positions 0..m-1 and picked t_m: the rows not yet fed are
 * fed (the last, j = m-1, predicts t_{m+1}: the first draft token), then each further draft token feeds
 * the MTP layer its own output as the stand-in for the model's hidden state (as vLLM chains one MTP
 * layer), and those stand-in rows are dropped again. Greedy drafts: the verify step (speculate.ts) keeps
 * the output the plain decode's whatever is drafted.
 */
import type { KVCache } from '../model/forward.js';
import type { MtpHead } from '../model/mtp.js';
import { argmax } from './sampler.js';

export class MtpDrafter {
  readonly head: MtpHead;
  readonly #cache: KVCache;
  /** Final hidden rows of positions from #from on that the MTP layer has not been fed yet. */
  #pending: Float32Array[] = [];
  #from = 0;

  constructor(head: MtpHead, capacity: number) {
    this.head = head;
    this.#cache = head.newCache(capacity);
  }

  /** The model ran positions from `from` on: their final hidden states, [n, hidden] (only confirmed rows). */
  confirm(from: number, hidden: Float32Array, n: number): void {
    const D = this.head.config.hiddenSize;
    if (from !== this.#from + this.#pending.length) throw new Error(`MtpDrafter: hidden rows from position ${from}, expected ${this.#from + this.#pending.length}`);
    for (let b = 0; b < n; b++) this.#pending.push(hidden.slice(b * D, (b + 1) * D));
  }

  /**
   * Up to `k` draft tokens after `context` (the prompt and the tokens picked so far: positions 0..m,
   * the model having run 0..m-1).
   */
  async draft(context: readonly number[], k: number): Promise<number[]> {
    const D = this.head.config.hiddenSize;
    const V = this.head.config.vocabSize;
    const m = context.length - 1;
    if (k < 1) return [];
    if (this.#from + this.#pending.length !== m) throw new Error(`MtpDrafter: hidden states known up to position ${this.#from + this.#pending.length}, the context needs ${m}`);
    const cache = this.#cache;
    const B = this.head.block.maxBatch;
    let logits: Float32Array | null = null;
    let hidden: Float32Array | null = null;
    // Catch up: rows j = #from .. m-1, (h_j, t_{j+1}), in steps of at most maxBatch rows.
    while (this.#pending.length > 0) {
      const n = Math.min(B, this.#pending.length);
      const rows = new Float32Array(n * D);
      for (let b = 0; b < n; b++) rows.set(this.#pending[b], b * D);
      const j = this.#from;
      const out = await this.head.forward(rows, context.slice(j + 1, j + 1 + n), cache);
      logits = out.logits.subarray((n - 1) * V, n * V);
      hidden = out.hidden.subarray((n - 1) * D, n * D);
      this.#pending.splice(0, n);
      this.#from += n;
    }
    if (!logits || !hidden) return []; // nothing confirmed yet to draft from (the very first step)
    const drafted = [argmax(logits)];
    const kept = cache.length;
    let stand = Float32Array.from(hidden);
    while (drafted.length < k && cache.length < cache.capacity) {
      const out = await this.head.forward(stand, [drafted[drafted.length - 1]], cache);
      drafted.push(argmax(out.logits));
      stand = Float32Array.from(out.hidden);
    }
    cache.length = kept; // rows fed a stand-in hidden state: the model's own come with the next confirm
    return drafted;
  }

  /** Rows confirmed past `length` were a wrong guess after all (the session rewound): forget them. */
  rewind(length: number): void {
    if (length < this.#from) {
      this.#pending = [];
      this.#from = length;
      this.#cache.length = Math.min(this.#cache.length, length);
    } else this.#pending.length = Math.min(this.#pending.length, length - this.#from);
  }

  dispose(): void {
    this.head.releaseCache(this.#cache);
  }
}
