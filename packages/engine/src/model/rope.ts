/**
 * Rotary position embedding in Hugging Face's rotate-half layout: dimension i pairs with i + headDim/2
 * (or, for DeepSeek's `rope_interleave`, adjacent pairs 2i, 2i+1). Inverse frequencies are computed
 * once per model, including Llama 3's frequency-band rescaling and yarn's interpolation ramp.
 */
import type { ModelConfig, RopeScaling } from '../config/config.js';

/** inv_freq[i] = θ^(-2i/headDim), i < headDim/2, after `rope_scaling`. */
export function ropeInverseFrequencies(config: Pick<ModelConfig, 'headDim' | 'ropeTheta' | 'ropeScaling'>): Float64Array {
  const half = config.headDim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / config.ropeTheta ** ((2 * i) / config.headDim);
  const s = config.ropeScaling;
  if (s?.type === 'linear') {
    for (let i = 0; i < half; i++) inv[i] /= s.factor;
  } else if (s?.type === 'yarn') {
    yarnFrequencies(inv, config.headDim, config.ropeTheta, s);
  } else if (s?.type === 'llama3') {
    // Long wavelengths are slowed by `factor`, short ones kept, the band between interpolated.
    const lowWavelen = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
    const highWavelen = s.originalMaxPositionEmbeddings / s.highFreqFactor;
    for (let i = 0; i < half; i++) {
      const wavelen = (2 * Math.PI) / inv[i];
      if (wavelen < highWavelen) continue;
      if (wavelen > lowWavelen) inv[i] /= s.factor;
      else {
        const smooth = (s.originalMaxPositionEmbeddings / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        inv[i] = (1 - smooth) * (inv[i] / s.factor) + smooth * inv[i];
      }
    }
  }
  return inv;
}

/**
 * Yarn (Hugging Face's `_compute_yarn_parameters`): dimensions rotating fewer than beta_slow times over
 * the original context are interpolated (÷ factor), those rotating more than beta_fast times are kept,
 * and a linear ramp blends the band between.
 */
function yarnFrequencies(inv: Float64Array, dim: number, base: number, s: RopeScaling): void {
  const { betaFast, betaSlow, truncate } = s.yarn!;
  const orig = s.originalMaxPositionEmbeddings;
  const correctionDim = (rotations: number) => (dim * Math.log(orig / (rotations * 2 * Math.PI))) / (2 * Math.log(base));
  let low = correctionDim(betaFast);
  let high = correctionDim(betaSlow);
  if (truncate) {
    low = Math.floor(low);
    high = Math.ceil(high);
  }
  low = Math.max(low, 0);
  high = Math.min(high, dim - 1);
  if (low === high) high += 0.001;
  for (let i = 0; i < inv.length; i++) {
    const ramp = Math.min(1, Math.max(0, (i - low) / (high - low)));
    const extrapolation = 1 - ramp;
    inv[i] = (inv[i] / s.factor) * (1 - extrapolation) + inv[i] * extrapolation;
  }
}

/** What cos and sin are multiplied by: yarn's attention factor, 1 otherwise. */
export function ropeAttentionFactor(config: Pick<ModelConfig, 'ropeScaling'>): number {
  return config.ropeScaling?.yarn?.attentionFactor ?? 1;
}

/** Fills cos/sin [n, dim/2] for positions pos0 .. pos0+n-1 (times `scale`, yarn's attention factor). */
export function ropeTables(cos: Float32Array, sin: Float32Array, inv: Float64Array, pos0: number, n: number, scale = 1): void {
  const half = inv.length;
  for (let b = 0; b < n; b++) {
    for (let i = 0; i < half; i++) {
      const angle = (pos0 + b) * inv[i];
      cos[b * half + i] = Math.cos(angle) * scale;
      sin[b * half + i] = Math.sin(angle) * scale;
    }
  }
}

/** applyRope for interleaved pairs: dimension 2i pairs with 2i+1 (DeepSeek's `rope_interleave`). */
export function applyRopeInterleaved(x: Float32Array, off: number, heads: number, dim: number, cos: Float32Array, sin: Float32Array, row: number): void {
  const half = dim / 2;
  const t = row * half;
  for (let h = 0; h < heads; h++) {
    const base = off + h * dim;
    for (let i = 0; i < half; i++) {
      const a = x[base + 2 * i];
      const b = x[base + 2 * i + 1];
      const c = cos[t + i];
      const s = sin[t + i];
      x[base + 2 * i] = a * c - b * s;
      x[base + 2 * i + 1] = b * c + a * s;
    }
  }
}

/** Rotates `heads` heads of token b (at x[off ...]) in place with the token's cos/sin row. */
export function applyRope(x: Float32Array, off: number, heads: number, headDim: number, cos: Float32Array, sin: Float32Array, row: number): void {
  const half = headDim / 2;
  const t = row * half;
  for (let h = 0; h < heads; h++) {
    const base = off + h * headDim;
    for (let i = 0; i < half; i++) {
      const a = x[base + i];
      const b = x[base + i + half];
      const c = cos[t + i];
      const s = sin[t + i];
      x[base + i] = a * c - b * s;
      x[base + i + half] = b * c + a * s;
    }
  }
}
