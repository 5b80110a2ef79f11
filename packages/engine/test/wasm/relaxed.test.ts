/**
 * The relaxed-SIMD build of the kernels (wasm/variants.ts, kernels-relaxed.wasm) against the baseline
 * build in one process. Integer kernels are exact in both (4-bit weights are a valid i7 operand of
 * i32x4.relaxed_dot_i8x16_i7x16_add_s and no pair sum can saturate), so every dtype here must give the
 * baseline's bits: 1-token and batched products, packed and row-major weights, 1 and 2 threads.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { DType, Weight } from '../../src/kernels/backend.js';
import { type WasmBackend, createWasmBackend } from '../../src/kernels/wasm/backend.js';
import { relaxedSimdAvailable } from '../../src/kernels/wasm/module.js';
import { Prng } from '../../src/numeric/prng.js';
import { mlxDType, weightBytes } from '../../src/kernels/wasm/formats.js';
import { quantizeK } from '../../src/quant/kquants.js';
import { quantizeMlxWeight } from '../../src/quant/mlx.js';
import { pick, randomWeight } from './helpers.js';

const made: WasmBackend[] = [];
afterAll(() => made.forEach((b) => b.dispose()));
function backend(simd: 'relaxed' | 'baseline', threads: number): WasmBackend {
  const be = createWasmBackend({ simd, threads, parallelThreshold: 0, initialBytes: 8 << 20 });
  made.push(be);
  return be;
}

/** Weight bytes of `dtype` (valid quantized blocks), made once and copied into each backend. */
function weightBytesOf(dtype: DType, rows: number, cols: number, rng: Prng, scratch: WasmBackend): Uint8Array {
  if (dtype === 'q4_k' || dtype === 'q5_k' || dtype === 'q6_k') {
    const values = Float32Array.from({ length: rows * cols }, (_, i) => rng.symmetric(1) * (1 + ((i >> 5) % 4)) + (((i >> 4) % 3) - 1) * 0.3);
    return quantizeK(dtype, values, rows, cols);
  }
  const mlx = MLX4.find((l) => mlxDType(l) === dtype);
  if (mlx) {
    const values = Float32Array.from({ length: rows * cols }, (_, i) => rng.symmetric(1) * (1 + ((i >> 5) % 3)) + (((i >> 6) % 3) - 1) * 0.5);
    const bytes = new Uint8Array(weightBytes(dtype, rows, cols));
    quantizeMlxWeight(values, rows, cols, mlx, bytes);
    return bytes;
  }
  return randomWeight(scratch, dtype, rows, cols, rng).bytes.slice();
}

/** 4-bit MLX layouts (the relaxed build splits its 15-bit activations into an i8 high and a 7-bit low part). */
const MLX4 = [
  { bits: 4, groupSize: 64, scales: 'bf16' },
  { bits: 4, groupSize: 32, scales: 'f16' },
  { bits: 4, groupSize: 128, scales: 'f32' },
] as const;

function place(be: WasmBackend, dtype: DType, rows: number, cols: number, bytes: Uint8Array): Weight {
  const w: Weight = { dtype, rows, cols, bytes: be.allocBytes(bytes.length) };
  w.bytes.set(bytes);
  return w;
}

const bits = (a: Float32Array) => [...new Uint32Array(a.buffer, a.byteOffset, a.length)];

const CASES: { dtype: DType; cols: number[] }[] = [
  { dtype: 'q4_k', cols: [256, 512, 1280] },
  { dtype: 'q5_k', cols: [256, 768] },
  { dtype: 'q6_k', cols: [256, 768] },
  { dtype: 'q4_0', cols: [32, 96, 768] },
  { dtype: mlxDType(MLX4[0]), cols: [64, 192, 768] },
  { dtype: mlxDType(MLX4[1]), cols: [32, 96, 256] },
  { dtype: mlxDType(MLX4[2]), cols: [128, 384] },
  { dtype: 'q8_0', cols: [32, 96, 768] },
  { dtype: 'bf16', cols: [8, 37, 256] },
];

describe('the relaxed-SIMD build', () => {
  it('runs on this Node (the backend turns V8 relaxed SIMD on), and auto picks it', () => {
    expect(relaxedSimdAvailable()).toBe(true);
    expect(backend('relaxed', 1).simd).toBe('relaxed');
    expect(backend('baseline', 1).simd).toBe('baseline');
    const auto = createWasmBackend({ threads: 1, initialBytes: 1 << 20 });
    made.push(auto);
    expect(auto.simd).toBe('relaxed');
  });

  it('refuses an unknown simd choice by name', () => {
    expect(() => createWasmBackend({ threads: 1, simd: 'fast' as 'auto' })).toThrow(/simd must be 'auto', 'relaxed' or 'baseline', got "fast"/);
  });
});

describe.each([1, 2])('relaxed and baseline builds give the same bits, %i thread(s)', (threads) => {
  const relaxed = backend('relaxed', threads);
  const baseline = backend('baseline', threads);
  const scratch = backend('baseline', 1);
  it.each(CASES)('$dtype: decode and prompt batches, packed and row-major', ({ dtype, cols: colChoices }) => {
    const rng = new Prng(4100 + threads * 31 + dtype.charCodeAt(1) * 7 + dtype.length);
    // every row count (one 4-row group, an odd number of groups for the single-group tiles, pairs of
    // groups, row tails) meets 1-token, 1-tile and several-tile-plus-rest batches
    const ROWS = [1, 3, 4, 5, 8, 13, 33];
    const NS = [1, 2, 3, 4, 5, 9, 13];
    for (let trial = 0; trial < 14; trial++) {
      const rows = ROWS[trial % ROWS.length];
      const n = NS[(trial + Math.floor(trial / ROWS.length) * 3) % NS.length];
      const cols = pick(rng, colChoices);
      const bytes = weightBytesOf(dtype, rows, cols, rng, scratch);
      const x = Float32Array.from({ length: cols * n }, () => (rng.next() < 0.05 ? 0 : rng.symmetric(2)));
      const results = [relaxed, baseline].map((be) => {
        const w = place(be, dtype, rows, cols, bytes);
        const xb = be.allocF32(x.length);
        xb.set(x);
        const rowMajor = be.allocF32(rows * n);
        be.matmul(rowMajor, w, xb, n);
        be.packWeight(w);
        const packed = be.allocF32(rows * n);
        be.matmul(packed, w, xb, n);
        const decode = be.allocF32(rows);
        be.matvec(decode, w, xb.subarray(0, cols));
        return { rowMajor: bits(rowMajor), packed: bits(packed), decode: bits(decode), packedNow: w.packed };
      });
      const what = `${dtype} [${rows}, ${cols}] n=${n}`;
      expect(results[0].packedNow, what).toBe(results[1].packedNow);
      expect(results[0].rowMajor, `${what} row-major`).toEqual(results[1].rowMajor);
      expect(results[0].packed, `${what} packed`).toEqual(results[1].packed);
      expect(results[0].decode, `${what} packed decode`).toEqual(results[1].decode);
    }
  });
});

/** Every 4-bit MLX layout: groups of 32, 64 and 128 columns with f16, bf16 and f32 scales (kinds 0, 1, 2). */
const MLX4_ALL = ([32, 64, 128] as const).flatMap((groupSize) => (['f16', 'bf16', 'f32'] as const).map((scales) => ({ bits: 4, groupSize, scales }) as const));

/**
 * One token's activations whose 15-bit form (quant_mlx4: q = nearest(x·16383/amax) per MLX group) meets
 * the ends of every split the relaxed build may use: groups whose amax is a negative value (q = −16383)
 * or a positive one (+16383), all-zero groups (q = 0 throughout), single zeros, multiples of 128 and
 * random values.
 */
function mlxDecodeInput(cols: number, g: number, rng: Prng): Float32Array {
  const x = new Float32Array(cols);
  for (let c0 = 0; c0 < cols; c0 += g) {
    const kind = (c0 / g) % 4;
    if (kind === 3) continue; // all zero
    const amax = 0.5 + rng.next() * 4;
    for (let j = 0; j < g; j++) {
      const r = rng.next();
      // −1, 1, exact multiples of 128/16383 of amax (q a multiple of 128), zero, or anything within ±amax
      x[c0 + j] = r < 0.1 ? -amax : r < 0.2 ? amax : r < 0.3 ? (amax * 128 * Math.round(rng.symmetric(127))) / 16383 : r < 0.35 ? 0 : rng.symmetric(amax);
    }
    // the group's amax at one column with the group's sign
    x[c0 + Math.floor(rng.next() * g)] = kind === 0 ? -amax : kind === 1 ? amax : (rng.next() < 0.5 ? -1 : 1) * amax;
  }
  return x;
}

describe.each([1, 2])('packed 4-bit MLX decode: relaxed and baseline builds give the same bits, %i thread(s)', (threads) => {
  const relaxed = backend('relaxed', threads);
  const baseline = backend('baseline', threads);
  it.each(MLX4_ALL)('g$groupSize $scales scales: 4-row groups and rows%4 tails, activations at ±16383, zeros and zero groups', (layout) => {
    const dtype = mlxDType(layout);
    const rng = new Prng(900 + layout.groupSize + layout.scales.length * 13 + threads);
    for (const rows of [4, 5, 7, 13, 34]) {
      for (const cols of [layout.groupSize, 3 * layout.groupSize, 768]) {
        const values = Float32Array.from({ length: rows * cols }, () => rng.symmetric(1) + (rng.next() < 0.05 ? 3 : 0));
        const bytes = new Uint8Array(weightBytes(dtype, rows, cols));
        quantizeMlxWeight(values, rows, cols, layout, bytes);
        const x = mlxDecodeInput(cols, layout.groupSize, rng);
        const [a, b] = [relaxed, baseline].map((be) => {
          const w = place(be, dtype, rows, cols, bytes);
          be.packWeight(w);
          expect(w.packed, `${dtype} packs`).toBe('rows4');
          const xb = be.allocF32(cols);
          xb.set(x);
          const out = be.allocF32(rows);
          be.matvec(out, w, xb);
          return out;
        });
        const what = `${dtype} [${rows}, ${cols}]`;
        expect(a.every(Number.isFinite), `${what} finite`).toBe(true);
        expect(bits(a), what).toEqual(bits(b));
      }
    }
  });
});

describe.each(['f16', 'f32'] as const)('%s in the relaxed build', (dtype) => {
  it('fuses the multiply-adds (results differ from the baseline build in the last bits, not more)', () => {
    const relaxed = backend('relaxed', 1);
    const baseline = backend('baseline', 1);
    const rng = new Prng(77);
    const rows = 12;
    const cols = 4096;
    const bytes = weightBytesOf(dtype, rows, cols, rng, baseline);
    const x = Float32Array.from({ length: cols }, () => rng.symmetric(2));
    const [a, b] = [relaxed, baseline].map((be) => {
      const w = place(be, dtype, rows, cols, bytes);
      be.packWeight(w);
      const xb = be.allocF32(cols);
      xb.set(x);
      const out = be.allocF32(rows);
      be.matvec(out, w, xb);
      return out;
    });
    // the accuracy bounds of both builds are test/wasm/kernels.test.ts's and pack.test.ts's
    expect(bits(a)).not.toEqual(bits(b));
    for (let r = 0; r < rows; r++) expect(Math.abs(a[r] - b[r])).toBeLessThan(1e-3 * (1 + Math.abs(b[r])));
  });
});
