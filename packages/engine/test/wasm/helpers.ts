/** Random weights in every dtype, written into a backend's own memory, plus an f64 oracle. */
import { afterAll, expect } from 'vitest';
import type { Backend, DType, Weight } from '../../src/kernels/backend.js';
import { type WasmBackend, createWasmBackend } from '../../src/kernels/wasm/backend.js';
import type { SimdChoice } from '../../src/kernels/wasm/module.js';

/** Both kernel builds, for suites whose float results differ between them (f16 FMA in the relaxed build). */
export const SIMD_BUILDS = ['relaxed', 'baseline'] as const;
import { BF16_TO_F32, F16_TO_F32, f32ToBf16Bits, f32ToF16Bits } from '../../src/numeric/half.js';
import { Prng } from '../../src/numeric/prng.js';
import { weightBytes } from '../../src/kernels/wasm/formats.js';
import { quantizeQ4_0, quantizeQ8_0 } from '../../src/kernels/wasm/quant-reference.js';
import { quantizeMxfp4 } from '../../src/quant/mxfp4.js';

/**
 * A maker of WASM backends for one test file, disposed after it. parallelThreshold 0 makes even tiny
 * kernels use the workers, so tails and chunking are exercised. `simd` picks the kernel build.
 */
export function wasmBackendsForFile(simd: SimdChoice = 'auto'): (threads: number, initialBytes?: number) => WasmBackend {
  const made: WasmBackend[] = [];
  afterAll(() => made.forEach((b) => b.dispose()));
  return (threads, initialBytes = 8 << 20) => {
    const be = createWasmBackend({ threads, simd, parallelThreshold: 0, initialBytes });
    made.push(be);
    return be;
  };
}

export const pick = <T>(rng: Prng, xs: T[]): T => xs[Math.floor(rng.next() * xs.length)];

/** A random finite f16 bit pattern: every exponent but Inf/NaN, subnormals included. */
function randomF16Bits(rng: Prng): number {
  for (;;) {
    const h = Math.floor(rng.next() * 65536);
    if (((h >> 10) & 31) !== 31) return h;
  }
}

/** Random bf16 bits with magnitudes in [2^-20, 2^6) so products stay finite. */
function randomBf16Bits(rng: Prng): number {
  const sign = rng.next() < 0.5 ? 0x8000 : 0;
  const exp = 127 - 20 + Math.floor(rng.next() * 26);
  return sign | (exp << 7) | Math.floor(rng.next() * 128);
}

export function randomWeight(be: Backend, dtype: DType, rows: number, cols: number, rng: Prng): Weight {
  const bytes = be.allocBytes(weightBytes(dtype, rows, cols));
  const count = rows * cols;
  if (dtype === 'f32') {
    const v = new Float32Array(bytes.buffer, bytes.byteOffset, count);
    for (let i = 0; i < count; i++) v[i] = rng.symmetric(1);
  } else if (dtype === 'f16' || dtype === 'bf16') {
    const v = new Uint16Array(bytes.buffer, bytes.byteOffset, count);
    for (let i = 0; i < count; i++) v[i] = dtype === 'f16' ? randomF16Bits(rng) : randomBf16Bits(rng);
  } else {
    const values = new Float32Array(count);
    for (let i = 0; i < count; i++) values[i] = rng.symmetric(1) * (1 + 3 * (Math.floor(i / 32) % 3));
    if (dtype === 'mxfp4') {
      // exponents from 2^-128 (subnormal block factors) to large: every e8m0 path of the kernels
      for (let b = 0; b < count / 32; b++) {
        const scale = b % 7 === 0 ? 2 ** -130 : 2 ** (((b * 5) % 17) - 8);
        for (let j = 0; j < 32; j++) values[b * 32 + j] *= scale;
      }
      quantizeMxfp4(values, rows, cols, bytes);
    } else (dtype === 'q8_0' ? quantizeQ8_0 : quantizeQ4_0)(values, rows, cols, bytes);
  }
  return { dtype, rows, cols, bytes };
}

/** Weight element (r, c) as a number (f32/f16/bf16 only). */
export function widened(w: Weight): Float32Array {
  const count = w.rows * w.cols;
  if (w.dtype === 'f32') return new Float32Array(w.bytes.buffer, w.bytes.byteOffset, count).slice();
  const bits = new Uint16Array(w.bytes.buffer, w.bytes.byteOffset, count);
  const table = w.dtype === 'f16' ? F16_TO_F32 : BF16_TO_F32;
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = table[bits[i]];
  return out;
}

/**
 * `w` against n tokens as one batch, then each token alone: asserts every token's batch row equals its
 * 1-token product bit for bit (`label(t)` names the token in a failure) and returns the batch.
 */
export function expectBatchEqualsSingles(be: Backend, w: Weight, x: Float32Array, n: number, label: (t: number) => string): Float32Array {
  const { rows, cols } = w;
  const batch = be.allocF32(rows * n);
  be.matmul(batch, w, x, n);
  const single = be.allocF32(rows);
  for (let t = 0; t < n; t++) {
    be.matvec(single, w, x.subarray(t * cols, (t + 1) * cols));
    expect([...batch.subarray(t * rows, (t + 1) * rows)], label(t)).toEqual([...single]);
  }
  return batch;
}

export function randomInput(be: Backend, length: number, rng: Prng, scale = 2): Float32Array {
  const x = be.allocF32(length);
  for (let i = 0; i < length; i++) x[i] = rng.next() < 0.05 ? 0 : rng.symmetric(scale);
  return x;
}

/** f64 out[b·rows + r] = Σ_c W[r,c]·x[b·cols + c], and Σ|terms| per output. */
export function exactMatmul(wf: Float32Array, rows: number, cols: number, x: Float32Array, n: number) {
  const out = new Float64Array(rows * n);
  const magnitude = new Float64Array(rows * n);
  for (let r = 0; r < rows; r++) {
    for (let b = 0; b < n; b++) {
      let s = 0;
      let m = 0;
      for (let c = 0; c < cols; c++) {
        const t = wf[r * cols + c] * x[b * cols + c];
        s += t;
        m += Math.abs(t);
      }
      out[b * rows + r] = s;
      magnitude[b * rows + r] = m;
    }
  }
  return { out, magnitude };
}

export { f32ToF16Bits, f32ToBf16Bits };
