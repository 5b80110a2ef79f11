/**
 * Multi-head latent attention (DeepSeek V3) on one tensor rank, with the compressed cache: per token
 * and layer only the normalised latent c (kv_lora_rank values) and the rotated shared RoPE key kr
 * (qk_rope_head_dim values) are kept, never expanded keys and values. For each head h:
 *   q_h = [q_nope, q_rope]             from q_proj, or q_b_proj(rmsnorm(q_a_proj(x)))
 *   k_t = [W_UK_h·c_t, kr_t],  v_t = W_UV_h·c_t          (W_UK_h, W_UV_h: head h's rows of kv_b_proj)
 *   score_t = scale·(q_nope·W_UK_h·c_t + q_rope·kr_t) = scale·((W_UK_hᵀ·q_nope)·c_t + q_rope·kr_t)
 *   out_h = Σ_t p_t v_t = W_UV_h·(Σ_t p_t c_t)
 * so the key up-projection is absorbed into the query once per token and the value up-projection is
 * applied once to the weighted latent — the same sums as HF's expanded form, in another order.
 */
import type { MlaConfig, ModelConfig } from '../config/config.js';
import type { Backend } from '../kernels/backend.js';
import { rmsnorm, softmax } from './math.js';
import { applyRope, applyRopeInterleaved } from './rope.js';
import type { MlaWeights } from './weights-mla.js';

/** HF builds q_a_layernorm and kv_a_layernorm with DeepseekV3RMSNorm's default eps, not rms_norm_eps. */
const LATENT_NORM_EPS = 1e-6;

export class MlaAttention {
  readonly #m: MlaConfig;
  readonly #be: Backend;
  readonly #heads: number;
  readonly #qa: Float32Array; // [B, qLoraRank]
  readonly #q: Float32Array; // [B, heads·(nope+rope)]
  readonly #kva: Float32Array; // [B, kvLoraRank + rope]
  readonly #qlat: Float32Array; // [kvLoraRank]
  readonly #olat: Float32Array; // [kvLoraRank]
  readonly #scores: Float32Array; // [maxSeqLen]

  constructor(config: ModelConfig, heads: number, backend: Backend, maxBatch: number, maxSeqLen: number) {
    const m = config.mla!;
    this.#m = m;
    this.#be = backend;
    this.#heads = heads;
    const f = (n: number) => backend.allocF32(n);
    this.#qa = f(maxBatch * m.qLoraRank);
    this.#q = f(maxBatch * heads * (m.nopeDim + m.ropeDim));
    this.#kva = f(maxBatch * (m.kvLoraRank + m.ropeDim));
    this.#qlat = f(m.kvLoraRank);
    this.#olat = f(m.kvLoraRank);
    this.#scores = new Float32Array(maxSeqLen);
  }

  /**
   * att[n, heads·v] for x[n, hidden] (normed input) at positions pos0.., appending each token's latent
   * to `latents` ([capacity, kvLoraRank + rope]); cos/sin: [n, rope/2].
   */
  forward(att: Float32Array, x: Float32Array, n: number, pos0: number, latents: Float32Array, w: MlaWeights, cos: Float32Array, sin: Float32Array): void {
    const m = this.#m;
    const be = this.#be;
    const H = this.#heads;
    const qk = m.nopeDim + m.ropeDim;
    const L = m.kvLoraRank;
    const width = L + m.ropeDim;
    const rope = m.ropeInterleave ? applyRopeInterleaved : applyRope;

    // q = q_b(rmsnorm(q_a(x))) or q_proj(x); its RoPE part rotated per head.
    if (w.qA) {
      be.matmul(this.#qa, w.qA, x, n);
      for (let b = 0; b < n; b++) rmsnorm(this.#qa, b * m.qLoraRank, this.#qa, b * m.qLoraRank, w.qANorm!, m.qLoraRank, LATENT_NORM_EPS);
      be.matmul(this.#q, w.q, this.#qa, n);
    } else be.matmul(this.#q, w.q, x, n);
    // [c, kr] = kv_a(x); c normed, kr rotated: the token's cache entry.
    be.matmul(this.#kva, w.kvA, x, n);
    for (let b = 0; b < n; b++) {
      for (let h = 0; h < H; h++) rope(this.#q, b * H * qk + h * qk + m.nopeDim, 1, m.ropeDim, cos, sin, b);
      rmsnorm(this.#kva, b * width, this.#kva, b * width, w.kvANorm, L, LATENT_NORM_EPS);
      rope(this.#kva, b * width + L, 1, m.ropeDim, cos, sin, b);
      latents.set(this.#kva.subarray(b * width, (b + 1) * width), (pos0 + b) * width);
    }

    const qlat = this.#qlat;
    const olat = this.#olat;
    const scores = this.#scores;
    for (let b = 0; b < n; b++) {
      const pos = pos0 + b;
      for (let h = 0; h < H; h++) {
        const qo = b * H * qk + h * qk;
        // qlat = W_UK_hᵀ·q_nope (kb[h] holds W_UK_hᵀ)
        be.matvec(qlat, w.kb[h], this.#q.subarray(qo, qo + m.nopeDim));
        // score_t = scale·(qlat·c_t + q_rope·kr_t), causal.
        for (let t = 0; t <= pos; t++) {
          const c = t * width;
          let s = 0;
          for (let j = 0; j < L; j++) s += qlat[j] * latents[c + j];
          for (let j = 0; j < m.ropeDim; j++) s += this.#q[qo + m.nopeDim + j] * latents[c + L + j];
          scores[t] = s * m.softmaxScale;
        }
        softmax(scores, 0, pos + 1);
        // out_h = W_UV_h·Σ_t p_t c_t
        olat.fill(0);
        for (let t = 0; t <= pos; t++) {
          const p = scores[t];
          const c = t * width;
          for (let j = 0; j < L; j++) olat[j] += p * latents[c + j];
        }
        be.matvec(att.subarray((b * H + h) * m.vDim, (b * H + h + 1) * m.vDim), w.vb[h], olat);
      }
    }
  }
}
