/**
 * Packed weight layout of the WASM kernels (llama.cpp's repacked CPU layouts, block_q8_0x4 /
 * block_q4_0x4, and the same idea for f16): rows in groups of 4, each group in the bytes its 4 rows
 * occupied, interleaved so a decode pass reads one sequential stream and every activation load feeds 4
 * rows (measurements in wasm/README.md).
 *
 *   f16   per 8 columns: row0 c..c+7, row1 c..c+7, row2, row3 (4 × 16 bytes); then the cols%8 tail
 *         columns of row0, row1, row2, row3.
 *   q8_0  per 32-column block: the 4 rows' f16 scales (8 bytes), then the 4 rows' 32 int8 (4 × 32).
 *   q4_0  per 32-column block: the 4 rows' f16 scales (8 bytes), then the 4 rows' 16 nibble bytes.
 *   q5_k / q6_k  per 256-column super-block: the 4 rows' blocks (176 / 210 bytes each) back to back,
 *         each as GGUF stores it (so the row-major kernels' code and widening run on them unchanged).
 *
 * The rows%4 tail rows stay row-major after the last group. Packing rewrites the buffer in place (one
 * group of scratch), so there is never a second copy of the weights. Afterwards only the WASM kernels
 * may read the bytes: `w.packed` says so, and the reference backend refuses such a weight.
 *
 * f16 subnormal weights (|w| < 2^-14) in the 8-column chunks are taken out of the packed data (set to
 * 0) and listed instead (`packedSubnormals`): the kernel widens f16 to the f32 bits of w·2^-112, which
 * is an f32 denormal for them, and x86 multiplies with a denormal operand take a microcode assist —
 * 0.9% of the ~100M bench model's 16-byte weight vectors hold one, and they cost 9% of f16 decode
 * (15.1 vs 16.5 GB/s with them flushed). The kernels add the listed terms after each row's dense sum.
 */
import type { DType, Weight } from '../backend.js';
import { type MlxLayout, Q4_0_BLOCK_BYTES, Q8_0_BLOCK_BYTES, QK, isMlx, mlxLayout, rowBytes } from './formats.js';

/** The dtypes with a packed layout (the ones the decode speed targets are about). */
export const PACKABLE: ReadonlySet<DType> = new Set<DType>(['f16', 'q8_0', 'q4_0', 'q4_k', 'q5_k', 'q6_k']);

/** Whether `dtype` has a packed layout: PACKABLE, and 4-bit MLX (any group size and scale dtype). */
export function isPackable(dtype: DType): boolean {
  return PACKABLE.has(dtype) || (isMlx(dtype) && mlxLayout(dtype).bits === 4);
}

/** Subnormal f16 weights taken out of packed groups: [row, col, f16 bits] triples, by row then column. */
const subnormals = new WeakMap<Uint8Array, Int32Array>();

/** The f16 subnormals packRows4 took out of `w` (row, col, f16 bits per entry), or undefined. */
export function packedSubnormals(w: Weight): Int32Array | undefined {
  return w.packed ? subnormals.get(w.bytes) : undefined;
}

/** Rewrites rows [0, rows − rows%4) of `w` into the packed layout, in place; marks it packed. */
export function packRows4(w: Weight): void {
  if (w.packed) throw new Error(`${w.dtype} weight [${w.rows}, ${w.cols}] is already packed`);
  if (!isPackable(w.dtype)) throw new Error(`no packed layout for ${w.dtype} weights`);
  const rb = rowBytes(w.dtype, w.cols);
  const group = new Uint8Array(4 * rb);
  const groups = Math.floor(w.rows / 4);
  const found: number[] = [];
  for (let g = 0; g < groups; g++) {
    const dst = w.bytes.subarray(g * 4 * rb, (g + 1) * 4 * rb);
    group.set(dst);
    if (w.dtype === 'q4_k') {
      q4kGroup(w.cols, group, dst, true);
      continue;
    }
    if (isMlx(w.dtype)) {
      mlx4Group(w.cols, mlxLayout(w.dtype), group, dst, true);
      continue;
    }
    interleave(w.dtype, w.cols, rb, group, dst);
    if (w.dtype === 'f16') takeSubnormals(words(dst), g, w.cols, found);
  }
  if (found.length) subnormals.set(w.bytes, Int32Array.from(found));
  w.packed = 'rows4';
}

/**
 * Zeroes the subnormal f16 weights of one packed group's 8-column chunks (not its cols%8 tail, which
 * the kernels widen through a table: no denormals there) and appends [row, col, bits] for each, in
 * row-then-column order (the order the kernels add them back in).
 */
function takeSubnormals(packed: Uint16Array, g: number, cols: number, found: number[]): void {
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

/** The inverse of packRows4 (tests, and anything that must read a packed weight's values). */
export function unpackRows4(w: Weight): void {
  if (w.packed !== 'rows4') throw new Error(`${w.dtype} weight [${w.rows}, ${w.cols}] is not packed`);
  const rb = rowBytes(w.dtype, w.cols);
  const group = new Uint8Array(4 * rb);
  const groups = Math.floor(w.rows / 4);
  for (let g = 0; g < groups; g++) {
    const src = w.bytes.subarray(g * 4 * rb, (g + 1) * 4 * rb);
    group.set(src);
    if (w.dtype === 'q4_k') q4kGroup(w.cols, src, group, false);
    else if (isMlx(w.dtype)) mlx4Group(w.cols, mlxLayout(w.dtype), src, group, false);
    else deinterleave(w.dtype, w.cols, rb, group, src);
  }
  const taken = subnormals.get(w.bytes);
  if (taken) {
    const row = words(w.bytes);
    for (let i = 0; i < taken.length; i += 3) row[taken[i] * w.cols + taken[i + 1]] = taken[i + 2];
    subnormals.delete(w.bytes);
  }
  delete w.packed;
}

/**
 * For each piece of the packed group, in packed order: [row, byte offset in the row, length]. The
 * same list drives packing and unpacking, so the two are inverse by construction.
 */
function pieces(dtype: DType, cols: number, rb: number): Array<[number, number, number]> {
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
  if (out.reduce((s, p) => s + p[2], 0) !== 4 * rb) throw new Error('packed layout does not cover the group');
  return out;
}

// The piece lists depend only on (dtype, cols): computed once per shape.
const pieceCache = new Map<string, Array<[number, number, number]>>();
function piecesOf(dtype: DType, cols: number, rb: number) {
  const key = `${dtype}:${cols}`;
  let p = pieceCache.get(key);
  if (!p) pieceCache.set(key, (p = pieces(dtype, cols, rb)));
  return p;
}

// Every piece offset and length is even (f16 elements, 2-byte scales, 34/18-byte blocks, 176/210-byte super-blocks), so the copies
// run over 16-bit words; a plain loop beats a subarray().set() per piece (millions of pieces per model).
function interleave(dtype: DType, cols: number, rb: number, rowMajor: Uint8Array, packed: Uint8Array): void {
  const src = words(rowMajor);
  const dst = words(packed);
  let o = 0;
  for (const [r, at, len] of piecesOf(dtype, cols, rb)) {
    const s = (r * rb + at) >> 1;
    for (let i = 0; i < len >> 1; i++) dst[o++] = src[s + i];
  }
}

function deinterleave(dtype: DType, cols: number, rb: number, packed: Uint8Array, rowMajor: Uint8Array): void {
  const src = words(packed);
  const dst = words(rowMajor);
  let o = 0;
  for (const [r, at, len] of piecesOf(dtype, cols, rb)) {
    const d = (r * rb + at) >> 1;
    for (let i = 0; i < len >> 1; i++) dst[d + i] = src[o++];
  }
}

function words(bytes: Uint8Array): Uint16Array {
  if (bytes.byteOffset % 2 || bytes.byteLength % 2) throw new Error('packed weights need 2-byte aligned groups');
  return new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 1);
}

/**
 * q4_k's packed layout, per super-block of 4 rows (576 bytes, the 4 rows' 4 × 144): the rows' f16 d
 * (8 bytes), f16 dmin (8), their 12 scale bytes as 3 words each, word w of row r at 16 + 16w + 4r (one
 * i32x4 load gives a word of all 4 rows), then per sub-block j and row r 16 bytes at 64 + 64j + 16r
 * whose byte l holds elements l (low nibble) and l + 16 (high) of that sub-block. Every nibble keeps
 * its bits; only their places change, so that both nibbles of a byte share one sub-block scale and
 * the kernel can use q4_0's trick (the high nibble's activations pre-combined, no mask; wasm/kquants.ts).
 * `toPacked`: row-major `rm` → `packed`; else packed → row-major.
 */
function q4kGroup(cols: number, rm: Uint8Array, packed: Uint8Array, toPacked: boolean): void {
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
        // row-major: run c = j >> 1 of 32 bytes; sub-block j is its low (even j) or high nibbles
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

/**
 * 4-bit MLX's packed layout, per group of 4 rows (the rows' 4 × row bytes, in place): per MLX group the 4
 * rows' (scale, bias) pairs, then per 32 columns of the group the 4 rows' 16 packed bytes (64 bytes). The
 * kernel then reads one sequential stream and shares each activation load between 4 rows (wasm/affine.ts,
 * $g4_mlx4). (With all the scales after all the blocks, a second stream a group's width ahead, decode of
 * 2304-column rows ran at ~60% of the 768-column speed.)
 */
function mlx4Group(cols: number, layout: MlxLayout, rm: Uint8Array, packed: Uint8Array, toPacked: boolean): void {
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
