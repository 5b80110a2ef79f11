/**
 * The bookkeeping of a mixture-of-experts step, free of kernels: which (token, weight) pairs each local
 * expert runs (grouped by expert, tokens in order) and, per token, its slots in expert order, so the
 * experts' outputs can be summed token by token in the order HF sums them (expert order).
 */

/** Slots grouped by local expert: slot s runs token slotToken[s] with weight slotWeight[s]. */
export class ExpertGroups {
  readonly k: number;
  /** Per local expert: tokens routed to it. */
  readonly count: Int32Array;
  /** Per local expert: its first slot. */
  readonly start: Int32Array;
  /** [B·k] each slot's token, slots grouped by expert in expert order, tokens ascending within. */
  readonly slotToken: Int32Array;
  readonly slotWeight: Float32Array;
  /** [B·k] per token t, its slots in expert order at tokenSlots[t·k ..], tokenCount[t] of them. */
  readonly tokenSlots: Int32Array;
  readonly tokenCount: Int32Array;
  /** Slots filled by the last `group`. */
  slots = 0;
  readonly #fill: Int32Array;

  constructor(localExperts: number, k: number, maxBatch: number) {
    this.k = k;
    this.count = new Int32Array(localExperts);
    this.start = new Int32Array(localExperts);
    this.#fill = new Int32Array(localExperts);
    this.slotToken = new Int32Array(maxBatch * k);
    this.slotWeight = new Float32Array(maxBatch * k);
    // (+3: combineExperts reads four slots' entries at a time, the unused ones ignored)
    this.tokenSlots = new Int32Array(maxBatch * k + 3);
    this.tokenCount = new Int32Array(maxBatch);
  }

  /**
   * Groups n tokens' choices: ids/weights [n, k] of global expert ids, of which this rank holds
   * first .. first+localExperts-1 (the others are skipped). A counting sort: tokens stay in order.
   */
  group(ids: Int32Array, weights: Float32Array, n: number, first: number): void {
    const k = this.k;
    const local = this.count.length;
    const count = this.count;
    count.fill(0);
    for (let i = 0; i < n * k; i++) {
      const e = ids[i] - first;
      if (e >= 0 && e < local) count[e]++;
    }
    let s = 0;
    for (let e = 0; e < local; e++) {
      this.start[e] = s;
      this.#fill[e] = s;
      s += count[e];
    }
    this.slots = s;
    for (let i = 0; i < n * k; i++) {
      const e = ids[i] - first;
      if (e < 0 || e >= local) continue;
      const slot = this.#fill[e]++;
      this.slotToken[slot] = (i / k) | 0;
      this.slotWeight[slot] = weights[i];
    }
    // Walking the slots in order lists each token's slots in expert order.
    this.tokenCount.fill(0, 0, n);
    for (let slot = 0; slot < s; slot++) {
      const t = this.slotToken[slot];
      this.tokenSlots[t * k + this.tokenCount[t]++] = slot;
    }
  }
}

/**
 * out[t, ·] = Σ over token t's slots in expert order of slotWeight · y[slot, ·], for t < n, bit for bit
 * what `out.fill(0)` then, expert by expert, `out[t·D + i] += y[slot·D + i] · weight` gives: every step
 * is the exact f64 product added to the f32 sum and rounded to f32 (Math.fround). Token by token, up to
 * four slots per pass, the sum stays in a register between slots instead of going through memory.
 */
export function combineExperts(out: Float32Array, y: Float32Array, groups: ExpertGroups, n: number, D: number): void {
  const { k, tokenSlots, tokenCount, slotWeight } = groups;
  for (let t = 0; t < n; t++) {
    const o = t * D;
    const c = tokenCount[t];
    out.fill(0, o, o + D);
    for (let q = 0; q < c; q += 4) {
      const at = t * k + q;
      accumulate(out, o, y, D, Math.min(4, c - q), tokenSlots[at] * D, slotWeight[tokenSlots[at]], tokenSlots[at + 1] * D, slotWeight[tokenSlots[at + 1]], tokenSlots[at + 2] * D, slotWeight[tokenSlots[at + 2]], tokenSlots[at + 3] * D, slotWeight[tokenSlots[at + 3]]);
    }
  }
}

/** out[o + i] += the c (1..4) rows y[y0 + i]·g0, … in order, each sum rounded to f32. Unused rows' arguments are ignored. */
function accumulate(out: Float32Array, o: number, y: Float32Array, D: number, c: number, y0: number, g0: number, y1: number, g1: number, y2: number, g2: number, y3: number, g3: number): void {
  const f = Math.fround;
  if (c === 1) for (let i = 0; i < D; i++) out[o + i] += y[y0 + i] * g0;
  else if (c === 2) for (let i = 0; i < D; i++) out[o + i] = f(out[o + i] + y[y0 + i] * g0) + y[y1 + i] * g1;
  else if (c === 3) for (let i = 0; i < D; i++) out[o + i] = f(f(out[o + i] + y[y0 + i] * g0) + y[y1 + i] * g1) + y[y2 + i] * g2;
  else for (let i = 0; i < D; i++) out[o + i] = f(f(f(out[o + i] + y[y0 + i] * g0) + y[y1 + i] * g1) + y[y2 + i] * g2) + y[y3 + i] * g3;
}
