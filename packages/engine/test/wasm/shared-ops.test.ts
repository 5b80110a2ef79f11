/**
 * The WASM backend's small shared kernels against the forward pass's own TypeScript: rmsnorm rows (f64
 * sums of squares, one f64 → f32 rounding per output: only Σx²'s order differs), the residual add (bit
 * for bit), and matmulShared (several weights on one input; each output equals its own matmul bit for
 * bit, weights of different formats mixed).
 */
import { describe, expect, it } from 'vitest';
import type { Weight } from '../../src/kernels/backend.js';
import { rmsnorm } from '../../src/model/math.js';
import { Prng } from '../../src/numeric/prng.js';
import { quantizeK } from '../../src/quant/kquants.js';
import { SIMD_BUILDS, randomInput, wasmBackendsForFile } from './helpers.js';

describe.each(SIMD_BUILDS)('wasm shared ops, %s build', (simd) => {
  const backend = wasmBackendsForFile(simd);

  it('rmsnorm rows match the TypeScript loop within one f32 rounding; the residual add is exact', () => {
    const be = backend(1);
    const rng = new Prng(41);
    for (const [n, dim] of [[1, 768], [3, 7], [5, 1025], [64, 64]]) {
      const x = randomInput(be, n * dim, rng);
      for (let i = 0; i < x.length; i += 17) x[i] *= 300; // a few large values, so the sum's order could show
      const weight = randomInput(be, dim, rng);
      const got = be.allocF32(n * dim);
      be.rmsnorm(got, x, weight, n, dim, 1e-5);
      const want = new Float32Array(n * dim);
      for (let b = 0; b < n; b++) rmsnorm(want, b * dim, x, b * dim, weight, dim, 1e-5);
      for (let i = 0; i < want.length; i++) expect(Math.abs(got[i] - want[i]), `[${n}, ${dim}] value ${i}`).toBeLessThanOrEqual(Math.abs(want[i]) * 2 ** -23);
      const y = randomInput(be, n * dim, rng);
      const sum = Float32Array.from(x, (v, i) => v + y[i]);
      be.add(x, y, n * dim);
      expect([...x]).toEqual([...sum]);
    }
    expect(() => be.rmsnorm(be.allocF32(4), be.allocF32(8), be.allocF32(4), 2, 4, 1e-5)).toThrow(/rmsnorm: 2 rows of 4 need 8 values/);
  });

  it.each([1, 2])('matmulShared gives each weight its own matmul bits, formats mixed (%i thread(s))', (threads) => {
    const be = backend(threads);
    const rng = new Prng(77 + threads);
    const cols = 512;
    const kquant = (dtype: 'q4_k' | 'q6_k', rows: number): Weight => {
      const q = quantizeK(dtype, Float32Array.from({ length: rows * cols }, () => rng.symmetric(1)), rows, cols);
      const bytes = be.allocBytes(q.length);
      bytes.set(q);
      const w: Weight = { dtype, rows, cols, bytes };
      be.packWeight(w);
      return w;
    };
    const f32 = (rows: number): Weight => {
      const bytes = be.allocBytes(rows * cols * 4);
      new Float32Array(bytes.buffer, bytes.byteOffset, rows * cols).set(Float32Array.from({ length: rows * cols }, () => rng.symmetric(1)));
      return { dtype: 'f32', rows, cols, bytes };
    };
    for (const n of [1, 3, 17]) {
      const ws = [kquant('q4_k', 12), kquant('q6_k', 9), kquant('q4_k', 8), f32(5)];
      const x = randomInput(be, cols * n, rng);
      const shared = ws.map((w) => be.allocF32(w.rows * n));
      be.matmulShared(ws.map((w, i) => ({ out: shared[i], w })), x, n);
      ws.forEach((w, i) => {
        const alone = be.allocF32(w.rows * n);
        be.matmul(alone, w, x, n);
        expect([...shared[i]], `${w.dtype} [${w.rows}, ${cols}] n=${n}`).toEqual([...alone]);
      });
    }
  });
});
