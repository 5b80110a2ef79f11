/**
 * Packed q8_0 / q4_0 decode (one token) in the relaxed build reads activations converted once per matvec
 * (quant_q8_decode: int8 x+ and x-; quant_q4_decode: plain int8), whose address the backend's prepare
 * stores where prompt batches keep their tile address. These check that the packed 1-token results still
 * equal the row-major kernels' bits (which read quant_q8's own form) in both builds, 1 and 2 threads, with
 * rows%4 tails, q8_0 bytes -128..127 against activations of both signs, and that the address is the
 * current matvec's own after other dtypes, prompt batches and shared inputs ran on the same backend.
 * Packed 4-bit MLX decode (relaxed build: quant_mlx4_decode's split x >> 7 / x & 127) has no row-major
 * twin with the same bits; its address check compares against its own first result (relaxed.test.ts
 * compares it with the baseline build bit for bit).
 */
import { describe, expect, it } from 'vitest';
import type { DType, Weight } from '../../src/kernels/backend.js';
import type { WasmBackend } from '../../src/kernels/wasm/backend.js';
import { mlxDType, weightBytes } from '../../src/kernels/wasm/formats.js';
import { quantizeMlxWeight } from '../../src/quant/mlx.js';
import { Prng } from '../../src/numeric/prng.js';
import { SIMD_BUILDS, randomInput, randomWeight, wasmBackendsForFile } from './helpers.js';

const bits = (a: Float32Array) => [...new Uint32Array(a.buffer, a.byteOffset, a.length)];

/** q8_0 rows whose quants run through every byte 0x00..0xff (so -128 and 127 too), scales ~2^-6..2^-4. */
function everyByteQ8(be: WasmBackend, rows: number, cols: number, rng: Prng): Weight {
  const bytes = be.allocBytes(weightBytes('q8_0', rows, cols));
  const nb = cols / 32;
  for (let blk = 0; blk < rows * nb; blk++) {
    const at = blk * 34;
    const h = 0x2400 + Math.floor(rng.next() * 0x800); // f16 in [2^-6, 2^-4)
    bytes[at] = h & 0xff;
    bytes[at + 1] = h >> 8;
    const start = Math.floor(rng.next() * 256);
    for (let j = 0; j < 32; j++) bytes[at + 2 + j] = (start + 37 * j + blk) & 0xff;
  }
  return { dtype: 'q8_0', rows, cols, bytes };
}

/** A copy of `w` in the same backend, packed. */
function packedCopy(be: WasmBackend, w: Weight): Weight {
  const bytes = be.allocBytes(w.bytes.length);
  bytes.set(w.bytes);
  const p: Weight = { dtype: w.dtype, rows: w.rows, cols: w.cols, bytes };
  be.packWeight(p);
  expect(p.packed).toBe('rows4');
  return p;
}

function matvec(be: WasmBackend, w: Weight, x: Float32Array): Float32Array {
  const out = be.allocF32(w.rows);
  be.matvec(out, w, x);
  return out;
}

/** A prompt batch of the given token rows, in backend memory. */
function promptOf(be: WasmBackend, cols: number, rows: Float32Array[]): Float32Array {
  const batch = be.allocF32(rows.length * cols);
  rows.forEach((r, i) => batch.set(r, i * cols));
  return batch;
}

describe.each(SIMD_BUILDS)('%s build: packed q8_0 / q4_0 decode', (simd) => {
  const backend = wasmBackendsForFile(simd);

  describe.each([1, 2])('%i thread(s)', (threads) => {
    it.each(['q8_0', 'q4_0'] as DType[])('%s: packed 1-token results equal row-major bit for bit (rows mod 4 tails, every q8_0 byte)', (dtype) => {
      const be = backend(threads);
      const rng = new Prng(dtype === 'q8_0' ? 81 : 41);
      for (const rows of [4, 5, 6, 7, 13, 64]) {
        for (const cols of [32, 96, 768]) {
          const w = dtype === 'q8_0' ? everyByteQ8(be, rows, cols, rng) : randomWeight(be, dtype, rows, cols, rng);
          const p = packedCopy(be, w);
          for (let trial = 0; trial < 3; trial++) {
            // activations of both signs, some exactly at ±amax (q = ±127) and some zero
            const x = randomInput(be, cols, rng, 1 + trial);
            x[0] = 3 + trial;
            x[cols - 1] = -(3 + trial);
            x[cols >> 1] = 0;
            expect(bits(matvec(be, p, x)), `[${rows}, ${cols}] trial ${trial}`).toEqual(bits(matvec(be, w, x)));
          }
        }
      }
    });
  });

  it('packed 4-bit MLX decode reads its own activations after q4_0 decode, prompt batches and shared inputs', () => {
    const be = backend(2);
    const rng = new Prng(11);
    const cols = 256;
    const mlx = (rows: number, groupSize: 32 | 64): Weight => {
      const layout = { bits: 4, groupSize, scales: 'bf16' } as const;
      const dtype = mlxDType(layout);
      const bytes = be.allocBytes(weightBytes(dtype, rows, cols));
      quantizeMlxWeight(Float32Array.from({ length: rows * cols }, () => rng.symmetric(1)), rows, cols, layout, bytes);
      const w: Weight = { dtype, rows, cols, bytes };
      be.packWeight(w);
      expect(w.packed).toBe('rows4');
      return w;
    };
    const m64 = mlx(13, 64);
    const m64b = mlx(8, 64);
    const m32 = mlx(9, 32);
    const q4 = packedCopy(be, randomWeight(be, 'q4_0', 12, cols, rng));
    const x = randomInput(be, cols, rng);
    const y = randomInput(be, cols, rng);
    const want = bits(matvec(be, m64, x));
    const want32y = bits(matvec(be, m32, y));
    const wantB = bits(matvec(be, m64b, x));
    const batch = promptOf(be, cols, [y, x, y]);
    const outBatch = be.allocF32(3 * 13);
    for (let round = 0; round < 2; round++) {
      matvec(be, q4, y); // q4_0's decode form at the same address
      expect(bits(matvec(be, m64, x)), `g64 after q4_0, round ${round}`).toEqual(want);
      expect(bits(matvec(be, m32, y)), `g32 after g64, round ${round}`).toEqual(want32y);
      be.matmul(outBatch, m64, batch, 3); // a prompt batch: its tile address replaces the decode form's
      expect(bits(matvec(be, m64, x)), `g64 after a prompt batch, round ${round}`).toEqual(want);
      const a = be.allocF32(13);
      const b = be.allocF32(8);
      be.matmulShared!([{ out: a, w: m64 }, { out: b, w: m64b }], x, 1); // one preparation for both
      expect(bits(a), 'shared first').toEqual(want);
      expect(bits(b), 'shared second').toEqual(wantB);
    }
  });

  it('each matvec reads its own converted activations after other dtypes, prompt batches and shared inputs', () => {
    const be = backend(2);
    const rng = new Prng(7);
    const cols = 256;
    const q4 = randomWeight(be, 'q4_0', 13, cols, rng);
    const q8 = everyByteQ8(be, 9, cols, rng);
    const q4b = randomWeight(be, 'q4_0', 8, cols, rng);
    const [p4, p8, p4b] = [q4, q8, q4b].map((w) => packedCopy(be, w));
    const x = randomInput(be, cols, rng);
    const y = randomInput(be, cols, rng);
    const want4 = bits(matvec(be, q4, x));
    const want8y = bits(matvec(be, q8, y));
    const want4b = bits(matvec(be, q4b, x));
    const batch = promptOf(be, cols, [y, x, y]);
    const outBatch = be.allocF32(3 * 13);
    for (let round = 0; round < 2; round++) {
      expect(bits(matvec(be, p4, x)), `q4_0 round ${round}`).toEqual(want4);
      expect(bits(matvec(be, p8, y)), `q8_0 after q4_0, round ${round}`).toEqual(want8y);
      be.matmul(outBatch, p4, batch, 3); // a prompt batch: its tile address replaces the decode form's
      expect(bits(outBatch.subarray(13, 26)), 'batch token 1').toEqual(want4);
      const a = be.allocF32(13);
      const b = be.allocF32(8);
      be.matmulShared!([{ out: a, w: p4 }, { out: b, w: p4b }], x, 1); // one preparation for both
      expect(bits(a), 'shared q4_0 first').toEqual(want4);
      expect(bits(b), 'shared q4_0 second').toEqual(want4b);
    }
  });
});
