/**
 * The WASM MLX affine kernels (wasm/affine.ts) on packed weights at every bit width, group size and
 * scale dtype, odd row counts and batches, against the exact product of the dequantized weights
 * w = scale·q + bias with the f32 activations (f64): within (cols + 16)·2^-23·Σ(|scale·q·x| + |bias·x|).
 * Batched rows equal the 1-token results bit for bit, and 2 threads equal 1.
 */
import { describe, expect, it } from 'vitest';
import type { MlxDType, Weight } from '../../src/kernels/backend.js';
import { createReferenceBackend } from '../../src/kernels/reference.js';
import { type MlxLayout, mlxDType, weightBytes } from '../../src/kernels/wasm/formats.js';
import { BF16_TO_F32, F16_TO_F32, f32ToBf16Bits, f32ToF16Bits } from '../../src/numeric/half.js';
import { Prng } from '../../src/numeric/prng.js';
import { dequantizeMlxRow, mlxQ, packMlx, quantizeMlx } from '../../src/quant/mlx.js';
import { unpackRows4 } from '../../src/kernels/wasm/pack.js';
import { pick, randomInput, wasmBackendsForFile } from './helpers.js';

const backend = wasmBackendsForFile();

interface Built {
  w: Weight;
  /** The stored scales and biases as f32, [rows, groups]. */
  s: Float32Array;
  b: Float32Array;
}

function randomMlx(be: { allocBytes(n: number): Uint8Array }, layout: MlxLayout, rows: number, cols: number, rng: Prng): Built {
  const values = Float32Array.from({ length: rows * cols }, (_, i) => rng.symmetric(1) * (1 + ((i >> 5) % 3)) + (((i >> 6) % 3) - 1) * 0.5);
  const { words, scales, biases } = quantizeMlx(values, rows, cols, layout);
  const toBits = layout.scales === 'f16' ? f32ToF16Bits : f32ToBf16Bits;
  const table = layout.scales === 'f16' ? F16_TO_F32 : BF16_TO_F32;
  const store = (v: Float32Array) => (layout.scales === 'f32' ? new Uint8Array(v.buffer) : new Uint8Array(Uint16Array.from(v, toBits).buffer));
  const stored = (v: Float32Array) => (layout.scales === 'f32' ? v : Float32Array.from(v, (x) => table[toBits(x)]));
  const dtype = mlxDType(layout);
  const bytes = be.allocBytes(weightBytes(dtype, rows, cols));
  packMlx(new Uint8Array(words.buffer), store(scales), store(biases), rows, cols, layout, bytes);
  return { w: { dtype, rows, cols, bytes }, s: stored(scales), b: stored(biases) };
}

/** f64 Σ w·x with w the dequantized f32 weights, and Σ(|s·q·x| + |b·x|), the size of the rounded terms. */
function exact({ w, s, b }: Built, layout: MlxLayout, x: Float32Array, n: number) {
  const out = new Float64Array(w.rows * n);
  const mag = new Float64Array(w.rows * n);
  const row = new Float32Array(w.cols);
  const rb = weightBytes(w.dtype, 1, w.cols);
  const groups = w.cols / layout.groupSize;
  for (let r = 0; r < w.rows; r++) {
    dequantizeMlxRow(w.dtype as MlxDType, w.bytes, w.cols, r, row);
    for (let t = 0; t < n; t++) {
      let sum = 0;
      let m = 0;
      for (let c = 0; c < w.cols; c++) {
        const g = r * groups + Math.floor(c / layout.groupSize);
        const xv = x[t * w.cols + c];
        sum += row[c] * xv;
        m += (Math.abs(s[g] * mlxQ(w.bytes, r * rb, layout.bits, c)) + Math.abs(b[g])) * Math.abs(xv);
      }
      out[t * w.rows + r] = sum;
      mag[t * w.rows + r] = m;
    }
  }
  return { out, mag };
}

const LAYOUTS: MlxLayout[] = [
  { bits: 2, groupSize: 64, scales: 'f16' },
  { bits: 3, groupSize: 32, scales: 'bf16' },
  { bits: 3, groupSize: 128, scales: 'f16' },
  { bits: 4, groupSize: 64, scales: 'bf16' },
  { bits: 4, groupSize: 32, scales: 'f32' },
  { bits: 4, groupSize: 128, scales: 'f16' },
  { bits: 6, groupSize: 64, scales: 'f16' },
  { bits: 8, groupSize: 128, scales: 'bf16' },
  { bits: 8, groupSize: 32, scales: 'f16' },
];

describe.each([1, 2])('wasm MLX affine kernels, %i thread(s)', (threads) => {
  const be = backend(threads);
  const one = threads === 1 ? be : backend(1);
  it.each(LAYOUTS.map((l) => [mlxDType(l), l] as const))('%s: matvec and matmul equal the exact product within the bound', (_, layout) => {
    const rng = new Prng(300 + threads * 31 + layout.bits * 7 + layout.groupSize);
    const ref = createReferenceBackend();
    for (let trial = 0; trial < 10; trial++) {
      const rows = pick(rng, [1, 3, 4, 5, 9, 17]);
      const cols = layout.groupSize * pick(rng, [1, 2, 3, 5]);
      // n >= 4: pairs of rows against 4 tokens at a time ($dot2x4_mlx*), the rest one at a time
      const n = trial < 4 ? 1 : pick(rng, [2, 3, 4, 5, 7, 9]);
      const built = randomMlx(be, layout, rows, cols, rng);
      const { w } = built;
      const x = randomInput(be, cols * n, rng);
      const out = be.allocF32(rows * n);
      be.matmul(out, w, x, n);
      const want = exact(built, layout, x, n);
      for (let i = 0; i < rows * n; i++) {
        const tol = (cols + 16) * 2 ** -23 * want.mag[i];
        expect(Math.abs(out[i] - want.out[i]), `${w.dtype} [${rows},${cols}] n=${n} out[${i}]`).toBeLessThanOrEqual(tol);
      }
      // the reference backend (dequantized rows, f32 sums) within its own bound too
      const refOut = new Float32Array(rows * n);
      ref.matmul(refOut, { ...w, bytes: w.bytes.slice() }, x, n);
      for (let i = 0; i < rows * n; i++) expect(Math.abs(refOut[i] - want.out[i])).toBeLessThanOrEqual((cols + 16) * 2 ** -23 * want.mag[i]);
      for (let t = 0; t < n; t++) {
        const xt = one.allocF32(cols);
        xt.set(x.subarray(t * cols, (t + 1) * cols));
        const w1 = threads === 1 ? w : { ...w, bytes: one.allocBytes(w.bytes.length) };
        if (w1 !== w) w1.bytes.set(w.bytes);
        const single = one.allocF32(rows);
        one.matvec(single, w1, xt);
        expect([...single]).toEqual([...out.subarray(t * rows, (t + 1) * rows)]);
      }
    }
  });
});

/**
 * Packed 4-bit weights (as the loader leaves them: 4 rows interleaved) run with 15-bit integer activations
 * per MLX group (d_x = the group's amax/16383): against the exact product the bound adds the activation rounding,
 * d_x/2 per element times |scale·q| (+ f32 slack); batched rows equal the 1-token results bit for bit;
 * unpacking restores the bytes.
 */
describe.each([1, 2])('wasm packed 4-bit MLX kernels, %i thread(s)', (threads) => {
  const be = backend(threads);
  it.each(LAYOUTS.filter((l) => l.bits === 4).map((l) => [mlxDType(l), l] as const))('%s: packed matvec and matmul within the 15-bit activation bound', (_, layout) => {
    const rng = new Prng(700 + threads * 3 + layout.groupSize);
    for (let trial = 0; trial < 14; trial++) {
      // rows: whole 8-row pairs of groups, a last single group, row-major tail rows; n: token tiles of 4
      // and every remainder (the prompt-batch kernels, wasm/mlxtiles.ts)
      const rows = pick(rng, [4, 5, 8, 9, 12, 13, 15, 32, 35]);
      const cols = layout.groupSize * pick(rng, [1, 2, 3]);
      const n = trial < 3 ? 1 : pick(rng, [2, 3, 4, 5, 6, 7, 9, 13]);
      const built = randomMlx(be, layout, rows, cols, rng);
      const { w } = built;
      const raw = w.bytes.slice();
      be.packWeight(w);
      expect(w.packed).toBe('rows4');
      const x = randomInput(be, cols * n, rng);
      const out = be.allocF32(rows * n);
      be.matmul(out, w, x, n);
      const want = exact({ ...built, w: { ...w, bytes: raw } }, layout, x, n);
      const rb = weightBytes(w.dtype, 1, cols);
      const groups = cols / layout.groupSize;
      for (let t = 0; t < n; t++) {
        for (let r = 0; r < rows; r++) {
          let actErr = 0;
          const g = layout.groupSize;
          for (let b = 0; b < cols / g; b++) {
            let amax = 0;
            for (let j = 0; j < g; j++) amax = Math.max(amax, Math.abs(x[t * cols + g * b + j]));
            for (let j = 0; j < g; j++) {
              const c = g * b + j;
              actErr += Math.abs(built.s[r * groups + Math.floor(c / layout.groupSize)] * mlxQ(raw, r * rb, 4, c)) * (amax / 16383 / 2) * (1 + 2 ** -20);
            }
          }
          const i = t * rows + r;
          expect(Math.abs(out[i] - want.out[i]), `${w.dtype} [${rows},${cols}] n=${n} out[${i}]`).toBeLessThanOrEqual((cols + 16) * 2 ** -23 * want.mag[i] + actErr);
        }
        const single = be.allocF32(rows);
        const xt = be.allocF32(cols);
        xt.set(x.subarray(t * cols, (t + 1) * cols));
        be.matvec(single, w, xt);
        expect([...single]).toEqual([...out.subarray(t * rows, (t + 1) * rows)]);
      }
      unpackRows4(w);
      expect(Buffer.from(w.bytes).equals(Buffer.from(raw))).toBe(true);
    }
  });
});
