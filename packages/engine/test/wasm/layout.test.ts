/**
 * Hand-built tensors: block layouts, f16 widening and the error paths, checked against values
 * written out by hand rather than against another implementation.
 */
import { availableParallelism } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import type { Weight } from '../../src/kernels/backend.js';
import { createWasmBackend } from '../../src/kernels/wasm/backend.js';
import { fromCpuinfo, physicalCores } from '../../src/kernels/wasm/cores.js';
import { dequantizeRow } from '../../src/kernels/wasm/quant-reference.js';

const be = createWasmBackend({ threads: 2, parallelThreshold: 0, initialBytes: 1 << 20 });
afterAll(() => be.dispose());

/** x = 0.9921875·e_j quantizes exactly (d = 2^-7, q = 127), so out = W[:, j]·0.9921875 exactly. */
function column(w: Weight, j: number): Float32Array {
  const x = be.allocF32(w.cols);
  x[j] = 0.9921875;
  const out = be.allocF32(w.rows);
  be.matvec(out, w, x);
  return out;
}

describe('block layouts (GGUF)', () => {
  it('q8_0: f16 scale then 32 int8, value q·d', () => {
    // Two rows × 64 columns; row r block b has d = 2^-(b+1) (f16 0x3800, 0x3400), q = j − 16 + r.
    const bytes = be.allocBytes(2 * 2 * 34);
    for (let r = 0; r < 2; r++) {
      for (let b = 0; b < 2; b++) {
        const o = (r * 2 + b) * 34;
        bytes[o] = 0;
        bytes[o + 1] = b === 0 ? 0x38 : 0x34;
        for (let j = 0; j < 32; j++) bytes[o + 2 + j] = (j - 16 + r) & 0xff;
      }
    }
    const w: Weight = { dtype: 'q8_0', rows: 2, cols: 64, bytes };
    for (let c = 0; c < 64; c++) {
      const out = column(w, c);
      const b = c >> 5;
      for (let r = 0; r < 2; r++) {
        const expected = ((c % 32) - 16 + r) * 2 ** -(b + 1);
        expect(out[r], `W[${r},${c}]`).toBe(expected * 0.9921875);
      }
    }
    const row = new Float32Array(64);
    dequantizeRow('q8_0', bytes, 64, 1, row);
    expect(row[0]).toBe(-15 * 0.5);
    expect(row[63]).toBe(16 * 0.25);
  });

  it('q4_0: f16 scale then 16 bytes, low nibble = element j, high nibble = element j+16, value (q−8)·d', () => {
    const bytes = be.allocBytes(18);
    bytes[0] = 0;
    bytes[1] = 0x3c; // d = 1.0
    for (let j = 0; j < 16; j++) bytes[2 + j] = j | ((15 - j) << 4);
    const w: Weight = { dtype: 'q4_0', rows: 1, cols: 32, bytes };
    const row = new Float32Array(32);
    dequantizeRow('q4_0', bytes, 32, 0, row);
    for (let c = 0; c < 32; c++) {
      const expected = c < 16 ? c - 8 : 15 - (c - 16) - 8;
      expect(row[c], `dequantized element ${c}`).toBe(expected);
      expect(column(w, c)[0], `kernel element ${c}`).toBe(expected * 0.9921875);
    }
  });

  it('f16: normals, subnormals, signed zero and the largest finite value widen exactly', () => {
    const cases: Array<[number, number]> = [
      [0x3c00, 1],
      [0xc000, -2],
      [0x0001, 2 ** -24],
      [0x83ff, -1023 * 2 ** -24],
      [0x0400, 2 ** -14],
      [0x7bff, 65504],
      [0x8000, -0],
      [0x3555, 0.333251953125],
      [0xfbff, -65504],
    ];
    // 9 columns: one full group of 8 (SIMD path) and a tail element (table path).
    const cols = cases.length;
    const bytes = be.allocBytes(cols * 2);
    const bits = new Uint16Array(bytes.buffer, bytes.byteOffset, cols);
    cases.forEach(([h], i) => (bits[i] = h));
    const w: Weight = { dtype: 'f16', rows: 1, cols, bytes };
    for (let c = 0; c < cols; c++) {
      const x = be.allocF32(cols);
      x[c] = 1;
      const out = be.allocF32(1);
      be.matvec(out, w, x);
      expect(out[0] === cases[c][1] || (out[0] === 0 && cases[c][1] === 0), `f16 0x${cases[c][0].toString(16)}`).toBe(true);
    }
  });
});

describe('errors', () => {
  it('names a buffer that does not live in the backend memory', () => {
    const w: Weight = { dtype: 'f32', rows: 2, cols: 2, bytes: new Uint8Array(16) };
    expect(() => be.matvec(be.allocF32(2), w, be.allocF32(2))).toThrow(/f32 weight \[2, 2\] was not allocated by this backend/);
    const w2: Weight = { dtype: 'f32', rows: 2, cols: 2, bytes: be.allocBytes(16) };
    expect(() => be.matvec(new Float32Array(2), w2, be.allocF32(2))).toThrow(/output buffer was not allocated/);
  });

  it('rejects short buffers and partial blocks', () => {
    const w: Weight = { dtype: 'f16', rows: 4, cols: 8, bytes: be.allocBytes(63) };
    expect(() => be.matvec(be.allocF32(4), w, be.allocF32(8))).toThrow(/needs 64 bytes, has 63/);
    const q: Weight = { dtype: 'q4_0', rows: 1, cols: 48, bytes: be.allocBytes(64) };
    expect(() => be.matvec(be.allocF32(1), q, be.allocF32(48))).toThrow(/multiple of 32/);
    const f: Weight = { dtype: 'f32', rows: 2, cols: 3, bytes: be.allocBytes(24) };
    expect(() => be.matmul(be.allocF32(6), f, be.allocF32(5), 2)).toThrow(/input has 5 values/);
    expect(() => be.matmul(be.allocF32(3), f, be.allocF32(6), 2)).toThrow(/output has 3 values/);
  });

  it('refuses allocations past the 4 GiB wasm32 limit with a clear message', () => {
    expect(() => be.allocBytes(4 * 2 ** 30)).toThrow(/would exceed the 4 GiB wasm32 memory limit/);
    // The failed request did not consume anything: small allocations still work.
    expect(be.allocF32(4).length).toBe(4);
  });

  it('reuses released buffers (zeroed) and refuses partial or double releases', () => {
    const a = be.allocF32(1000);
    a.fill(3);
    const used = be.usedBytes();
    be.release(a);
    expect(be.usedBytes()).toBe(used - 4032);
    const b = be.allocF32(1000);
    expect(b.byteOffset).toBe(a.byteOffset);
    expect(b.every((v) => v === 0)).toBe(true);
    expect(() => be.release(b.subarray(1))).toThrow(/not a whole live allocation/);
    be.release(b);
    expect(() => be.release(b)).toThrow(/not a whole live allocation/);
    expect(() => be.release(new Float32Array(4))).toThrow(/not allocated by this backend/);
  });

  it('rejects a bad thread count', () => {
    expect(() => createWasmBackend({ threads: 0 })).toThrow(/threads must be an integer/);
  });
});

describe('thread count default', () => {
  it('counts physical cores, not SMT siblings', () => {
    const block = (p: number, c: number) => `processor\t: x\nphysical id\t: ${p}\ncore id\t\t: ${c}\n`;
    const smt = [block(0, 0), block(0, 1), block(0, 0), block(0, 1)].join('\n');
    expect(fromCpuinfo(smt)).toBe(Math.min(2, availableParallelism()));
    expect(fromCpuinfo('processor : 0\n')).toBeUndefined();
    expect(physicalCores()).toBeGreaterThanOrEqual(1);
  });
});
