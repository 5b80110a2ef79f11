/** The reference backend: f16/bf16 widened inside the kernel equal f32 maths on the widened values; matmul rows equal matvec. */
import { describe, expect, it } from 'vitest';
import { BF16_TO_F32, createReferenceBackend, F16_TO_F32, f32ToBf16Bits, f32ToF16Bits, type Weight } from '../src/index.js';
import { Prng } from '../src/numeric/prng.js';

const be = createReferenceBackend();
const rng = new Prng(3);
const rows = 13;
const cols = 37;
const values = Float32Array.from({ length: rows * cols }, () => rng.symmetric(1));

function weight(dtype: 'f32' | 'f16' | 'bf16'): { w: Weight; widened: Float32Array } {
  if (dtype === 'f32') {
    const bytes = be.allocBytes(values.byteLength);
    bytes.set(new Uint8Array(values.buffer));
    return { w: { dtype, rows, cols, bytes }, widened: values };
  }
  const bytes = be.allocBytes(values.length * 2);
  const bits = new Uint16Array(bytes.buffer, 0, values.length);
  const conv = dtype === 'f16' ? f32ToF16Bits : f32ToBf16Bits;
  const table = dtype === 'f16' ? F16_TO_F32 : BF16_TO_F32;
  values.forEach((v, i) => (bits[i] = conv(v)));
  return { w: { dtype, rows, cols, bytes }, widened: Float32Array.from(bits, (b) => table[b]) };
}

describe('half conversions', () => {
  it('round-trip exactly representable values and round to nearest', () => {
    for (const v of [0, 1, -2, 0.5, 65504, 2 ** -24, -(2 ** -14)]) expect(F16_TO_F32[f32ToF16Bits(v)]).toBe(v);
    expect(F16_TO_F32[f32ToF16Bits(1e6)]).toBe(Infinity);
    expect(Math.abs(F16_TO_F32[f32ToF16Bits(0.1)] - 0.1)).toBeLessThan(0.1 * 2 ** -11);
    for (const v of [0, 1, -3.5, 2 ** 100]) expect(BF16_TO_F32[f32ToBf16Bits(v)]).toBe(v);
    expect(Math.abs(BF16_TO_F32[f32ToBf16Bits(0.1)] - 0.1)).toBeLessThan(0.1 * 2 ** -8);
  });
});

describe.each(['f32', 'f16', 'bf16'] as const)('reference %s kernels', (dtype) => {
  const { w, widened } = weight(dtype);
  const n = 3;
  const x = Float32Array.from({ length: n * cols }, () => rng.symmetric(1));

  it('matvec equals a plain f64 dot product of the widened weights (to f32 rounding)', () => {
    const out = be.allocF32(rows);
    be.matvec(out, w, x);
    for (let r = 0; r < rows; r++) {
      let s = 0;
      for (let c = 0; c < cols; c++) s += widened[r * cols + c] * x[c];
      expect(Math.abs(out[r] - s)).toBeLessThan(1e-5);
    }
  });

  it('each matmul row is exactly the matvec of that input', () => {
    const out = be.allocF32(n * rows);
    be.matmul(out, w, x, n);
    const one = be.allocF32(rows);
    for (let b = 0; b < n; b++) {
      be.matvec(one, w, x.subarray(b * cols));
      expect(Array.from(out.subarray(b * rows, (b + 1) * rows))).toEqual(Array.from(one));
    }
  });
});
