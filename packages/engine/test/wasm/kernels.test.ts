import { describe, expect, it } from 'vitest';
import type { DType } from '../../src/kernels/backend.js';
import { Prng } from '../../src/numeric/prng.js';
import { createReferenceBackend } from '../../src/kernels/reference.js';
import { QK } from '../../src/kernels/wasm/formats.js';
import { dequantizeRow as dequantize, matmulExact, matmulQ8Activations, quantizeActivations } from '../../src/kernels/wasm/quant-reference.js';
import { exactMatmul, pick, randomInput, randomWeight, SIMD_BUILDS, wasmBackendsForFile, widened } from './helpers.js';

const U = 2 ** -24;
const ROWS = [1, 2, 3, 4, 5, 7, 8, 9, 13, 31, 67];
const FLOAT_COLS = [1, 3, 7, 8, 9, 15, 16, 17, 33, 100, 257];
const QUANT_COLS = [32, 64, 96, 160, 288];
const BATCH = [1, 2, 3, 5];
const PACKED_BATCH = [2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 16, 19];

// Every suite runs on both kernel builds: the relaxed one fuses the f16 multiply-adds (FMA).
describe.each(SIMD_BUILDS)('%s kernel build', (simd) => {
  const backend = wasmBackendsForFile(simd);

  describe.each([1, 2])('wasm kernels, %i thread(s)', (threads) => {
    const be = backend(threads);

    // Tolerance (f32/f16/bf16): the kernel sums f32-rounded products in another order than the exact
    // f64 sum; any f32 summation of k terms is within k·2^-24·Σ|terms| of it (k ≤ cols + 8 here).
    it.each(['f32', 'f16', 'bf16'] as DType[])('%s matvec and matmul equal the exact dot product', (dtype) => {
      const rng = new Prng(1234 + threads * 7 + dtype.length);
      for (let trial = 0; trial < 40; trial++) {
        const rows = pick(rng, ROWS);
        const cols = pick(rng, FLOAT_COLS);
        const n = trial < 12 ? 1 : pick(rng, BATCH);
        const w = randomWeight(be, dtype, rows, cols, rng);
        const x = randomInput(be, cols * n, rng);
        const out = be.allocF32(rows * n + 3);
        out.fill(12345);
        if (n === 1 && trial % 2 === 0) be.matvec(out, w, x);
        else be.matmul(out, w, x, n);
        const ref = exactMatmul(widened(w), rows, cols, x, n);
        for (let i = 0; i < rows * n; i++) {
          const tol = (cols + 8) * U * ref.magnitude[i];
          if (!(Math.abs(out[i] - ref.out[i]) <= tol)) {
            throw new Error(`${dtype} [${rows},${cols}] n=${n} out[${i}] = ${out[i]}, exact ${ref.out[i]}, tol ${tol}`);
          }
        }
        expect([...out.subarray(rows * n)]).toEqual([12345, 12345, 12345]);
      }
    });

    // Tolerances (q8_0/q4_0): against the same scheme computed in f64 (activations quantized like
    // llama.cpp): only f32 rounding of block terms, ≤ (blocks + 8)·2^-23·Σ|terms|. Against dequantized
    // weights · f32 activations: plus the activation quantization error, per block at most
    // d/2 + 127·|d − f16(d)| (+ f32 slack) per element (d = amax/127), times Σ|w| over the block.
    // Against the reference backend (which sums dequantized weights · f32 activations in f32): plus its
    // own (cols + 8)·2^-24·Σ|terms|.
    // Packed weights (as the loader leaves them) run prompt batches through the token-tile kernels
    // ($qtiles): batches up to 19 tokens cover whole tiles, every smaller last tile, and rows%4 tails.
    it.each([
      ['q8_0', false],
      ['q4_0', false],
      ['q8_0', true],
      ['q4_0', true],
      ['mxfp4', false],
    ] as Array<[DType, boolean]>)('%s matvec and matmul equal the reference within the bounds (packed: %s)', (dtype, packed) => {
      const rng = new Prng(99 + threads * 13 + dtype.length + (packed ? 1000 : 0));
      const reference = createReferenceBackend();
      for (let trial = 0; trial < 30; trial++) {
        const rows = pick(rng, ROWS);
        const cols = pick(rng, QUANT_COLS);
        const n = trial < 10 ? 1 : pick(rng, packed ? PACKED_BATCH : BATCH);
        const w = randomWeight(be, dtype, rows, cols, rng);
        const raw = w.bytes.slice();
        if (packed) be.packWeight(w);
        const x = randomInput(be, cols * n, rng);
        const out = be.allocF32(rows * n);
        if (n === 1) be.matvec(out, w, x);
        else be.matmul(out, w, x, n);
        const same = matmulQ8Activations(dtype, raw, rows, cols, x, n);
        const exact = matmulExact(dtype, raw, rows, cols, x, n);
        const absW = absWeightBlockSums(dtype, raw, rows, cols);
        // the plain-TS reference backend (dequantized weights, f32 activations and sums) on the raw bytes
        const refOut = new Float32Array(rows * n);
        reference.matmul(refOut, { dtype, rows, cols, bytes: raw }, x, n);
        for (let b = 0; b < n; b++) {
          const acts = quantizeActivations(x, b * cols, cols);
          for (let r = 0; r < rows; r++) {
            const i = b * rows + r;
            const tolSame = (cols / QK + 8) * 2 * U * same.magnitude[i];
            expect(Math.abs(out[i] - same.out[i]), `${dtype} [${rows},${cols}] out[${i}] vs q8-activation reference`).toBeLessThanOrEqual(tolSame);
            let tolExact = tolSame;
            for (let k = 0; k < cols / QK; k++) {
              // + 127·dRaw·2^-22: the scale used to round (127/amax) is 1/dRaw only to within f32 rounding.
              const e = acts.dRaw[k] / 2 + 127 * Math.abs(acts.dRaw[k] - acts.d[k]) + 127 * acts.dRaw[k] * 2 ** -22;
              tolExact += absW[r * (cols / QK) + k] * e * (1 + 1e-6);
            }
            expect(Math.abs(out[i] - exact.out[i]), `${dtype} [${rows},${cols}] out[${i}] vs exact`).toBeLessThanOrEqual(tolExact);
            // + the reference backend's own f32 summation error against the exact value
            const tolRef = tolExact + (cols + 8) * U * exact.magnitude[i];
            expect(Math.abs(out[i] - refOut[i]), `${dtype} [${rows},${cols}] out[${i}] vs reference backend`).toBeLessThanOrEqual(tolRef);
          }
        }
      }
    });

    // The plain-TS reference backend is the engine's oracle: both sum f32 products in different orders,
    // so each is within (cols + 8)·2^-24·Σ|terms| of the exact value and they are within twice that.
    it.each(['f32', 'f16', 'bf16'] as DType[])('%s equals the reference backend', (dtype) => {
      const reference = createReferenceBackend();
      const rng = new Prng(777 + threads + dtype.length);
      for (let trial = 0; trial < 25; trial++) {
        const rows = pick(rng, ROWS);
        const cols = pick(rng, FLOAT_COLS);
        const n = pick(rng, BATCH);
        const w = randomWeight(be, dtype, rows, cols, rng);
        const x = randomInput(be, cols * n, rng);
        const out = be.allocF32(rows * n);
        const expected = new Float32Array(rows * n);
        be.matmul(out, w, x, n);
        reference.matmul(expected, w, x, n);
        const { magnitude } = exactMatmul(widened(w), rows, cols, x, n);
        for (let i = 0; i < rows * n; i++) {
          const tol = 2 * (cols + 8) * U * magnitude[i];
          expect(Math.abs(out[i] - expected[i]), `${dtype} [${rows},${cols}] n=${n} out[${i}]`).toBeLessThanOrEqual(tol);
        }
      }
    });

    // The activation quantizers take a block's amax as an integer max of |x|'s bits: a NaN must still
    // win it (a NaN scale), so a broken activation reaches the logits as NaN instead of as a number.
    it.each([
      ['q8_0', false],
      ['q4_0', false],
      ['q4_0', true],
    ] as Array<[DType, boolean]>)('%s: a NaN activation makes its token NaN and leaves the others alone (packed: %s)', (dtype, packed) => {
      const rng = new Prng(31 + dtype.length);
      const rows = 9;
      const cols = 96;
      for (const n of [1, 6]) {
        const w = randomWeight(be, dtype, rows, cols, rng);
        if (packed) be.packWeight(w);
        const x = randomInput(be, cols * n, rng);
        const bad = n - 1;
        x[bad * cols + 40] = NaN;
        const out = be.allocF32(rows * n);
        if (n === 1) be.matvec(out, w, x);
        else be.matmul(out, w, x, n);
        for (let b = 0; b < n; b++) {
          const token = [...out.subarray(b * rows, (b + 1) * rows)];
          expect(token.every((v) => (b === bad ? Number.isNaN(v) : Number.isFinite(v))), `${dtype} n=${n} token ${b}: ${token}`).toBe(true);
        }
      }
    });

    it('splits a larger kernel over many row chunks', () => {
      const rng = new Prng(5);
      for (const dtype of ['f32', 'f16', 'bf16', 'q8_0', 'q4_0'] as DType[]) {
        const rows = 301;
        const cols = 224;
        const w = randomWeight(be, dtype, rows, cols, rng);
        const x = randomInput(be, cols * 2, rng);
        const out = be.allocF32(rows * 2);
        be.matmul(out, w, x, 2);
        const ref = dtype.startsWith('q')
          ? matmulQ8Activations(dtype, w.bytes, rows, cols, x, 2)
          : exactMatmul(widened(w), rows, cols, x, 2);
        for (let i = 0; i < rows * 2; i++) {
          expect(Math.abs(out[i] - ref.out[i]), `${dtype} out[${i}]`).toBeLessThanOrEqual((cols + 8) * 2 * U * ref.magnitude[i]);
        }
      }
    });
  });

  /** Σ|w| per (row, block) of a block-format weight. */
  describe('determinism', () => {
    // Each output is computed by one thread in a fixed order that does not depend on the batch (the
    // 4-row×2-token tiles sum each token exactly as the 4-row kernel does) or on the thread count, so
    // prompt processing and decode produce the same bits, as with the reference. Decode takes short
    // rows one at a time and long ones (5120 columns: past 12 KB of activations) 4 at a time.
    it.each(['f32', 'f16', 'bf16', 'q8_0', 'q4_0'] as DType[])('%s: matmul rows equal matvec, 1 thread equals 2, bit for bit', (dtype) => {
      const one = backend(1);
      const two = backend(2);
      const rng = new Prng(31 + dtype.length);
      for (const [rows, cols, n] of [[37, 96, 5], [8, 64, 2], [3, 160, 4], [9, 5120, 2]] as const) {
        const seed = Math.floor(rng.next() * 1e9);
        const w1 = randomWeight(one, dtype, rows, cols, new Prng(seed));
        const w2 = randomWeight(two, dtype, rows, cols, new Prng(seed));
        const x1 = randomInput(one, cols * n, new Prng(seed + 1));
        const x2 = randomInput(two, cols * n, new Prng(seed + 1));
        const batch1 = one.allocF32(rows * n);
        const batch2 = two.allocF32(rows * n);
        one.matmul(batch1, w1, x1, n);
        two.matmul(batch2, w2, x2, n);
        expect([...batch2]).toEqual([...batch1]);
        const single = one.allocF32(rows);
        for (let b = 0; b < n; b++) {
          one.matvec(single, w1, x1.subarray(b * cols, (b + 1) * cols));
          expect([...single], `token ${b}`).toEqual([...batch1.subarray(b * rows, (b + 1) * rows)]);
        }
      }
    });
  });

  describe('threads', () => {
    it('worker threads compute row chunks of shared kernels (and results stay exact)', () => {
      const be = backend(2);
      const rng = new Prng(11);
      const w = randomWeight(be, 'f32', 512, 256, rng);
      const x = randomInput(be, 256, rng);
      const out = be.allocF32(512);
      const ref = exactMatmul(widened(w), 512, 256, x, 1);
      // A worker joins a kernel only if it wakes before the caller runs out of chunks; on a busy
      // machine that can take a few kernels. Every result must be right whoever computed it.
      const deadline = Date.now() + 10_000;
      while (be.threadStats().workerChunks === 0 && Date.now() < deadline) {
        out.fill(0);
        be.matvec(out, w, x);
        for (let i = 0; i < 512; i++) expect(Math.abs(out[i] - ref.out[i])).toBeLessThanOrEqual(264 * U * ref.magnitude[i]);
      }
      expect(be.threadStats().sharedJobs).toBeGreaterThan(0);
      expect(be.threadStats().workerChunks).toBeGreaterThan(0);
    });

    // Back-to-back kernels of changing shapes and dtypes: a worker that joined late, or read a
    // descriptor being rewritten, would leave a wrong or stale row somewhere. Every output is compared
    // bit for bit with a single-threaded backend given the same data.
    it('hundreds of back-to-back shared kernels stay exact', () => {
      const two = backend(2);
      const one = backend(1);
      const shapes: Array<[DType, number, number, number]> = [
        ['f32', 67, 40, 1],
        ['f32', 520, 256, 1],
        ['q4_0', 9, 64, 3],
        ['f16', 130, 24, 1],
        ['f16', 300, 384, 1],
        ['bf16', 12, 17, 2],
        ['q8_0', 45, 96, 1],
        ['q8_0', 400, 512, 1],
      ];
      const setups = shapes.map(([dtype, rows, cols, n], i) => {
        const seed = 500 + i;
        const w2 = randomWeight(two, dtype, rows, cols, new Prng(seed));
        const w1 = randomWeight(one, dtype, rows, cols, new Prng(seed));
        const x2 = randomInput(two, cols * n, new Prng(seed + 1));
        const x1 = randomInput(one, cols * n, new Prng(seed + 1));
        const expected = one.allocF32(rows * n);
        one.matmul(expected, w1, x1, n);
        return { w2, x2, n, expected, out: two.allocF32(rows * n) };
      });
      const rng = new Prng(77);
      for (let k = 0; k < 1500; k++) {
        const s = setups[Math.floor(rng.next() * setups.length)];
        s.out.fill(NaN);
        two.matmul(s.out, s.w2, s.x2, s.n);
        // Last rows first: the caller takes the first chunks, so a late worker's rows are at the end.
        for (let i = s.out.length - 1; i >= 0; i--) {
          if (!Object.is(s.out[i], s.expected[i])) throw new Error(`kernel ${k} (${s.w2.dtype}) out[${i}] = ${s.out[i]}, expected ${s.expected[i]}`);
        }
      }
    });

    it('one thread never shares', () => {
      const be = backend(1, 1 << 20);
      const rng = new Prng(12);
      be.matvec(be.allocF32(64), randomWeight(be, 'f16', 64, 64, rng), randomInput(be, 64, rng));
      expect(be.threadStats()).toEqual({ sharedJobs: 0, workerChunks: 0 });
    });
  });

  /** Σ|w| per (row, block) of a block-format weight. */
  function absWeightBlockSums(dtype: DType, bytes: Uint8Array, rows: number, cols: number): Float64Array {
    const nb = cols / QK;
    const sums = new Float64Array(rows * nb);
    const row = new Float32Array(cols);
    for (let r = 0; r < rows; r++) {
      dequantize(dtype, bytes, cols, r, row);
      for (let k = 0; k < nb; k++) {
        let s = 0;
        for (let j = 0; j < QK; j++) s += Math.abs(row[k * QK + j]);
        sums[r * nb + k] = s;
      }
    }
    return sums;
  }
});
