/**
 * Row-major formats whose prompt batches run token tiles over 4-row groups widened once per thread
 * (wasm/kquants.ts $rows_k5/6, wasm/mxfp4tiles.ts $rows_mx): every token of a batch gets exactly its
 * 1-token bits, in both kernel builds and with 1 and 2 threads, across 8-row and 4-row groups and the
 * rows%4 tail left to the 1-token kernels.
 */
import { describe, expect, it } from 'vitest';
import type { Weight } from '../../src/kernels/backend.js';
import { Prng } from '../../src/numeric/prng.js';
import { type KQuant, quantizeK } from '../../src/quant/kquants.js';
import { quantizeMxfp4 } from '../../src/quant/mxfp4.js';
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
