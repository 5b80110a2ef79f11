/**
 * Plain CPU loops the WGSL kernels are checked against, written from the definitions (GGUF block
 * layouts, HF rotate-half RoPE, HF RMSNorm) independently of the shaders. Sums in double precision.
 */
import type { ModelShard } from '../../src/model/forward.js';
import { argmax } from '../../src/generate/sampler.js';
import type { DType, Weight } from '../../src/kernels/backend.js';
import { BF16_TO_F32, F16_TO_F32, f32ToBf16Bits, f32ToF16Bits } from '../../src/numeric/half.js';
import { Prng } from '../../src/numeric/prng.js';

/** A random weight in `dtype`'s storage layout (quantized: random scales and codes). */
export function randomWeight(dtype: DType, rows: number, cols: number, rng: Prng, amp = 1): Weight {
  const n = rows * cols;
  if (dtype === 'f32') {
    const v = new Float32Array(n);
    for (let i = 0; i < n; i++) v[i] = rng.symmetric(amp);
    return { dtype, rows, cols, bytes: new Uint8Array(v.buffer) };
  }
  if (dtype === 'f16' || dtype === 'bf16') {
    const v = new Uint16Array(n);
    const conv = dtype === 'f16' ? f32ToF16Bits : f32ToBf16Bits;
    for (let i = 0; i < n; i++) v[i] = conv(rng.symmetric(amp));
    return { dtype, rows, cols, bytes: new Uint8Array(v.buffer) };
  }
  const blockBytes = dtype === 'q8_0' ? 34 : 18;
  const blocks = (rows * cols) / 32;
  const bytes = new Uint8Array(blocks * blockBytes);
  const dv = new DataView(bytes.buffer);
  for (let b = 0; b < blocks; b++) {
    const o = b * blockBytes;
    dv.setUint16(o, f32ToF16Bits((0.25 + rng.next()) * amp * (dtype === 'q8_0' ? 1 / 127 : 1 / 8) * (rng.next() < 0.5 ? -1 : 1)), true);
    for (let i = 2; i < blockBytes; i++) bytes[o + i] = Math.floor(rng.next() * 256);
  }
  return { dtype, rows, cols, bytes };
}

/** The weight widened to f32, row-major [rows, cols]. */
export function widen(w: Weight): Float32Array {
  const out = new Float32Array(w.rows * w.cols);
  const dv = new DataView(w.bytes.buffer, w.bytes.byteOffset, w.bytes.byteLength);
  switch (w.dtype) {
    case 'f32':
      for (let i = 0; i < out.length; i++) out[i] = dv.getFloat32(i * 4, true);
      return out;
    case 'f16':
      for (let i = 0; i < out.length; i++) out[i] = F16_TO_F32[dv.getUint16(i * 2, true)];
      return out;
    case 'bf16':
      for (let i = 0; i < out.length; i++) out[i] = BF16_TO_F32[dv.getUint16(i * 2, true)];
      return out;
    case 'q8_0':
      for (let b = 0; b < out.length / 32; b++) {
        const d = F16_TO_F32[dv.getUint16(b * 34, true)];
        for (let j = 0; j < 32; j++) out[b * 32 + j] = dv.getInt8(b * 34 + 2 + j) * d;
      }
      return out;
    case 'q4_0':
      for (let b = 0; b < out.length / 32; b++) {
        const d = F16_TO_F32[dv.getUint16(b * 18, true)];
        for (let j = 0; j < 16; j++) {
          const byte = dv.getUint8(b * 18 + 2 + j);
          out[b * 32 + j] = ((byte & 15) - 8) * d;
          out[b * 32 + j + 16] = ((byte >> 4) - 8) * d;
        }
      }
      return out;
    default:
      throw new Error(`no GPU reference for ${w.dtype}`);
  }
}

export function randomF32(n: number, rng: Prng, amp = 1): Float32Array {
  const v = new Float32Array(n);
  for (let i = 0; i < n; i++) v[i] = rng.symmetric(amp);
  return v;
}

/** out[b, r] = Σ_c W[r, c] x[b, c]; also returns Σ|W||x| per output for error bounds. */
export function matmulRef(wf: Float32Array, rows: number, cols: number, x: Float32Array, n: number) {
  const out = new Float32Array(n * rows);
  const mag = new Float32Array(n * rows);
  for (let b = 0; b < n; b++) {
    for (let r = 0; r < rows; r++) {
      let s = 0;
      let m = 0;
      for (let c = 0; c < cols; c++) {
        const p = wf[r * cols + c] * x[b * cols + c];
        s += p;
        m += Math.abs(p);
      }
      out[b * rows + r] = s;
      mag[b * rows + r] = m;
    }
  }
  return { out, mag };
}

export function rmsnormRef(x: Float32Array, w: Float32Array, dim: number, eps: number): Float32Array {
  const out = new Float32Array(x.length);
  for (let row = 0; row < x.length / dim; row++) {
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += x[row * dim + i] ** 2;
    const inv = 1 / Math.sqrt(ss / dim + eps);
    for (let i = 0; i < dim; i++) out[row * dim + i] = x[row * dim + i] * inv * w[i];
  }
  return out;
}

/** HF rotate-half RoPE on x [n, heads, headDim] at positions pos0.. with inverse frequencies invFreq. */
export function ropeRef(x: Float32Array, heads: number, headDim: number, pos0: number, invFreq: Float64Array): Float32Array {
  const out = new Float32Array(x);
  const half = headDim / 2;
  const n = x.length / (heads * headDim);
  for (let b = 0; b < n; b++) {
    for (let h = 0; h < heads; h++) {
      const base = (b * heads + h) * headDim;
      for (let j = 0; j < half; j++) {
        const a = (pos0 + b) * invFreq[j];
        const x1 = x[base + j];
        const x2 = x[base + j + half];
        out[base + j] = x1 * Math.cos(a) - x2 * Math.sin(a);
        out[base + j + half] = x2 * Math.cos(a) + x1 * Math.sin(a);
      }
    }
  }
  return out;
}

/**
 * Causal attention for n queries at positions pos0.. over caches k/v [positions, kvHeads·headDim]
 * holding positions 0..pos0+n-1; `window` > 0 keeps only the last `window` positions.
 */
export function attentionRef(
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  s: {
    n: number;
    pos0: number;
    heads: number;
    kvHeads: number;
    headDim: number;
    window: number;
    /** Query heads per KV head in the whole model, and this slice's offsets (tensor parallel). */
    group?: number;
    headOffset?: number;
    kvOffset?: number;
    /** Per local head sink logits (gpt-oss): in the softmax's denominator, with no value. */
    sinks?: Float32Array;
  },
): Float32Array {
  const { n, pos0, heads, kvHeads, headDim, window } = s;
  const group = s.group ?? heads / kvHeads;
  const kvDim = kvHeads * headDim;
  const out = new Float32Array(n * heads * headDim);
  for (let b = 0; b < n; b++) {
    const pos = pos0 + b;
    const start = window > 0 ? Math.max(0, pos + 1 - window) : 0;
    for (let h = 0; h < heads; h++) {
      const kh = Math.floor((h + (s.headOffset ?? 0)) / group) - (s.kvOffset ?? 0);
      const qo = (b * heads + h) * headDim;
      const scores: number[] = [];
      for (let t = start; t <= pos; t++) {
        let d = 0;
        for (let i = 0; i < headDim; i++) d += q[qo + i] * k[t * kvDim + kh * headDim + i];
        scores.push(d / Math.sqrt(headDim));
      }
      const m = Math.max(...scores, s.sinks ? s.sinks[h] : -Infinity);
      const e = scores.map((x) => Math.exp(x - m));
      const sum = e.reduce((a, c) => a + c, 0) + (s.sinks ? Math.exp(s.sinks[h] - m) : 0);
      for (let i = 0; i < headDim; i++) {
        let acc = 0;
        for (let t = start; t <= pos; t++) acc += e[t - start] * v[t * kvDim + kh * headDim + i];
        out[qo + i] = acc / sum;
      }
    }
  }
  return out;
}

export function softmaxRef(x: Float32Array, cols: number): Float32Array {
  const out = new Float32Array(x.length);
  for (let r = 0; r < x.length / cols; r++) {
    let m = -Infinity;
    for (let i = 0; i < cols; i++) m = Math.max(m, x[r * cols + i]);
    let s = 0;
    for (let i = 0; i < cols; i++) s += Math.exp(x[r * cols + i] - m);
    for (let i = 0; i < cols; i++) out[r * cols + i] = Math.exp(x[r * cols + i] - m) / s;
  }
  return out;
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} != ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (!(d <= m)) m = Number.isNaN(d) ? Infinity : Math.max(m, d);
  }
  return m;
}

/** Largest |logit| difference relative to the logits' own scale (GPU shard tests). */
export function logitError(a: Float32Array, b: Float32Array): number {
  let scale = 0;
  for (const v of b) scale = Math.max(scale, Math.abs(v));
  return maxAbsDiff(a, b) / Math.max(1, scale);
}

/** Greedy run of a CPU shard: the logits after `prompt` and after each of `steps` − 1 fed-back tokens, and the `steps` tokens. */
export async function cpuGreedyRun(cpu: ModelShard, prompt: number[], steps: number): Promise<{ logits: Float32Array[]; tokens: number[] }> {
  const cache = cpu.newCache(64);
  const logits: Float32Array[] = [];
  const tokens: number[] = [];
  let l = new Float32Array(await cpu.forward({ tokens: prompt }, cache));
  for (let s = 0; s < steps; s++) {
    logits.push(l);
    tokens.push(argmax(l));
    l = new Float32Array(await cpu.forward({ tokens: [tokens[s]] }, cache));
  }
  return { logits, tokens };
}
