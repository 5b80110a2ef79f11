/**
 * Expert choice for one token, as each architecture's Hugging Face modeling code does it, in f32:
 * - softmax (Qwen3-MoE, Mixtral): p = softmax(logits); the top-k p, renormalised if norm_topk_prob.
 * - sigmoid-grouped (DeepSeek V3): s = σ(logits); choose on s + correction bias, only within the
 *   topk_group groups whose two best biased scores sum highest (the rest count as 0, as HF's
 *   masked_fill does); weights are the chosen plain s, renormalised (+1e-20) if norm_topk_prob, times
 *   routed_scaling_factor.
 * - topk-softmax (gpt-oss): the top-k logits (router bias included), softmax over those k.
 * Top-k is PyTorch's, ties included (topk.ts). The weights' order follows the chosen ids; callers sum
 * expert outputs in expert order, as HF does.
 */
import type { MoeConfig } from '../config/config.js';
import { TopK } from './topk.js';

const f32 = Math.fround;

export class Router {
  readonly #moe: MoeConfig;
  readonly #top: TopK;
  readonly #p: Float32Array; // [experts] probabilities / scores
  readonly #choice: Float32Array; // [experts] biased scores to choose on
  readonly #groupScores: Float32Array;
  readonly #groupTop: Int32Array;
  readonly #pair: Int32Array;
  readonly #allowed: Uint8Array;

  constructor(moe: MoeConfig) {
    this.#moe = moe;
    this.#top = new TopK(moe.experts);
    this.#p = new Float32Array(moe.experts);
    this.#choice = new Float32Array(moe.experts);
    this.#groupScores = new Float32Array(moe.groups);
    this.#groupTop = new Int32Array(moe.groups);
    this.#pair = new Int32Array(2);
    this.#allowed = new Uint8Array(moe.groups);
  }

  /**
   * Chooses experts for the token whose router logits are logits[off .. off+experts): their ids into
   * ids[io .. io+k) and weights into weights[io .. io+k). `correction` is DeepSeek's e_score_correction_bias.
   */
  route(logits: Float32Array, off: number, ids: Int32Array, weights: Float32Array, io: number, correction: Float32Array | null): void {
    const { experts: E, topK: k } = this.#moe;
    const chosen = ids.subarray(io, io + k);
    const w = weights.subarray(io, io + k);
    const p = this.#p;
    switch (this.#moe.routing) {
      case 'softmax': {
        let max = -Infinity;
        for (let e = 0; e < E; e++) max = Math.max(max, logits[off + e]);
        let sum = 0;
        for (let e = 0; e < E; e++) sum += Math.exp(logits[off + e] - max);
        for (let e = 0; e < E; e++) p[e] = Math.exp(logits[off + e] - max) / sum;
        this.#top.select(p, 0, E, k, chosen);
        for (let j = 0; j < k; j++) w[j] = p[chosen[j]];
        if (this.#moe.normTopK) normalise(w, 0);
        return;
      }
      case 'sigmoid-grouped': {
        for (let e = 0; e < E; e++) {
          p[e] = 1 / (1 + Math.exp(-logits[off + e]));
          this.#choice[e] = f32(p[e] + (correction ? correction[e] : 0));
        }
        this.#maskGroups();
        this.#top.select(this.#choice, 0, E, k, chosen, false);
        for (let j = 0; j < k; j++) w[j] = p[chosen[j]];
        if (this.#moe.normTopK) normalise(w, 1e-20);
        for (let j = 0; j < k; j++) w[j] *= this.#moe.scalingFactor;
        return;
      }
      case 'topk-softmax': {
        this.#top.select(logits, off, E, k, chosen);
        const max = logits[off + chosen[0]];
        let sum = 0;
        for (let j = 0; j < k; j++) sum += Math.exp(logits[off + chosen[j]] - max);
        for (let j = 0; j < k; j++) w[j] = Math.exp(logits[off + chosen[j]] - max) / sum;
        return;
      }
    }
  }

  /** Zeroes the biased scores outside the topk_group groups with the highest two-best sums. */
  #maskGroups(): void {
    const { experts: E, groups: G, topkGroups } = this.#moe;
    if (G <= 1) return;
    const per = E / G;
    const c = this.#choice;
    for (let g = 0; g < G; g++) {
      this.#top.select(c, g * per, per, 2, this.#pair);
      this.#groupScores[g] = f32(c[g * per + this.#pair[0]] + c[g * per + this.#pair[1]]);
    }
    this.#top.select(this.#groupScores, 0, G, topkGroups, this.#groupTop, false);
    this.#allowed.fill(0);
    for (let j = 0; j < topkGroups; j++) this.#allowed[this.#groupTop[j]] = 1;
    for (let e = 0; e < E; e++) if (!this.#allowed[Math.floor(e / per)]) c[e] = 0;
  }
}

/** w /= (Σw + eps), the sum in f32 as torch sums an f32 tensor of k values. */
function normalise(w: Float32Array, eps: number): void {
  let s = 0;
  for (let j = 0; j < w.length; j++) s = f32(s + w[j]);
  const d = f32(s + eps);
  for (let j = 0; j < w.length; j++) w[j] = w[j] / d;
}
