import { describe, expect, it } from 'vitest';
import type { DType } from '../../src/kernels/backend.js';
import { createReferenceBackend } from '../../src/kernels/reference.js';
import { packRows4, packedSubnormals, unpackRows4 } from '../../src/kernels/wasm/pack.js';
import { Prng } from '../../src/numeric/prng.js';
import { exactMatmul, expectBatchEqualsSingles, pick, randomInput, randomWeight, SIMD_BUILDS, wasmBackendsForFile, widened } from './helpers.js';

// Every suite runs on both kernel builds: the relaxed one fuses the f16 multiply-adds (FMA).
describe.each(SIMD_BUILDS)('%s kernel build', (simd) => {
  const backend = wasmBackendsForFile(simd);

  const ROWS = [1, 3, 4, 5, 7, 8, 9, 12, 13, 31, 67];
  const F16_COLS = [1, 3, 7, 8, 9, 15, 16, 17, 33, 100, 257];
  const QUANT_COLS = [32, 64, 96, 160, 288];
  const BATCH = [1, 1, 2, 3, 4, 5, 7, 9];

  describe('packed weights (4-row interleave)', () => {
    it.each(['f16', 'q8_0', 'q4_0'] as DType[])('%s: pack then unpack restores every byte', (dtype) => {
      const be = backend(1);
      const rng = new Prng(3 + dtype.length);
      for (let trial = 0; trial < 30; trial++) {
        const rows = pick(rng, ROWS);
        const cols = pick(rng, dtype === 'f16' ? F16_COLS : QUANT_COLS);
        const w = randomWeight(be, dtype, rows, cols, rng);
        const before = w.bytes.slice();
        packRows4(w);
        expect(w.packed).toBe('rows4');
        // (f16 with fewer than 8 columns is all tail: its packed layout is the row-major one.)
        if (rows >= 4 && (dtype !== 'f16' || cols >= 8)) expect(Buffer.compare(Buffer.from(w.bytes), Buffer.from(before)), `[${rows},${cols}] packing moved nothing`).not.toBe(0);
        unpackRows4(w);
        expect(w.packed).toBeUndefined();
        expect(Buffer.compare(Buffer.from(w.bytes), Buffer.from(before))).toBe(0);
      }
    });

    // The group kernels sum every output in exactly the order of the row-major kernels (f16: the 4-row
    // pass; q8_0/q4_0: exact integer block sums, then block by block in f32), so a packed weight gives
    // the unpacked weight's results bit for bit: decode and prompt batches, 1 and 2 threads, rows%4 tails.
    // Except f16 rows with subnormal weights: those terms are added after the dense sum (pack.ts), so
    // such outputs are checked against the exact dot product with the f32 bound of the f16 kernels
    // ((cols + 8)·2^-24·Σ|w·x|, test/wasm/kernels.test.ts) instead.
    describe.each([1, 2])('%i thread(s)', (threads) => {
      const be = backend(threads);
      it.each(['f16', 'q8_0', 'q4_0'] as DType[])('%s: packed results equal unpacked (bit for bit where no subnormal was taken out)', (dtype) => {
        const rng = new Prng(40 + threads * 11 + dtype.length);
        for (let trial = 0; trial < 40; trial++) {
          const rows = pick(rng, ROWS);
          const cols = pick(rng, dtype === 'f16' ? F16_COLS : QUANT_COLS);
          const n = pick(rng, BATCH);
          const seed = Math.floor(rng.next() * 1e9);
          const plain = randomWeight(be, dtype, rows, cols, new Prng(seed));
          const packed = randomWeight(be, dtype, rows, cols, new Prng(seed));
          be.packWeight(packed);
          expect(packed.packed).toBe(rows >= 4 ? 'rows4' : undefined);
          const x = randomInput(be, cols * n, rng);
          const want = be.allocF32(rows * n);
          const got = be.allocF32(rows * n + 3);
          got.fill(12345);
          be.matmul(want, plain, x, n);
          if (n === 1) be.matvec(got, packed, x);
          else be.matmul(got, packed, x, n);
          const taken = new Set<number>();
          const sub = packedSubnormals(packed);
          for (let i = 0; sub && i < sub.length; i += 3) taken.add(sub[i]);
          const exact = taken.size ? exactMatmul(widened(plain), rows, cols, x, n) : null;
          for (let i = 0; i < rows * n; i++) {
            if (exact && taken.has(i % rows)) {
              const tol = (cols + 8) * 2 ** -24 * exact.magnitude[i];
              if (!(Math.abs(got[i] - exact.out[i]) <= tol)) throw new Error(`${dtype} [${rows},${cols}] n=${n} out[${i}] = ${got[i]}, exact ${exact.out[i]}, tol ${tol}`);
            } else if (!Object.is(got[i], want[i])) throw new Error(`${dtype} [${rows},${cols}] n=${n} out[${i}] = ${got[i]}, unpacked ${want[i]}`);
          }
          expect([...got.subarray(rows * n)]).toEqual([12345, 12345, 12345]);
        }
      });
    });

    it.each(['f16', 'q8_0', 'q4_0'] as DType[])('%s packed: prompt-batch rows equal one-token results, bit for bit', (dtype) => {
      const be = backend(1);
      const rng = new Prng(71 + dtype.length);
      for (let trial = 0; trial < 30; trial++) {
        const rows = pick(rng, ROWS);
        const cols = pick(rng, dtype === 'f16' ? F16_COLS : QUANT_COLS);
        // f16: register kernels up to 4 tokens (a 4-token row-pair pass, or 2 or 3), the widened scratch
        // from 5 (token pairs, an odd last token alone); quantized: token tiles ($qtiles) with every last-tile size
        const n = pick(rng, dtype === 'f16' ? [2, 3, 4, 5, 6, 7, 8, 9, 12] : [2, 3, 4, 5, 6, 7, 9, 11, 13, 17]);
        const w = randomWeight(be, dtype, rows, cols, rng);
        be.packWeight(w);
        expectBatchEqualsSingles(be, w, randomInput(be, cols * n, rng), n, (b) => `${dtype} [${rows},${cols}] token ${b}`);
      }
    });

    // Each f16 batch size picks its kernels (register tiles at 2-4 tokens, the widened scratch from 5: token
    // pairs, an odd last token alone), and a group's subnormal terms are added for all tokens in one pass:
    // every size from 2 to 16, 1 and 2 threads, with subnormals (random bit patterns) and rows%4 / cols%8 tails.
    it('f16 packed: every batch size from 2 to 16 gives each token its 1-token bits, 1 and 2 threads', () => {
      for (const threads of [1, 2]) {
        const be = backend(threads);
        const rng = new Prng(36 + threads);
        const [rows, cols] = [71, 203];
        const w = randomWeight(be, 'f16', rows, cols, rng);
        be.packWeight(w);
        expect(packedSubnormals(w)!.length).toBeGreaterThan(0);
        for (let n = 2; n <= 16; n++) {
          expectBatchEqualsSingles(be, w, randomInput(be, cols * n, rng), n, (b) => `${threads} thread(s), ${n} tokens, token ${b}`);
        }
      }
    });

    it('q4_0 packed: extreme weights and activations (every int8 ±127) keep their 1-token bits in prompt batches', () => {
      // The relaxed tiles sum in i16 lanes starting from −8·Σx: the largest partial sums come from
      // nibbles all 0 or all 15 against activations all of one magnitude, signs alike or by column.
      const be = backend(1);
      const rows = 8;
      const cols = 64;
      const w = be.allocBytes(rows * (cols / 32) * 18);
      for (let r = 0; r < rows; r++) {
        for (let b = 0; b < cols / 32; b++) {
          const at = (r * (cols / 32) + b) * 18;
          w[at + 1] = 0x3c; // d = 1.0 (f16 0x3c00)
          // rows 0-1 nibbles 0 (−8), 2-3 15 (+7), 4-5 low 0 / high 15, 6-7 low 15 / high 0
          const lo = r < 2 ? 0 : r < 4 ? 15 : r < 6 ? 0 : 15;
          const hi = r < 2 ? 0 : r < 6 ? 15 : 0;
          for (let j = 0; j < 16; j++) w[at + 2 + j] = lo | (hi << 4);
        }
      }
      const raw = w.slice();
      const weight = { dtype: 'q4_0' as DType, rows, cols, bytes: w };
      be.packWeight(weight);
      const patterns = [() => 1, () => -1, (c: number) => (c % 4 < 2 ? 1 : -1), (c: number) => (c % 4 < 2 ? -1 : 1), (c: number) => (c < 16 ? 1 : -1)];
      const n = patterns.length;
      const x = be.allocF32(cols * n);
      patterns.forEach((f, t) => { for (let c = 0; c < cols; c++) x[t * cols + c] = f(c); });
      const batch = be.allocF32(rows * n);
      be.matmul(batch, weight, x, n);
      const single = be.allocF32(rows);
      for (let t = 0; t < n; t++) {
        be.matvec(single, weight, x.subarray(t * cols, (t + 1) * cols));
        expect([...batch.subarray(t * rows, (t + 1) * rows)], `token ${t}`).toEqual([...single]);
        // and both are the exact sums (integers: d = 1, x quantized to ±127 with d_x = 1/127)
        for (let r = 0; r < rows; r++) {
          let want = 0;
          for (let c = 0; c < cols; c++) {
            const byte = raw[(r * (cols / 32) + (c >> 5)) * 18 + 2 + (c % 16)];
            want += (((c & 31) < 16 ? byte & 15 : byte >> 4) - 8) * patterns[t](c);
          }
          expect(Math.abs(single[r] - want), `token ${t} row ${r}`).toBeLessThan(1e-3 * Math.abs(want) + 1e-6);
        }
      }
    });

    it('f16 subnormal weights come out of the packed data and back on unpacking', () => {
      const be = backend(1);
      // random f16 bit patterns: about 3% subnormal
      const w = randomWeight(be, 'f16', 12, 40, new Prng(8));
      const before = w.bytes.slice();
      packRows4(w);
      const taken = packedSubnormals(w)!;
      expect(taken.length).toBeGreaterThan(0);
      const packed = new Uint16Array(w.bytes.buffer, w.bytes.byteOffset, w.bytes.byteLength / 2);
      // none left in the 8-column chunks of the groups (the cols%8 tail keeps its own)
      for (let g = 0; g < 3; g++) {
        for (let i = 0; i < 5 * 32; i++) {
          const h = packed[g * 4 * 40 + i];
          expect((h & 0x7c00) === 0 && (h & 0x3ff) !== 0).toBe(false);
        }
      }
      unpackRows4(w);
      expect(Buffer.compare(Buffer.from(w.bytes), Buffer.from(before))).toBe(0);
    });

    it('splits a packed kernel over many row chunks (2 threads) with the same bits as 1 thread', () => {
      const one = backend(1);
      const two = backend(2);
      for (const dtype of ['f16', 'q8_0', 'q4_0'] as DType[]) {
        for (const [rows, cols, n] of [[301, 224, 1], [301, 224, 3], [1030, 96, 1]] as const) {
          const w1 = randomWeight(one, dtype, rows, cols, new Prng(rows + n));
          const w2 = randomWeight(two, dtype, rows, cols, new Prng(rows + n));
          one.packWeight(w1);
          two.packWeight(w2);
          const x1 = randomInput(one, cols * n, new Prng(9));
          const x2 = randomInput(two, cols * n, new Prng(9));
          const o1 = one.allocF32(rows * n);
          const o2 = two.allocF32(rows * n);
          one.matmul(o1, w1, x1, n);
          two.matmul(o2, w2, x2, n);
          expect([...o2], `${dtype} [${rows},${cols}] n=${n}`).toEqual([...o1]);
        }
      }
    });

    it('the reference backend refuses a packed weight; other dtypes are not packed', () => {
      const be = backend(1);
      const w = randomWeight(be, 'q8_0', 8, 64, new Prng(1));
      be.packWeight(w);
      const ref = createReferenceBackend();
      expect(() => ref.matvec(new Float32Array(8), w, new Float32Array(64))).toThrow(/packed/);
      for (const dtype of ['f32', 'bf16'] as DType[]) {
        const v = randomWeight(be, dtype, 8, 16, new Prng(2));
        be.packWeight(v);
        expect(v.packed).toBeUndefined();
      }
    });
  });
});
