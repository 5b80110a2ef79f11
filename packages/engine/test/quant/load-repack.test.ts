/**
 * The load path's repacking and conversion (packRows4 / unpackRows4 for every packable dtype, MLX's
 * scale/bias interleave, pack-quantized INT4's MLX rows, FP8's factor rows and NaN marking) give the
 * same bytes as the previous byte-loop implementations, kept below as `previous*`, on random inputs
 * with odd shapes and both aligned and unaligned buffers (the word-at-a-time paths and their fallbacks).
 */
import { describe, expect, it } from 'vitest';
import type { DType, Weight } from '../../src/kernels/backend.js';
import { type MlxLayout, Q4_0_BLOCK_BYTES, Q8_0_BLOCK_BYTES, QK, isMlx, mlxDType, mlxLayout, rowBytes, FP8_BLOCK } from '../../src/kernels/wasm/formats.js';
import { packRows4, packedSubnormals, unpackRows4 } from '../../src/kernels/wasm/pack.js';
import { interleaveRows, packMlx } from '../../src/quant/mlx.js';
import { placeRows } from '../../src/quant/int4-packed.js';
import { markNanBlocks, placeFp8Rows } from '../../src/quant/fp8.js';
import { hfBlocksToGguf } from '../../src/quant/mxfp4.js';
import { BF16_TO_F32, F16_TO_F32, f32ToBf16Bits, f32ToF16Bits } from '../../src/numeric/half.js';
import { Prng } from '../../src/numeric/prng.js';

// ---------------------------------------------------------------------------------------------
// Previous implementations (main before the load-speed change), copied verbatim but for names and
// for working on plain byte arrays instead of Weight objects.

function previousPackRows4(dtype: DType, rows: number, cols: number, bytes: Uint8Array): number[] {
  const rb = rowBytes(dtype, cols);
  const group = new Uint8Array(4 * rb);
  const groups = Math.floor(rows / 4);
  const found: number[] = [];
  for (let g = 0; g < groups; g++) {
    const dst = bytes.subarray(g * 4 * rb, (g + 1) * 4 * rb);
    group.set(dst);
    if (dtype === 'q4_k') {
      previousQ4kGroup(cols, group, dst, true);
      continue;
    }
    if (isMlx(dtype)) {
      previousMlx4Group(cols, mlxLayout(dtype), group, dst, true);
      continue;
    }
    previousInterleave(dtype, cols, rb, group, dst);
    if (dtype === 'f16') previousTakeSubnormals(previousWords(dst), g, cols, found);
  }
  return found;
}

function previousTakeSubnormals(packed: Uint16Array, g: number, cols: number, found: number[]): void {
  const chunks = cols >> 3;
  for (let r = 0; r < 4; r++) {
    for (let k = 0; k < chunks; k++) {
      const base = k * 32 + r * 8;
      for (let j = 0; j < 8; j++) {
        const h = packed[base + j];
        if ((h & 0x7c00) === 0 && (h & 0x03ff) !== 0) {
          found.push(g * 4 + r, k * 8 + j, h);
          packed[base + j] = 0;
        }
      }
    }
  }
}

function previousPieces(dtype: DType, cols: number, rb: number): Array<[number, number, number]> {
  const out: Array<[number, number, number]> = [];
  if (dtype === 'f16') {
    const full = cols & ~7;
    for (let c = 0; c < full; c += 8) for (let r = 0; r < 4; r++) out.push([r, c * 2, 16]);
    if (cols > full) for (let r = 0; r < 4; r++) out.push([r, full * 2, (cols - full) * 2]);
    return out;
  }
  if (dtype === 'q5_k' || dtype === 'q6_k') {
    const bb = dtype === 'q5_k' ? 176 : 210;
    for (let sb = 0; sb < cols / 256; sb++) for (let r = 0; r < 4; r++) out.push([r, sb * bb, bb]);
    return out;
  }
  const block = dtype === 'q8_0' ? Q8_0_BLOCK_BYTES : Q4_0_BLOCK_BYTES;
  for (let b = 0; b < cols / QK; b++) {
    for (let r = 0; r < 4; r++) out.push([r, b * block, 2]);
    for (let r = 0; r < 4; r++) out.push([r, b * block + 2, block - 2]);
  }
  return out;
}

function previousInterleave(dtype: DType, cols: number, rb: number, rowMajor: Uint8Array, packed: Uint8Array): void {
  const src = previousWords(rowMajor);
  const dst = previousWords(packed);
  let o = 0;
  for (const [r, at, len] of previousPieces(dtype, cols, rb)) {
    const s = (r * rb + at) >> 1;
    for (let i = 0; i < len >> 1; i++) dst[o++] = src[s + i];
  }
}

function previousWords(bytes: Uint8Array): Uint16Array {
  return new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 1);
}

function previousQ4kGroup(cols: number, rm: Uint8Array, packed: Uint8Array, toPacked: boolean): void {
  const nsb = cols / 256;
  for (let sb = 0; sb < nsb; sb++) {
    const po = sb * 576;
    for (let r = 0; r < 4; r++) {
      const ro = (r * nsb + sb) * 144;
      const pairs: Array<[number, number]> = [
        [ro, po + 2 * r],
        [ro + 1, po + 2 * r + 1],
        [ro + 2, po + 8 + 2 * r],
        [ro + 3, po + 9 + 2 * r],
      ];
      for (let k = 0; k < 12; k++) pairs.push([ro + 4 + k, po + 16 + 16 * (k >> 2) + 4 * r + (k & 3)]);
      for (const [a, b] of pairs) {
        if (toPacked) packed[b] = rm[a];
        else rm[a] = packed[b];
      }
      for (let j = 0; j < 8; j++) {
        const run = ro + 16 + 32 * (j >> 1);
        const shift = (j & 1) * 4;
        const dst = po + 64 + 64 * j + 16 * r;
        for (let l = 0; l < 16; l++) {
          if (toPacked) packed[dst + l] = ((rm[run + l] >> shift) & 15) | (((rm[run + l + 16] >> shift) & 15) << 4);
          else {
            const b = packed[dst + l];
            rm[run + l] = (rm[run + l] & (0xf0 >> shift)) | ((b & 15) << shift);
            rm[run + l + 16] = (rm[run + l + 16] & (0xf0 >> shift)) | ((b >> 4) << shift);
          }
        }
      }
    }
  }
}

function previousMlx4Group(cols: number, layout: MlxLayout, rm: Uint8Array, packed: Uint8Array, toPacked: boolean): void {
  const qBytes = cols / 2;
  const pair = layout.scales === 'f32' ? 8 : 4;
  const groups = cols / layout.groupSize;
  const blocks = layout.groupSize / 32;
  const rb = qBytes + groups * pair;
  const move = (from: number, to: number, len: number) => {
    if (toPacked) packed.set(rm.subarray(from, from + len), to);
    else rm.set(packed.subarray(to, to + len), from);
  };
  for (let k = 0; k < groups; k++) {
    const at = k * (4 * pair + 64 * blocks);
    for (let r = 0; r < 4; r++) {
      move(r * rb + qBytes + k * pair, at + r * pair, pair);
      for (let b = 0; b < blocks; b++) move(r * rb + 16 * (k * blocks + b), at + 4 * pair + 64 * b + 16 * r, 16);
    }
  }
}

function previousInterleaveRows(src: Uint8Array, n: number, qBytes: number, groups: number, el: number, dst: Uint8Array): void {
  const rb = qBytes + 2 * groups * el;
  const sOff = n * qBytes;
  const bOff = sOff + n * groups * el;
  for (let i = 0; i < n; i++) {
    dst.set(src.subarray(i * qBytes, (i + 1) * qBytes), i * rb);
    for (let k = 0; k < groups; k++) {
      const o = i * rb + qBytes + 2 * k * el;
      const s = sOff + (i * groups + k) * el;
      const b = bOff + (i * groups + k) * el;
      for (let e = 0; e < el; e++) {
        dst[o + e] = src[s + e];
        dst[o + el + e] = src[b + e];
      }
    }
  }
}

function previousPlaceRows(src: Uint8Array, n: number, qBytes: number, groups: number, scales: MlxLayout['scales'], dst: Uint8Array): void {
  const el = scales === 'f32' ? 4 : 2;
  const rb = qBytes + 2 * groups * el;
  const sOff = n * qBytes;
  const sv = new DataView(src.buffer, src.byteOffset, src.byteLength);
  const dv = new DataView(dst.buffer, dst.byteOffset, dst.byteLength);
  const toBits = scales === 'f16' ? f32ToF16Bits : f32ToBf16Bits;
  const table = scales === 'f16' ? F16_TO_F32 : BF16_TO_F32;
  for (let i = 0; i < n; i++) {
    dst.set(src.subarray(i * qBytes, (i + 1) * qBytes), i * rb);
    for (let k = 0; k < groups; k++) {
      const o = i * rb + qBytes + 2 * k * el;
      const s = sOff + (i * groups + k) * el;
      if (el === 4) {
        const v = sv.getFloat32(s, true);
        dv.setFloat32(o, v, true);
        dv.setFloat32(o + 4, -8 * v, true);
      } else {
        const h = sv.getUint16(s, true);
        dv.setUint16(o, h, true);
        dv.setUint16(o + 2, toBits(-8 * table[h]), true);
      }
    }
  }
}

/** planFp8Matrix's previous `place` closure, its captured values as parameters. */
function previousPlaceFp8(src: Uint8Array, n: number, cols: number, firstRow: number, b0: number, sDtype: string, out: Uint8Array): void {
  const nb = Math.ceil(cols / FP8_BLOCK);
  const rb = nb * 4 + cols;
  const sEl = sDtype === 'F32' ? 4 : 2;
  const sOff = n * cols;
  const sLen = src.byteLength - sOff;
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  const sView = new DataView(src.buffer, src.byteOffset + sOff, sLen);
  for (let i = 0; i < n; i++) {
    const sRow = Math.floor((firstRow + i) / FP8_BLOCK) - b0;
    for (let b = 0; b < nb; b++) {
      const at = (sRow * nb + b) * sEl;
      const s = sEl === 4 ? sView.getFloat32(at, true) : (sDtype === 'BF16' ? BF16_TO_F32 : F16_TO_F32)[sView.getUint16(at, true)];
      view.setFloat32(i * rb + b * 4, s, true);
    }
    out.set(src.subarray(i * cols, (i + 1) * cols), i * rb + nb * 4);
  }
  markNanBlocks(out, cols);
}

function previousHfBlocksToGguf(blocks: Uint8Array, scales: Uint8Array, n: number, dst: Uint8Array): void {
  for (let b = 0; b < n; b++) {
    const o = b * 17;
    dst[o] = scales[b];
    for (let j = 0; j < 16; j++) {
      const lo = (blocks[16 * b + (j >> 1)] >> (4 * (j & 1))) & 15;
      const hi = (blocks[16 * b + 8 + (j >> 1)] >> (4 * (j & 1))) & 15;
      dst[o + 1 + j] = lo | (hi << 4);
    }
  }
}

// ---------------------------------------------------------------------------------------------

const rng = new Prng(0x10ad);
const int = (n: number) => Math.floor(rng.next() * n);
const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)];

/**
 * `len` random bytes at byte offset `shift` of a fresh buffer (0: 4-byte aligned; 2: only 2-byte
 * aligned, the fallback paths). 16-bit words are biased toward the f16 edge cases: subnormals, ±0,
 * Inf and NaN patterns.
 */
function randomBytes(len: number, shift: number, special = false): Uint8Array {
  const b = new Uint8Array(new ArrayBuffer(len + shift + 8), shift, len);
  for (let i = 0; i < len; i++) b[i] = int(256);
  if (special) {
    const h = new Uint16Array(len >> 1);
    h.set(new Uint16Array(b.slice(0, h.length * 2).buffer));
    for (let i = 0; i < h.length; i++) {
      const roll = rng.next();
      if (roll < 0.05) h[i] = (h[i] & 0x83ff) | 0; // subnormal (or ±0)
      else if (roll < 0.07) h[i] &= 0x8000; // ±0
      else if (roll < 0.09) h[i] = (h[i] & 0x83ff) | 0x7c00; // Inf / NaN
      else if (roll < 0.1) h[i] = h[i] & 0x8001; // the smallest subnormal or ±0
    }
    b.set(new Uint8Array(h.buffer));
  }
  return b;
}

const ROWS = [1, 3, 4, 5, 7, 8, 9, 12, 13, 17];
const MLX_LAYOUTS: MlxLayout[] = [];
for (const groupSize of [32, 64, 128] as const) for (const scales of ['f16', 'bf16', 'f32'] as const) MLX_LAYOUTS.push({ bits: 4, groupSize, scales });

/** Columns and a buffer shift each dtype allows (packed groups must be 2-byte aligned). */
function shapes(dtype: DType): number[] {
  if (dtype === 'f16') return [1, 2, 3, 7, 8, 9, 15, 16, 17, 24, 33, 62, 64, 100, 257, 768];
  if (dtype === 'q8_0' || dtype === 'q4_0') return [32, 64, 96, 160, 288, 768];
  if (dtype === 'q4_k' || dtype === 'q5_k' || dtype === 'q6_k') return [256, 512, 768];
  const g = mlxLayout(dtype as ReturnType<typeof mlxDType>).groupSize;
  return [g, 2 * g, 3 * g, 768].filter((c) => c % g === 0);
}

const PACKED: DType[] = ['f16', 'q8_0', 'q4_0', 'q4_k', 'q5_k', 'q6_k', ...MLX_LAYOUTS.map(mlxDType)];

describe('load-path repacking is byte-identical to the previous implementation', () => {
  it.each(PACKED)('packRows4 / unpackRows4, %s', (dtype) => {
    for (let trial = 0; trial < 40; trial++) {
      const rows = pick(ROWS);
      const cols = pick(shapes(dtype));
      const shift = trial % 2 === 0 ? 0 : 2;
      const len = rows * rowBytes(dtype, cols);
      const original = randomBytes(len, shift, dtype === 'f16');
      const want = original.slice();
      const wantFound = previousPackRows4(dtype, rows, cols, want);
      const w: Weight = { dtype, rows, cols, bytes: randomBytes(len, shift) };
      w.bytes.set(original);
      packRows4(w);
      const where = `${dtype} [${rows}, ${cols}] at byte offset ${shift}`;
      expect(Buffer.from(w.bytes).equals(Buffer.from(want)), where).toBe(true);
      expect([...(packedSubnormals(w) ?? [])], where).toEqual(wantFound);
      unpackRows4(w);
      expect(Buffer.from(w.bytes).equals(Buffer.from(original)), `${where}: unpack`).toBe(true);
    }
  });

  it('f16 packing takes out every subnormal pattern, whatever its neighbours', () => {
    // All words subnormal, or exactly one subnormal half among normal ones, at every position.
    const cols = 24;
    for (let pos = 0; pos < 4 * cols; pos++) {
      const bytes = new Uint8Array(4 * cols * 2);
      const h = new Uint16Array(bytes.buffer);
      h.fill(0x3c00);
      h[pos] = 0x8001 + pos;
      const want = bytes.slice();
      const wantFound = previousPackRows4('f16', 4, cols, want);
      const w: Weight = { dtype: 'f16', rows: 4, cols, bytes };
      packRows4(w);
      expect(Buffer.from(w.bytes).equals(Buffer.from(want))).toBe(true);
      expect([...(packedSubnormals(w) ?? [])]).toEqual(wantFound);
      expect(wantFound.length).toBe(3);
    }
  });

  it.each(MLX_LAYOUTS.map((l) => [mlxDType(l), l] as const))('MLX scale/bias interleave and packMlx, %s, bits 2-8', (_name, layout) => {
    for (let trial = 0; trial < 30; trial++) {
      const bits = pick([2, 3, 4, 6, 8] as const);
      const n = pick(ROWS);
      const cols = pick([1, 2, 3, 6]) * layout.groupSize;
      const el = layout.scales === 'f32' ? 4 : 2;
      const qBytes = (cols * bits) / 8;
      const groups = cols / layout.groupSize;
      const rb = qBytes + 2 * groups * el;
      const shift = pick([0, 1, 2, 3]);
      const src = randomBytes(n * (qBytes + 2 * groups * el), shift);
      const want = new Uint8Array(n * rb);
      previousInterleaveRows(src, n, qBytes, groups, el, want);
      const got = randomBytes(n * rb, pick([0, 1, 2]));
      interleaveRows(src, n, qBytes, groups, el, got);
      expect(Buffer.from(got).equals(Buffer.from(want)), `bits ${bits} [${n}, ${cols}] src shift ${shift}`).toBe(true);
      // packMlx: the tests' entry to the same interleave
      const viaPack = new Uint8Array(n * rb);
      const words = src.subarray(0, n * qBytes);
      packMlx(words, src.subarray(n * qBytes, n * (qBytes + groups * el)), src.subarray(n * (qBytes + groups * el)), n, cols, { ...layout, bits }, viaPack);
      expect(Buffer.from(viaPack).equals(Buffer.from(want))).toBe(true);
    }
  });

  it.each(['f16', 'bf16', 'f32'] as const)('pack-quantized INT4 rows, %s scales (every 16-bit scale pattern included)', (scales) => {
    for (let trial = 0; trial < 30; trial++) {
      const n = pick(ROWS);
      const g = pick([32, 64, 128]);
      const cols = pick([1, 2, 3, 6]) * g;
      const el = scales === 'f32' ? 4 : 2;
      const qBytes = cols / 2;
      const groups = cols / g;
      const rb = qBytes + 2 * groups * el;
      const shift = pick([0, 1, 2]);
      const src = randomBytes(n * (qBytes + groups * el), shift, el === 2);
      const want = new Uint8Array(n * rb);
      previousPlaceRows(src, n, qBytes, groups, scales, want);
      const got = randomBytes(n * rb, pick([0, 1, 2]));
      placeRows(src, n, qBytes, groups, scales, got);
      expect(Buffer.from(got).equals(Buffer.from(want)), `[${n}, ${cols}] groups of ${g}, shift ${shift}`).toBe(true);
    }
    if (scales === 'f32') return;
    // every 16-bit scale once: the −8·s table against the per-group conversion
    const all = new Uint8Array(65536 * 2 + 16 * 4096);
    new Uint16Array(all.buffer, 16 * 4096, 65536).forEach((_, i, a) => (a[i] = i));
    const want = new Uint8Array(4096 * (16 + 16 * 4));
    previousPlaceRows(all, 4096, 16, 16, scales, want);
    const got = new Uint8Array(want.length);
    placeRows(all, 4096, 16, 16, scales, got);
    expect(Buffer.from(got).equals(Buffer.from(want))).toBe(true);
  });

  it.each(['F32', 'BF16', 'F16'])('FP8 factor rows and NaN blocks, %s factors', (sDtype) => {
    for (let trial = 0; trial < 30; trial++) {
      const cols = pick([1, 100, 127, 128, 129, 256, 300, 768]);
      const n = pick([1, 5, 127, 128, 129, 300]);
      const firstRow = pick([0, 128, 256]) + (n === 300 ? 0 : pick([0, 3]));
      const b0 = Math.floor(firstRow / FP8_BLOCK);
      const b1 = Math.floor((firstRow + n - 1) / FP8_BLOCK) + 1;
      const nb = Math.ceil(cols / FP8_BLOCK);
      const sEl = sDtype === 'F32' ? 4 : 2;
      const src = randomBytes(n * cols + (b1 - b0) * nb * sEl, 0);
      // NaN codes are random bytes 0x7f/0xff already (~1 in 128); make some blocks clean of them
      if (trial % 3 === 0) for (let i = 0; i < n * cols; i++) if ((src[i] & 0x7f) === 0x7f) src[i] = 0x12;
      // factors: finite values (and a NaN factor now and then)
      const f = new DataView(src.buffer, src.byteOffset + n * cols);
      for (let i = 0; i < (b1 - b0) * nb; i++) {
        const v = i % 11 === 5 ? NaN : (rng.next() + 0.01) * 2 ** (int(20) - 10);
        if (sEl === 4) f.setFloat32(i * 4, v, true);
        else f.setUint16(i * 2, sDtype === 'BF16' ? f32ToBf16Bits(v) : f32ToF16Bits(v), true);
      }
      const rb = nb * 4 + cols;
      const want = new Uint8Array(n * rb);
      previousPlaceFp8(src, n, cols, firstRow, b0, sDtype, want);
      const got = randomBytes(n * rb, pick([0, 1, 2]));
      placeFp8Rows(src, n, cols, firstRow, b0, sDtype, got);
      expect(Buffer.from(got).equals(Buffer.from(want)), `${sDtype} ${n} rows from ${firstRow} × ${cols}`).toBe(true);
    }
  });

  it('MXFP4 Hugging Face blocks to GGUF order', () => {
    for (let trial = 0; trial < 20; trial++) {
      const n = pick([1, 2, 3, 17, 100, 1000]);
      const blocks = randomBytes(16 * n, pick([0, 1, 2, 4]));
      const scales = randomBytes(n, pick([0, 1]));
      const want = new Uint8Array(17 * n);
      previousHfBlocksToGguf(blocks, scales, n, want);
      const got = randomBytes(17 * n, pick([0, 1]));
      hfBlocksToGguf(blocks, scales, n, got);
      expect(Buffer.from(got).equals(Buffer.from(want)), `${n} blocks at byte offset ${blocks.byteOffset}`).toBe(true);
    }
  });
});
