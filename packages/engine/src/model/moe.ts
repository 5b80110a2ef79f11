/**
 * A mixture-of-experts MLP on one tensor rank, llama2.c style: scratch allocated once, then
 *   route every token (router logits in f32, routing.ts) and group the choices by expert (moe-groups.ts),
 *   for each expert this rank holds that some token chose, in expert order:
 *     gather those tokens' rows, run the expert over them as one batch into its slots' output rows,
 *   sum each token's slots × weights in expert order (combineExperts), add the shared experts' output.
 * A single token (decode) skips the gather and runs every chosen expert's gate/up off one preparation of
 * its activations, then one SwiGLU over all of them.
 * Experts nobody chose are never touched: a decode step reads top-k experts' bytes, not all of them.
 * The result is this rank's partial sum; the forward pass's all-reduce adds the other ranks' experts.
 */
import type { ModelConfig, MoeConfig } from '../config/config.js';
import { type Backend, type Weight, matmuls } from '../kernels/backend.js';
import { applySwiglu, swigluMlp } from './mlp.js';
import { ExpertGroups, combineExperts } from './moe-groups.js';
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
  readonly #groups: ExpertGroups;
  readonly #rows: Float32Array; // [B, hidden] gathered inputs
  readonly #y: Float32Array; // [max(B·k, B), hidden] each slot's expert output; then the shared experts'
  readonly #hb: Float32Array; // [max(B, k), max(I, local shared)]
  readonly #hb2: Float32Array;
  /** Decode: per chosen expert j, its gate/up/down outputs' rows; the gate/up jobs of j experts at [j]. */
  readonly #hbRow: Float32Array[];
  readonly #hb2Row: Float32Array[];
  readonly #yRow: Float32Array[];
  readonly #jobs: { out: Float32Array; w: Weight }[][];

  constructor(config: ModelConfig, slice: TensorSlice, backend: Backend, maxBatch: number) {
    const moe = config.moe!;
    this.#moe = moe;
    this.#be = backend;
    const D = config.hiddenSize;
    this.#D = D;
    this.#router = new Router(moe);
    const local = slice.experts[1] - slice.experts[0];
    const B = maxBatch;
    const k = moe.topK;
    const I = moe.expertIntermediate;
    const width = Math.max(I, slice.sharedFfn[1] - slice.sharedFfn[0]);
    this.#logits = backend.allocF32(B * moe.experts);
    this.#ids = new Int32Array(B * k);
    this.#weights = new Float32Array(B * k);
    this.#groups = new ExpertGroups(local, k, B);
    this.#rows = backend.allocF32(B * D);
    this.#y = backend.allocF32(Math.max(B * k, B) * D);
    this.#hb = backend.allocF32(Math.max(B, k) * width);
    this.#hb2 = backend.allocF32(Math.max(B, k) * width);
    this.#hbRow = Array.from({ length: k }, (_, j) => this.#hb.subarray(j * I, (j + 1) * I));
    this.#hb2Row = Array.from({ length: k }, (_, j) => this.#hb2.subarray(j * I, (j + 1) * I));
    this.#yRow = Array.from({ length: k }, (_, j) => this.#y.subarray(j * D, (j + 1) * D));
    this.#jobs = Array.from({ length: k + 1 }, (_, c) => Array.from({ length: 2 * c }, (_, i) => ({ out: (i & 1 ? this.#hb2Row : this.#hbRow)[i >> 1], w: null as unknown as Weight })));
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

    // Group the (token, weight) pairs by the local expert they chose; each slot's output row in #y.
    const g = this.#groups;
    g.group(this.#ids, this.#weights, n, w.firstExpert);
    if (n === 1) this.#decode(x, w);
    else {
      for (let e = 0; e < w.experts.length; e++) {
        const m = g.count[e];
        if (m === 0) continue;
        const s0 = g.start[e];
        // Every token chose it: the slots' tokens are 0..n-1 in order, x itself.
        let rows = x;
        if (m < n) {
          rows = this.#rows;
          for (let j = 0; j < m; j++) rows.set(x.subarray(g.slotToken[s0 + j] * D, (g.slotToken[s0 + j] + 1) * D), j * D);
        }
        const ex = w.experts[e];
        matmuls(be, [{ out: this.#hb, w: ex.gate }, { out: this.#hb2, w: ex.up }], rows, m);
        this.#activate(ex, this.#hb, this.#hb2, m);
        this.#down(ex, this.#y.subarray(s0 * D, (s0 + m) * D), this.#hb, m);
      }
    }
    // out = Σ over chosen experts (in expert order) of weight · expert(x).
    combineExperts(out, this.#y, g, n, D);

    // Shared experts see every token: out += shared(x).
    if (w.shared) {
      swigluMlp(be, this.#y, x, n, w.shared, this.#hb, this.#hb2);
      for (let i = 0; i < n * D; i++) out[i] += this.#y[i];
    }
  }

  /** One token: every chosen expert's gate/up in one call (one preparation of x), one activation, then each down. */
  #decode(x: Float32Array, w: MoeWeights): void {
    const g = this.#groups;
    const c = g.slots;
    if (c === 0) return;
    const jobs = this.#jobs[c];
    for (let e = 0, j = 0; e < w.experts.length; e++) {
      if (g.count[e] === 0) continue;
      jobs[2 * j].w = w.experts[e].gate;
      jobs[2 * j + 1].w = w.experts[e].up;
      j++;
    }
    matmuls(this.#be, jobs, x, 1);
    const I = this.#moe.expertIntermediate;
    if (this.#moe.activation === 'swiglu') applySwiglu(this.#be, this.#hb, this.#hb2, c * I);
    for (let e = 0, j = 0; e < w.experts.length; e++) {
      if (g.count[e] === 0) continue;
      const ex = w.experts[e];
      if (this.#moe.activation !== 'swiglu') this.#activate(ex, this.#hbRow[j], this.#hb2Row[j], 1);
      this.#down(ex, this.#yRow[j], this.#hbRow[j], 1);
      j++;
    }
  }

  /** hb[m, I] = act(gate = hb, up = hb2): SwiGLU, or gpt-oss's biased gate/up, clamped, gate·σ(α·gate)·(up + 1). */
  #activate(w: ExpertWeights, hb: Float32Array, hb2: Float32Array, m: number): void {
    const I = w.gate.rows;
    if (this.#moe.activation === 'swiglu') {
      applySwiglu(this.#be, hb, hb2, m * I);
      return;
    }
    const limit = this.#moe.swigluLimit;
    for (let j = 0; j < m; j++) {
      for (let i = 0; i < I; i++) {
        const gate = Math.min(hb[j * I + i] + w.gateBias![i], limit);
        const up = Math.min(Math.max(hb2[j * I + i] + w.upBias![i], -limit), limit);
        hb[j * I + i] = (up + 1) * (gate / (1 + Math.exp(-1.702 * gate)));
      }
    }
  }

  /** y[m, hidden] = down(hb[m, I]) (+ gpt-oss's bias). */
  #down(w: ExpertWeights, y: Float32Array, hb: Float32Array, m: number): void {
    this.#be.matmul(y, w.down, hb, m);
    if (w.downBias) for (let j = 0; j < m; j++) for (let i = 0; i < this.#D; i++) y[j * this.#D + i] += w.downBias[i];
  }
}
