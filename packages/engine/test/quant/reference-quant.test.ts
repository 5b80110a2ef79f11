/**
 * The reference backend runs q8_0/q4_0 weights: matvec and matmul equal dequantized weights · f32
 * activations (f64 oracle from quant-reference.ts) within f32 rounding, and rows not of whole blocks
 * are refused.
 */
import { describe, expect, it } from 'vitest';
import { createReferenceBackend, type Weight } from '@orchard/engine';
import { matmulExact, quantizeQ4_0, quantizeQ8_0 } from '../../src/kernels/wasm/quant-reference.js';
import { Prng } from '../../src/numeric/prng.js';

describe('reference backend, quantized weights', () => {
  for (const dtype of ['q8_0', 'q4_0'] as const) {
    it(`${dtype}: matvec/matmul equal the exact dequantized product within f32 rounding`, () => {
      const be = createReferenceBackend();
      const rng = new Prng(3);
      for (const [rows, cols, n] of [[1, 32, 1], [7, 96, 3], [33, 256, 5]]) {
        const values = Float32Array.from({ length: rows * cols }, () => rng.symmetric(1));
        const q = (dtype === 'q8_0' ? quantizeQ8_0 : quantizeQ4_0)(values, rows, cols);
        const bytes = be.allocBytes(q.length);
        bytes.set(q);
        const w: Weight = { dtype, rows, cols, bytes };
        const x = Float32Array.from({ length: cols * n }, () => rng.symmetric(2));
        const out = new Float32Array(rows * n);
        be.matmul(out, w, x, n);
        const exact = matmulExact(dtype, bytes, rows, cols, x, n);
        for (let i = 0; i < rows * n; i++) expect(Math.abs(out[i] - exact.out[i])).toBeLessThanOrEqual((cols + 8) * 2 ** -24 * exact.magnitude[i] + 1e-30);
        const one = new Float32Array(rows);
        be.matvec(one, w, x.subarray(0, cols));
        expect([...one]).toEqual([...out.subarray(0, rows)]);
      }
    });
  }

  it('refuses a quantized weight whose rows are not whole 32-blocks', () => {
    const be = createReferenceBackend();
    const w: Weight = { dtype: 'q8_0', rows: 1, cols: 48, bytes: be.allocBytes(68) };
    expect(() => be.matvec(new Float32Array(1), w, new Float32Array(48))).toThrow(/q8_0 weight \[1, 48\] needs a column count that is a multiple of 32/);
  });
});
