/**
 * A mixture-of-experts MLP on one tensor rank, llama2.c style: scratch allocated once, then
 *   route every token (router logits in f32, routing.ts),
 *   for each expert this rank holds that some token chose, in expert order:
 *     gather those tokens' rows, run the expert over them as one batch, add its output × weight back,
 *   add the shared experts' output (this rank's rows of them).
 * Experts nobody chose are never touched: a decode step reads top-k experts' bytes, not all of them.
 * The result is this rank's partial sum; the forward pass's all-reduce adds the other ranks' experts.
 */
import type { ModelConfig, MoeConfig } from '../config/config.js';
import { type Backend, matmuls } from '../kernels/backend.js';
import { swigluMlp } from './mlp.js';
import { Router } from './routing.js';
import type { TensorSlice } from './tensor-split.js';
import type { ExpertWeights, MoeWeights } from './weights-moe.js';

export class MoeBlock {
  readonly #moe: MoeConfig;
  readonly #be: Backend;
  readonly #D: number;
  readonly #router: Router;
  readonly #logits: Float32Array; // [B, experts]
  readonly #ids: Int32Array; // [B, k]
  readonly #weights: Float32Array; // [B, k]
  readonly #count: Int32Array; // per local expert: tokens routed to it
  readonly #start: Int32Array; // per local expert: first slot in #slots
  readonly #slotToken: Int32Array; // [B·k] token of each (expert, token) pair, grouped by expert
  readonly #slotWeight: Float32Array;
  readonly #rows: Float32Array; // [B, hidden] gathered inputs
  readonly #y: Float32Array; // [B, hidden] expert outputs
  readonly #hb: Float32Array; // [B, max(I, local shared)]
  readonly #hb2: Float32Array;

  constructor(config: ModelConfig, slice: TensorSlice, backend: Backend, maxBatch: number) {
    const moe = config.moe!;
    this.#moe = moe;
    this.#be = backend;
    this.#D = config.hiddenSize;
    this.#router = new Router(moe);
    const local = slice.experts[1] - slice.experts[0];
    const B = maxBatch;
    const width = Math.max(moe.expertIntermediate, slice.sharedFfn[1] - slice.sharedFfn[0]);
    this.#logits = backend.allocF32(B * moe.experts);
    this.#ids = new Int32Array(B * moe.topK);
    this.#weights = new Float32Array(B * moe.topK);
    this.#count = new Int32Array(local);
    this.#start = new Int32Array(local);
    this.#slotToken = new Int32Array(B * moe.topK);
    this.#slotWeight = new Float32Array(B * moe.topK);
    this.#rows = backend.allocF32(B * this.#D);
    this.#y = backend.allocF32(B * this.#D);
    this.#hb = backend.allocF32(B * width);
    this.#hb2 = backend.allocF32(B * width);
  }

  /** out[n, hidden] = this rank's share of the MoE layer's output for x[n, hidden]. */
  forward(out: Float32Array, x: Float32Array, n: number, w: MoeWeights): void {
    const { topK: k, experts: E } = this.#moe;
    const D = this.#D;
    const be = this.#be;

    // Route: logits = x·Wrᵀ (+ bias), then each token's experts and weights.
    be.matmul(this.#logits, w.router, x, n);
    if (w.routerBias) for (let b = 0; b < n; b++) for (let e = 0; e < E; e++) this.#logits[b * E + e] += w.routerBias[e];
    for (let b = 0; b < n; b++) this.#router.route(this.#logits, b * E, this.#ids, this.#weights, b * k, w.correctionBias);

    // Group the (token, weight) pairs by the local expert they chose (a counting sort; tokens stay in order).
    const first = w.firstExpert;
    const local = w.experts.length;
    this.#count.fill(0);
    for (let i = 0; i < n * k; i++) {
      const e = this.#ids[i] - first;
      if (e >= 0 && e < local) this.#count[e]++;
    }
    for (let e = 0, s = 0; e < local; s += this.#count[e++]) this.#start[e] = s;
    const fill = this.#count.slice();
    for (let i = 0; i < n * k; i++) {
      const e = this.#ids[i] - first;
      if (e < 0 || e >= local) continue;
      const slot = this.#start[e] + this.#count[e] - fill[e]--;
      this.#slotToken[slot] = Math.floor(i / k);
      this.#slotWeight[slot] = this.#weights[i];
    }

    // out = Σ over chosen experts (in expert order) of weight · expert(x).
    out.fill(0, 0, n * D);
    for (let e = 0; e < local; e++) {
      const m = this.#count[e];
      if (m === 0) continue;
      const s0 = this.#start[e];
      for (let j = 0; j < m; j++) this.#rows.set(x.subarray(this.#slotToken[s0 + j] * D, (this.#slotToken[s0 + j] + 1) * D), j * D);
      this.#expert(w.experts[e], m);
      for (let j = 0; j < m; j++) {
        const o = this.#slotToken[s0 + j] * D;
        const g = this.#slotWeight[s0 + j];
        for (let i = 0; i < D; i++) out[o + i] += this.#y[j * D + i] * g;
      }
    }

    // Shared experts see every token: out += shared(x).
    if (w.shared) {
      swigluMlp(be, this.#y, x, n, w.shared, this.#hb, this.#hb2);
      for (let i = 0; i < n * D; i++) out[i] += this.#y[i];
    }
  }

  /** y[m, hidden] = expert(rows[m, hidden]). */
  #expert(w: ExpertWeights, m: number): void {
    if (this.#moe.activation === 'swiglu') {
      swigluMlp(this.#be, this.#y, this.#rows, m, w, this.#hb, this.#hb2);
      return;
    }
    // gpt-oss: biased gate/up, clamped, gate·σ(α·gate)·(up + 1), biased down.
    const I = w.gate.rows;
    const be = this.#be;
    const limit = this.#moe.swigluLimit;
    matmuls(be, [{ out: this.#hb, w: w.gate }, { out: this.#hb2, w: w.up }], this.#rows, m);
    for (let j = 0; j < m; j++) {
      for (let i = 0; i < I; i++) {
        const gate = Math.min(this.#hb[j * I + i] + w.gateBias![i], limit);
        const up = Math.min(Math.max(this.#hb2[j * I + i] + w.upBias![i], -limit), limit);
        this.#hb[j * I + i] = (up + 1) * (gate / (1 + Math.exp(-1.702 * gate)));
      }
    }
    be.matmul(this.#y, w.down, this.#hb, m);
    for (let j = 0; j < m; j++) for (let i = 0; i < this.#D; i++) this.#y[j * this.#D + i] += w.downBias![i];
  }
}
