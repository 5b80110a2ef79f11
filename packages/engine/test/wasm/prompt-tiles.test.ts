/**
 * Row-major formats whose prompt batches run token tiles over 4-row groups widened once per thread
 * (wasm/kquants.ts $rows_k5/6, wasm/mxfp4tiles.ts $rows_mx): every token of a batch gets exactly its
 * 1-token bits, in both kernel builds and with 1 and 2 threads, across 8-row and 4-row groups and the
 * rows%4 tail left to the 1-token kernels. FP8 (wasm/fp8tiles.ts $rows_fp8: row pairs decoded once,
 * 2-row × 1-4-token tiles, an odd last row on the 1-token kernel) likewise, at column counts that end
 * in a short block with a 16-column vector part and a scalar tail.
 */
import { describe, expect, it } from 'vitest';
import type { Weight } from '../../src/kernels/backend.js';
import { Prng } from '../../src/numeric/prng.js';
import { type KQuant, quantizeK } from '../../src/quant/kquants.js';
import { quantizeMxfp4 } from '../../src/quant/mxfp4.js';
import { E4M3_TO_F32, packFp8, quantizeFp8Blocks } from '../../src/quant/fp8.js';
import { rowBytes } from '../../src/kernels/wasm/formats.js';
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
  it.each([1, 2])('every token of a batch gets its 1-token bits, %i thread(s)', (threads) => {
    const be = backend(threads);
    const rng = new Prng(1300 + threads);
    // odd rows (the last row on the 1-token kernel), 1-4 tokens left after the 4-token tiles, short last blocks
    for (const [rows, cols, n] of [[2, 128, 2], [3, 13, 3], [7, 300, 5], [9, 129, 4], [5, 1000, 9], [16, 256, 64], [11, 17, 7], [1, 300, 6]]) {
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
});
