/**
 * The WASM K-quant kernels (q4_k, q5_k, q6_k; wasm/kquants.ts) against f64 oracles on odd shapes:
 * - the same scheme (ggml's Q8_K activations, exact dequantized weights): only f32 rounding of the
 *   per-super-block steps, ≤ (2·blocks + 8)·2^-23·Σ(|a·q| + |b|)·|x|;
 * - the exact product (f32 activations): plus the activation rounding, ≤ d_x/2·(1 + 2^-20) per
 *   element times Σ|w| over its super-block.
 * Rows of a batch equal the 1-token results bit for bit, and 2 threads equal 1 (prompt-tiles.test.ts
 * checks the q5_k / q6_k token tiles on larger batches).
 */
import { describe, expect, it } from 'vitest';
import type { Weight } from '../../src/kernels/backend.js';
import { createReferenceBackend } from '../../src/kernels/reference.js';
import { Prng } from '../../src/numeric/prng.js';
import { type KQuant, dequantizeKRow, matmulKReference, quantizeActivationsK, quantizeK } from '../../src/quant/kquants.js';
import { unpackRows4 } from '../../src/kernels/wasm/pack.js';
import { SIMD_BUILDS, pick, randomInput, wasmBackendsForFile } from './helpers.js';

const ROWS = [1, 2, 3, 4, 5, 7, 9, 13, 31];
const COLS = [256, 512, 768, 1280];
const FORMATS: KQuant[] = ['q4_k', 'q5_k', 'q6_k'];
const backend = wasmBackendsForFile();

function randomK(be: { allocBytes(n: number): Uint8Array }, dtype: KQuant, rows: number, cols: number, rng: Prng): Weight {
  // sub-blocks of different spreads and offsets, so scales and mins differ within a super-block
  const values = Float32Array.from({ length: rows * cols }, (_, i) => rng.symmetric(1) * (1 + ((i >> 5) % 4)) + (((i >> 4) % 3) - 1) * 0.3);
  const q = quantizeK(dtype, values, rows, cols);
  const bytes = be.allocBytes(q.length);
  bytes.set(q);
  return { dtype, rows, cols, bytes };
}

describe.each([1, 2])('wasm K-quant kernels, %i thread(s)', (threads) => {
  const be = backend(threads);
  const one = threads === 1 ? be : backend(1);
  it.each(FORMATS)('%s matvec and matmul equal the f64 oracles within the bounds', (dtype) => {
    const rng = new Prng(500 + threads * 17 + dtype.charCodeAt(1));
    for (let trial = 0; trial < 16; trial++) {
      const rows = pick(rng, ROWS);
      const cols = pick(rng, COLS);
      const n = trial < 6 ? 1 : 1 + Math.floor(rng.next() * 5);
      const w = randomK(be, dtype, rows, cols, rng);
      const x = randomInput(be, cols * n, rng);
      const out = be.allocF32(rows * n);
      be.matmul(out, w, x, n);
      const same = matmulKReference(dtype, w.bytes, rows, cols, x, n, true);
      const exact = matmulKReference(dtype, w.bytes, rows, cols, x, n, false);
      const nb = cols / 256;
      const row = new Float32Array(cols);
      for (let r = 0; r < rows; r++) {
        dequantizeKRow(dtype, w.bytes, cols, r, row);
        for (let t = 0; t < n; t++) {
          const i = t * rows + r;
          const tolSame = (2 * nb + 8) * 2 ** -23 * same.magnitude[i] + 1e-30;
          expect(Math.abs(out[i] - same.out[i]), `${dtype} [${rows},${cols}] n=${n} out[${i}] vs same scheme`).toBeLessThanOrEqual(tolSame);
          const acts = quantizeActivationsK(x, t * cols, cols);
          let actErr = 0;
          for (let c = 0; c < cols; c++) actErr += Math.abs(row[c]) * (acts.d[(c / 256) | 0] / 2) * (1 + 2 ** -20);
          expect(Math.abs(out[i] - exact.out[i]), `${dtype} [${rows},${cols}] out[${i}] vs exact`).toBeLessThanOrEqual(tolSame + actErr);
        }
      }
      // every token of a batch equals its own matvec, and 1 thread equals N, bit for bit
      for (let t = 0; t < n; t++) {
        const single = one.allocF32(rows);
        const xt = one.allocF32(cols);
        xt.set(x.subarray(t * cols, (t + 1) * cols));
        const w1 = threads === 1 ? w : { ...w, bytes: one.allocBytes(w.bytes.length) };
        if (w1 !== w) w1.bytes.set(w.bytes);
        one.matvec(single, w1, xt);
        expect([...single]).toEqual([...out.subarray(t * rows, (t + 1) * rows)]);
      }
    }
  });
});

// packed q4_k moves nibbles; packed q5_k / q6_k put each super-block's 4 row blocks back to back (with one
// super-block that is the row-major order, so bytes move only from 512 columns on). Both builds.
const PACKED_CASES = SIMD_BUILDS.flatMap((simd) => FORMATS.flatMap((dtype) => [1, 2].map((threads) => [simd, dtype, threads] as const)));
const builds = { relaxed: wasmBackendsForFile('relaxed'), baseline: wasmBackendsForFile('baseline') };
describe('wasm packed K-quants', () => {
  it.each(PACKED_CASES)('%s build, packed %s, %i thread(s): the row-major bits for 1-token and batched products; unpacking restores the bytes', (simd, dtype, threads) => {
    const be = builds[simd](threads);
    const rng = new Prng(900 + threads + dtype.charCodeAt(1) * 3);
    for (let trial = 0; trial < 12; trial++) {
      const rows = pick(rng, [4, 5, 7, 8, 12, 13, 31, 64]);
      const cols = trial === 0 ? 256 : pick(rng, COLS);
      const n = trial < 4 ? 1 : 1 + Math.floor(rng.next() * 10);
      const w = randomK(be, dtype, rows, cols, rng);
      const raw = w.bytes.slice();
      const x = randomInput(be, cols * n, rng);
      const rowMajor = be.allocF32(rows * n);
      be.matmul(rowMajor, w, x, n);
      be.packWeight(w);
      expect(w.packed).toBe('rows4');
      if (dtype === 'q4_k' || cols > 256) expect(Buffer.from(w.bytes).equals(Buffer.from(raw)), 'packing moves the bytes').toBe(false);
      const packed = be.allocF32(rows * n);
      be.matmul(packed, w, x, n);
      expect([...packed], `${dtype} [${rows}, ${cols}] n=${n}`).toEqual([...rowMajor]);
      const decode = be.allocF32(rows);
      be.matvec(decode, w, x.subarray(0, cols));
      expect([...decode], `${dtype} [${rows}, ${cols}] decode`).toEqual([...rowMajor.subarray(0, rows)]);
      unpackRows4(w);
      expect(Buffer.from(w.bytes).equals(Buffer.from(raw))).toBe(true);
    }
  });
});

describe('reference backend, K-quant weights', () => {
  it.each(FORMATS)('%s: matmul equals the exact dequantized product within f32 rounding', (dtype) => {
    const ref = createReferenceBackend();
    const rng = new Prng(77 + dtype.charCodeAt(1));
    for (const [rows, cols, n] of [[1, 256, 1], [7, 512, 3], [5, 768, 2]]) {
      const w = randomK(ref, dtype, rows, cols, rng);
      const x = Float32Array.from({ length: cols * n }, () => rng.symmetric(2));
      const out = new Float32Array(rows * n);
      ref.matmul(out, w, x, n);
      const exact = matmulKReference(dtype, w.bytes, rows, cols, x, n, false);
      for (let i = 0; i < rows * n; i++) expect(Math.abs(out[i] - exact.out[i])).toBeLessThanOrEqual((cols + 8) * 2 ** -23 * exact.magnitude[i] + 1e-30);
    }
  });

  it('refuses a K-quant weight whose rows are not whole 256-blocks', () => {
    const ref = createReferenceBackend();
    const w: Weight = { dtype: 'q4_k', rows: 1, cols: 128, bytes: ref.allocBytes(144) };
    expect(() => ref.matvec(new Float32Array(1), w, new Float32Array(128))).toThrow(/q4_k weight \[1, 128\] needs a column count that is a multiple of 256/);
  });
});
