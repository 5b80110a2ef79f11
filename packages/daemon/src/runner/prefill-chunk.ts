/**
 * How many prompt rows a batched step may carry while other sequences decode (chunked prefill), from
 * measured step times. What a chunk of p rows adds to a decode step is measured per p (a running
 * average of the step's time minus that of a decode-only step), and the chunk is the largest p whose
 * cost stays within `stretch` × a decode step — so the running streams' inter-token time stays within
 * (1 + stretch)× its undisturbed value while a long prompt is fed. The cost is not linear in p (a
 * 2-row f32 matmul streams its weights like decode; 3 rows already run compute-bound kernels), so each
 * size is measured rather than extrapolated: the chunk grows one row at a time while the sizes tried
 * fit, so no step overshoots by more than one row's cost, and steps back when a size's cost grows past
 * the budget (a prompt's attention grows with its length). A size found too dear is tried again after
 * RETRY mixed steps, so one noisy step does not cap the chunk for good.
 */
export interface PrefillChunkOptions {
  /** Share of a decode step a prompt chunk may add to it. @default 0.75 */
  stretch?: number;
}

/** Weight of the newest observation in the running averages. */
const NEW = 0.25;
/** Mixed steps after which the size above the current chunk is measured again. */
const RETRY = 64;

export class PrefillChunker {
  readonly stretch: number;
  /** Running average of a step with no prompt rows, ms (0: none measured yet). */
  decodeMs = 0;
  /** Running average of what p prompt rows added to a decode step, ms, by p. */
  readonly extraMs = new Map<number, number>();
  #mixed = 0;

  constructor(o: PrefillChunkOptions = {}) {
    this.stretch = o.stretch ?? 0.75;
    if (!(this.stretch > 0)) throw new RangeError(`prefill chunk: stretch must be positive, got ${this.stretch}`);
  }

  /** Prompt rows for a step that also decodes, at most `room`. */
  rows(room: number): number {
    if (room < 1) return 0;
    if (this.decodeMs === 0) return 1;
    const budget = this.stretch * this.decodeMs;
    let p = 1;
    for (;;) {
      const cost = this.extraMs.get(p);
      if (cost === undefined) return p; // not measured yet: this step measures it
      if (cost > budget) return Math.max(1, p - 1);
      if (p === room) return p;
      p++;
    }
  }

  /** A finished step: `decodeRows` sequences decoding, `promptRows` prompt rows, `ms` its time. */
  observe(decodeRows: number, promptRows: number, ms: number): void {
    if (decodeRows === 0) return; // a prefill-only step says nothing about a decode step
    if (promptRows === 0) {
      this.decodeMs = this.decodeMs === 0 ? ms : this.decodeMs + NEW * (ms - this.decodeMs);
      return;
    }
    if (this.decodeMs === 0) return;
    const extra = Math.max(0, ms - this.decodeMs);
    const was = this.extraMs.get(promptRows);
    this.extraMs.set(promptRows, was === undefined ? extra : was + NEW * (extra - was));
    if (++this.#mixed % RETRY === 0) this.extraMs.delete(promptRows + 1);
  }
}
