/**
 * Row-major formats whose prompt batches run token tiles over 4-row groups widened once per thread
 * (wasm/kquants.ts $rows_k5/6, wasm/mxfp4tiles.ts $rows_mx): every token of a batch gets exactly its
 * 1-token bits, in both kernel builds and with 1 and 2 threads, across 8-row and 4-row groups and the
 * rows%4 tail left to the 1-token kernels. FP8 off the 32-column grid (wasm/fp8tiles.ts $rows_fp8: row
 * pairs decoded once, 2-row × 1-4-token tiles, an odd last row on the 1-token kernel) likewise, at column
 * counts that end in a short block with a 16-column vector part and a scalar tail. FP8 on the grid
 * ($rows_fp8q: q8_0's integer tiles over codes widened to i16) gives exactly what quant-reference.ts's
 * q8TilesOutput computes, whole 4-row groups, and the 1-token bits on the rows%4 tail.
 */
import { describe, expect, it } from 'vitest';
import type { Weight } from '../../src/kernels/backend.js';
import { Prng } from '../../src/numeric/prng.js';
import { type KQuant, quantizeK } from '../../src/quant/kquants.js';
import { quantizeMxfp4 } from '../../src/quant/mxfp4.js';
import { E4M3_TO_F32, packFp8, quantizeFp8Blocks } from '../../src/quant/fp8.js';
import { rowBytes } from '../../src/kernels/wasm/formats.js';
import { fp8RowInts, q8TilesOutput, quantizeFp8Activations } from '../../src/kernels/wasm/quant-reference.js';
import { SIMD_BUILDS, randomInput, wasmBackendsForFile } from './helpers.js';

type Format = 'q5_k' | 'q6_k' | 'mxfp4';

function weight(be: { allocBytes(n: number): Uint8Array }, dtype: Format, rows: number, cols: number, rng: Prng): Weight {
  // sub-blocks of different spreads and offsets, so scales (and q5_k's mins) differ within a block
  const values = Float32Array.from({ length: rows * cols }, (_, i) => rng.symmetric(1) * (1 + ((i >> 5) % 4)) + (((i >> 4) % 3) - 1) * 0.3);
  const q = dtype === 'mxfp4' ? quantizeMxfp4(values, rows, cols) : quantizeK(dtype as KQuant, values, rows, cols);
  const bytes = be.allocBytes(q.length);
  bytes.set(q);
  return { dtype, rows, cols, bytes };
}

describe.each(SIMD_BUILDS)('row-major prompt tiles, %s build', (simd) => {
  const backend = wasmBackendsForFile(simd);
  const cases = (['q5_k', 'q6_k', 'mxfp4'] as const).flatMap((dtype) => [1, 2].map((threads) => [dtype, threads] as const));
  it.each(cases)('%s: every token of a batch gets its 1-token bits, %i thread(s)', (dtype, threads) => {
    const be = backend(threads);
    const rng = new Prng(1200 + threads);
    const unit = dtype === 'mxfp4' ? 32 : 256;
    for (const [rows, blocks, n] of [[4, 1, 2], [8, 2, 3], [12, 1, 64], [13, 3, 5], [31, 5, 9], [64, 2, 17]]) {
      const cols = blocks * unit;
      const w = weight(be, dtype, rows, cols, rng);
      const x = randomInput(be, cols * n, rng);
      const out = be.allocF32(rows * n);
      be.matmul(out, w, x, n);
      const single = be.allocF32(rows);
      const xt = be.allocF32(cols);
      for (let t = 0; t < n; t++) {
        xt.set(x.subarray(t * cols, (t + 1) * cols));
        be.matvec(single, w, xt);
        expect([...out.subarray(t * rows, (t + 1) * rows)], `[${rows},${cols}] n=${n} token ${t}`).toEqual([...single]);
      }
    }
  });
});

describe.each(SIMD_BUILDS)('FP8 prompt tiles, %s build', (simd) => {
  const backend = wasmBackendsForFile(simd);
  it.each([1, 2])('off the 32-column grid every token of a batch gets its 1-token bits, %i thread(s)', (threads) => {
    const be = backend(threads);
    const rng = new Prng(1300 + threads);
    // odd rows (the last row on the 1-token kernel), 1-4 tokens left after the 4-token tiles, short last blocks
    for (const [rows, cols, n] of [[2, 130, 2], [3, 13, 3], [7, 300, 5], [9, 129, 4], [5, 1000, 9], [16, 260, 64], [11, 17, 7], [1, 300, 6]]) {
      const values = Float32Array.from({ length: rows * cols }, () => (rng.next() - 0.5) * (rng.next() < 0.1 ? 1e-4 : 1));
      const { codes, scaleInv } = quantizeFp8Blocks(values, rows, cols);
      codes[Math.min(3, codes.length - 1)] = 0x01; // a subnormal
      codes[Math.min(5, codes.length - 1)] = 0x86; // negative
      const bytes = be.allocBytes(rows * rowBytes('fp8_e4m3', cols));
      packFp8(codes, scaleInv, rows, cols, bytes);
      const w: Weight = { dtype: 'fp8_e4m3', rows, cols, bytes };
      const x = randomInput(be, cols * n, rng);
      const out = be.allocF32(rows * n);
      be.matmul(out, w, x, n);
      const single = be.allocF32(rows);
      const xt = be.allocF32(cols);
      for (let t = 0; t < n; t++) {
        xt.set(x.subarray(t * cols, (t + 1) * cols));
        be.matvec(single, w, xt);
        expect([...out.subarray(t * rows, (t + 1) * rows)], `[${rows},${cols}] n=${n} token ${t}`).toEqual([...single]);
      }
    }
  });

  it.each([1, 2])('on the 32-column grid: q8_0 integer tiles exactly as the reference computes them, the rows%%4 tail at its 1-token bits, %i thread(s)', (threads) => {
    const be = backend(threads);
    const rng = new Prng(1400 + threads);
    // 8- and 4-row groups and a tail, 1-4 tokens after the 4-token tiles, a short last 128-block (160, 96)
    for (const [rows, cols, n] of [[4, 32, 2], [8, 128, 3], [13, 96, 5], [16, 256, 17], [12, 160, 4], [7, 64, 64]]) {
      // rows of different spreads, so 32-column blocks get every shift s = max(0, E − 9) from 0 to 6
      const values = Float32Array.from({ length: rows * cols }, (_, i) => (rng.next() - 0.5) * 2 ** -((i >> 5) % 9) * (rng.next() < 0.1 ? 1e-3 : 1));
      const { codes, scaleInv } = quantizeFp8Blocks(values, rows, cols);
      codes[3] = 0x01; // a subnormal
      codes[5] = 0x86; // negative
      const bytes = be.allocBytes(rows * rowBytes('fp8_e4m3', cols));
      packFp8(codes, scaleInv, rows, cols, bytes);
      const shifts = new Set<number>();
      const q = new Int32Array(cols);
      const d = new Float32Array(cols / 32);
      for (let r = 0; r < rows; r++) {
        fp8RowInts(bytes, cols, r, q, d);
        for (let b = 0; b < cols / 32; b++) shifts.add(Math.round(Math.log2(d[b] / scaleInv[Math.floor(r / 128) * Math.ceil(cols / 128) + (b >> 2)])) + 9);
      }
      const w: Weight = { dtype: 'fp8_e4m3', rows, cols, bytes };
      const x = randomInput(be, cols * n, rng);
      const out = be.allocF32(rows * n);
      be.matmul(out, w, x, n);
      const want = q8TilesOutput('fp8_e4m3', bytes, rows, cols, x, n);
      const single = be.allocF32(rows);
      const xt = be.allocF32(cols);
      const g = rows - (rows % 4);
      for (let t = 0; t < n; t++) {
        expect([...out.subarray(t * rows, t * rows + g)], `[${rows},${cols}] n=${n} token ${t}`).toEqual([...want.subarray(t * rows, t * rows + g)]);
        xt.set(x.subarray(t * cols, (t + 1) * cols));
        be.matvec(single, w, xt);
        expect([...out.subarray(t * rows + g, (t + 1) * rows)], `[${rows},${cols}] tail, token ${t}`).toEqual([...single.subarray(g)]);
      }
      if (cols >= 128 && rows >= 8) expect([...shifts].sort()).toEqual([0, 1, 2, 3, 4, 5, 6]);
    }
  });

  it('on the grid each product is within the 15-bit activations\' and the shifted codes\' rounding of the exact one', () => {
    const be = backend(2);
    const rng = new Prng(1500);
    const rows = 24, cols = 384, n = 6;
    const values = Float32Array.from({ length: rows * cols }, (_, i) => (rng.next() - 0.5) * 2 ** -((i >> 5) % 7));
    const { codes, scaleInv } = quantizeFp8Blocks(values, rows, cols);
    const bytes = be.allocBytes(rows * rowBytes('fp8_e4m3', cols));
    packFp8(codes, scaleInv, rows, cols, bytes);
    const x = randomInput(be, cols * n, rng);
    const out = be.allocF32(rows * n);
    be.matmul(out, { dtype: 'fp8_e4m3', rows, cols, bytes }, x, n);
    const q = new Int32Array(cols);
    const d = new Float32Array(cols / 32);
    for (let r = 0; r < rows; r++) {
      fp8RowInts(bytes, cols, r, q, d);
      for (let t = 0; t < n; t++) {
        const a = quantizeFp8Activations(x, t * cols, cols);
        let exact = 0;
        let bound = 0;
        for (let c = 0; c < cols; c++) {
          const wv = E4M3_TO_F32[codes[r * cols + c]] * scaleInv[Math.floor(r / 128) * Math.ceil(cols / 128) + (c >> 7)];
          const xv = x[t * cols + c];
          const xq = a.q[c] * a.d[c >> 5];
          exact += wv * xv;
          bound += Math.abs(wv) * Math.abs(xv - xq) + Math.abs(xq) * Math.abs(wv - q[c] * d[c >> 5]) + 2 ** -22 * Math.abs(wv * xv);
        }
        expect(Math.abs(out[t * rows + r] - exact), `row ${r} token ${t}`).toBeLessThanOrEqual(bound);
        // and the bound is not vacuous: within 1e-3 of the products' magnitude
        expect(bound).toBeLessThan(1e-3 * [...Array(cols).keys()].reduce((m, c) => m + Math.abs(E4M3_TO_F32[codes[r * cols + c]] * scaleInv[c >> 7] * x[t * cols + c]), 0) + 1e-30);
      }
    }
  });

  it('every one of the 256 codes at every position of a 16-code vector decodes to its E4M3 value (1 token and a batch)', () => {
    const be = backend(1);
    const rows = 256, cols = 16 * 16 + 3; // columns 256..258: the scalar tail
    const codes = new Uint8Array(rows * cols); // code 0: +0
    for (let r = 0; r < rows; r++) codes[r * cols + ((r * 17) % cols)] = r;
    const bytes = be.allocBytes(rows * rowBytes('fp8_e4m3', cols));
    packFp8(codes, new Float32Array(rows * Math.ceil(cols / 128)).fill(1), rows, cols, bytes);
    const w: Weight = { dtype: 'fp8_e4m3', rows, cols, bytes };
    const x = be.allocF32(cols * 3);
    x.fill(1);
    const one = be.allocF32(rows);
    be.matvec(one, w, x.subarray(0, cols));
    const batch = be.allocF32(rows * 3);
    be.matmul(batch, w, x, 3);
    // x = 1 everywhere: each row sums its one code's value and zeros (−0 sums to +0)
    const want = [...E4M3_TO_F32].map((v) => (Object.is(v, -0) ? 0 : v));
    expect([...one]).toEqual(want);
    for (let t = 0; t < 3; t++) expect([...batch.subarray(t * rows, (t + 1) * rows)]).toEqual(want);
  });

  it('a NaN code (0x7f) gives NaN in its row for every token, as the 1-token kernel does', () => {
    const be = backend(1);
    const rows = 4, cols = 200, n = 5;
    const { codes, scaleInv } = quantizeFp8Blocks(Float32Array.from({ length: rows * cols }, (_, i) => Math.sin(i)), rows, cols);
    codes[cols + 150] = 0x7f; // row 1, in the short block's vector part
    codes[3 * cols + 195] = 0xff; // row 3, the scalar tail (200 = 128 + 64 + 8)
    const bytes = be.allocBytes(rows * rowBytes('fp8_e4m3', cols));
    packFp8(codes, scaleInv, rows, cols, bytes);
    const x = randomInput(be, cols * n, new Prng(5));
    const out = be.allocF32(rows * n);
    be.matmul(out, { dtype: 'fp8_e4m3', rows, cols, bytes }, x, n);
    for (let t = 0; t < n; t++) expect([...out.subarray(t * rows, (t + 1) * rows)].map(Number.isNaN)).toEqual([false, true, false, true]);
  });

  it('on the grid a NaN code (0x7f / 0xff) gives NaN in its row for every token, the other rows finite', () => {
    const be = backend(1);
    const rows = 8, cols = 192, n = 5;
    const { codes, scaleInv } = quantizeFp8Blocks(Float32Array.from({ length: rows * cols }, (_, i) => Math.sin(i)), rows, cols);
    codes[cols + 150] = 0x7f; // row 1, the short 128-block
    codes[6 * cols + 3] = 0xff; // row 6
    const bytes = be.allocBytes(rows * rowBytes('fp8_e4m3', cols));
    packFp8(codes, scaleInv, rows, cols, bytes);
    const x = randomInput(be, cols * n, new Prng(6));
    const out = be.allocF32(rows * n);
    be.matmul(out, { dtype: 'fp8_e4m3', rows, cols, bytes }, x, n);
    for (let t = 0; t < n; t++) expect([...out.subarray(t * rows, (t + 1) * rows)].map(Number.isNaN)).toEqual([false, true, false, false, false, false, true, false]);
  });
});
