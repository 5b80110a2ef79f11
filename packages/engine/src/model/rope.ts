/**
 * Rotary position embedding in Hugging Face's rotate-half layout: dimension i pairs with i + headDim/2.
 * Inverse frequencies are computed once per model, including Llama 3's frequency-band rescaling.
 */
import type { ModelConfig } from '../config/config.js';

/** inv_freq[i] = θ^(-2i/headDim), i < headDim/2, after `rope_scaling`. */
export function ropeInverseFrequencies(config: Pick<ModelConfig, 'headDim' | 'ropeTheta' | 'ropeScaling'>): Float64Array {
  const half = config.headDim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / config.ropeTheta ** ((2 * i) / config.headDim);
  const s = config.ropeScaling;
  if (s?.type === 'linear') {
    for (let i = 0; i < half; i++) inv[i] /= s.factor;
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

/** Fills cos/sin [n, headDim/2] for positions pos0 .. pos0+n-1. */
export function ropeTables(cos: Float32Array, sin: Float32Array, inv: Float64Array, pos0: number, n: number): void {
  const half = inv.length;
  for (let b = 0; b < n; b++) {
    for (let i = 0; i < half; i++) {
      const angle = (pos0 + b) * inv[i];
      cos[b * half + i] = Math.cos(angle);
      sin[b * half + i] = Math.sin(angle);
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
