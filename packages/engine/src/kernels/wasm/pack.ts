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
  // Two halves per 32-bit word: a word whose halves both have a nonzero exponent (nearly every word
  // of real weights) holds no subnormal, so most of the group is skipped a word, not a half, at a time.
  const pairs = packed.byteOffset % 4 === 0 ? new Uint32Array(packed.buffer, packed.byteOffset, chunks * 16) : null;
  for (let r = 0; r < 4; r++) {
    for (let k = 0; k < chunks; k++) {
      const base = k * 32 + r * 8;
      if (pairs) {
        const w = base >> 1;
        if ((pairs[w] & 0x7c00) && (pairs[w] & 0x7c000000) && (pairs[w + 1] & 0x7c00) && (pairs[w + 1] & 0x7c000000) && (pairs[w + 2] & 0x7c00) && (pairs[w + 2] & 0x7c000000) && (pairs[w + 3] & 0x7c00) && (pairs[w + 3] & 0x7c000000)) continue;
      }
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

/**
 * The piece list of (dtype, cols) as a flat table in units of `unit` bytes (2, or 4 where every
 * offset and length is a multiple of 4: f16 rows of even width, q5_k): per piece its start in the
 * row-major group and its length. Computed once per shape; the copies then run over 16- or 32-bit
 * words without a per-piece allocation or destructuring (millions of pieces per model).
 */
interface PieceTable {
  unit: 2 | 4;
  table: Int32Array;
}
const pieceCache = new Map<string, PieceTable>();
function piecesOf(dtype: DType, cols: number, rb: number): PieceTable {
  const key = `${dtype}:${cols}`;
  let p = pieceCache.get(key);
  if (!p) {
    const list = pieces(dtype, cols, rb);
    const unit = list.every(([r, at, len]) => (r * rb + at) % 4 === 0 && len % 4 === 0) ? 4 : 2;
    const table = new Int32Array(2 * list.length);
    list.forEach(([r, at, len], i) => {
      table[2 * i] = (r * rb + at) / unit;
      table[2 * i + 1] = len / unit;
    });
    pieceCache.set(key, (p = { unit, table }));
  }
  return p;
}

// Every piece offset and length is even (f16 elements, 2-byte scales, 34/18-byte blocks, 176/210-byte
// super-blocks), so the copies run over 16-bit words, or 32-bit ones where the table allows and both
// buffers are 4-byte aligned; one loop per element type, so each stays monomorphic.
function interleave(dtype: DType, cols: number, rb: number, rowMajor: Uint8Array, packed: Uint8Array): void {
  // The common shapes get a loop of their own (a piece of 1 to 16 words per table entry costs more
  // in table walking than in copying); the table covers the rest. Same order as `pieces`.
  if (dtype === 'f16' && cols % 2 === 0 && rowMajor.byteOffset % 4 === 0 && packed.byteOffset % 4 === 0) {
    interleaveF16(words32(rowMajor), words32(packed), cols);
    return;
  }
  if (dtype === 'q8_0' || dtype === 'q4_0') {
    interleaveQ(words(rowMajor), words(packed), cols / QK, (dtype === 'q8_0' ? Q8_0_BLOCK_BYTES : Q4_0_BLOCK_BYTES) >> 1, rb >> 1);
    return;
  }
  const { unit, table } = piecesOf(dtype, cols, rb);
  if (unit === 4 && rowMajor.byteOffset % 4 === 0 && packed.byteOffset % 4 === 0) gather32(table, words32(rowMajor), words32(packed));
  else gather16(table, unit / 2, words(rowMajor), words(packed));
}

function deinterleave(dtype: DType, cols: number, rb: number, packed: Uint8Array, rowMajor: Uint8Array): void {
  const { unit, table } = piecesOf(dtype, cols, rb);
  if (unit === 4 && rowMajor.byteOffset % 4 === 0 && packed.byteOffset % 4 === 0) scatter32(table, words32(packed), words32(rowMajor));
  else scatter16(table, unit / 2, words(packed), words(rowMajor));
}

/** f16 (even `cols`, 32-bit words): per 8 columns the 4 rows' 4 words, then the 4 rows' tails. */
function interleaveF16(src: Uint32Array, dst: Uint32Array, cols: number): void {
  const rw = cols >> 1;
  const full = cols >> 3;
  let o = 0;
  for (let k = 0; k < full; k++) {
    for (let r = 0; r < 4; r++) {
      const s = r * rw + 4 * k;
      dst[o] = src[s];
      dst[o + 1] = src[s + 1];
      dst[o + 2] = src[s + 2];
      dst[o + 3] = src[s + 3];
      o += 4;
    }
  }
  for (let r = 0; r < 4; r++) for (let s = r * rw + 4 * full; s < (r + 1) * rw; s++) dst[o++] = src[s];
}

/** q8_0 / q4_0 (16-bit words, `bw` per block, `rw` per row): per block the 4 rows' scales, then their quants. */
function interleaveQ(src: Uint16Array, dst: Uint16Array, blocks: number, bw: number, rw: number): void {
  let o = 0;
  for (let b = 0; b < blocks; b++) {
    const at = b * bw;
    dst[o] = src[at];
    dst[o + 1] = src[rw + at];
    dst[o + 2] = src[2 * rw + at];
    dst[o + 3] = src[3 * rw + at];
    o += 4;
    for (let r = 0; r < 4; r++) {
      const end = r * rw + at + bw;
      for (let s = r * rw + at + 1; s < end; s++) dst[o++] = src[s];
    }
  }
}

/** The pieces of `table` (in units of `scale` words) from `src`, one after another into `dst`. */
function gather16(table: Int32Array, scale: number, src: Uint16Array, dst: Uint16Array): void {
  let o = 0;
  for (let p = 0; p < table.length; p += 2) {
    let s = table[p] * scale;
    const end = s + table[p + 1] * scale;
    while (s < end) dst[o++] = src[s++];
  }
}

function gather32(table: Int32Array, src: Uint32Array, dst: Uint32Array): void {
  let o = 0;
  for (let p = 0; p < table.length; p += 2) {
    let s = table[p];
    const end = s + table[p + 1];
    while (s < end) dst[o++] = src[s++];
  }
}

/** The inverse of gather16: consecutive words of `src` back to the pieces' places in `dst`. */
function scatter16(table: Int32Array, scale: number, src: Uint16Array, dst: Uint16Array): void {
  let o = 0;
  for (let p = 0; p < table.length; p += 2) {
    let d = table[p] * scale;
    const end = d + table[p + 1] * scale;
    while (d < end) dst[d++] = src[o++];
  }
}

function scatter32(table: Int32Array, src: Uint32Array, dst: Uint32Array): void {
  let o = 0;
  for (let p = 0; p < table.length; p += 2) {
    let d = table[p];
    const end = d + table[p + 1];
    while (d < end) dst[d++] = src[o++];
  }
}

function words32(bytes: Uint8Array): Uint32Array {
  return new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 2);
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
  // Every offset below is a multiple of 4 (144-byte blocks, 576-byte packed super-blocks), so the
  // nibble moves run 4 bytes at a time on 32-bit words where both buffers are 4-byte aligned.
  const wide = rm.byteOffset % 4 === 0 && packed.byteOffset % 4 === 0;
  const rm32 = wide ? new Uint32Array(rm.buffer, rm.byteOffset, rm.byteLength >> 2) : null;
  const p32 = wide ? new Uint32Array(packed.buffer, packed.byteOffset, packed.byteLength >> 2) : null;
  for (let sb = 0; sb < nsb; sb++) {
    const po = sb * 576;
    for (let r = 0; r < 4; r++) {
      const ro = (r * nsb + sb) * 144;
      // d and dmin (2 bytes each), then the 12 scale bytes as 3 words
      if (toPacked) {
        packed[po + 2 * r] = rm[ro];
        packed[po + 2 * r + 1] = rm[ro + 1];
        packed[po + 8 + 2 * r] = rm[ro + 2];
        packed[po + 9 + 2 * r] = rm[ro + 3];
        for (let k = 0; k < 12; k++) packed[po + 16 + 16 * (k >> 2) + 4 * r + (k & 3)] = rm[ro + 4 + k];
      } else {
        rm[ro] = packed[po + 2 * r];
        rm[ro + 1] = packed[po + 2 * r + 1];
        rm[ro + 2] = packed[po + 8 + 2 * r];
        rm[ro + 3] = packed[po + 9 + 2 * r];
        for (let k = 0; k < 12; k++) rm[ro + 4 + k] = packed[po + 16 + 16 * (k >> 2) + 4 * r + (k & 3)];
      }
      for (let j = 0; j < 8; j++) {
        // row-major: run c = j >> 1 of 32 bytes; sub-block j is its low (even j) or high nibbles
        const run = ro + 16 + 32 * (j >> 1);
        const shift = (j & 1) * 4;
        const dst = po + 64 + 64 * j + 16 * r;
        if (rm32 && p32) {
          const a = run >> 2;
          const d = dst >> 2;
          if (toPacked) {
            for (let l = 0; l < 4; l++) p32[d + l] = ((rm32[a + l] >>> shift) & 0x0f0f0f0f) | (((rm32[a + l + 4] >>> shift) & 0x0f0f0f0f) << 4);
          } else {
            const keep = shift ? 0x0f0f0f0f : 0xf0f0f0f0;
            for (let l = 0; l < 4; l++) {
              const b = p32[d + l];
              rm32[a + l] = (rm32[a + l] & keep) | ((b & 0x0f0f0f0f) << shift);
              rm32[a + l + 4] = (rm32[a + l + 4] & keep) | (((b >>> 4) & 0x0f0f0f0f) << shift);
            }
          }
          continue;
        }
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
  // Every offset and length is a multiple of 4 (16-byte blocks, 4- or 8-byte pairs, rows of whole
  // 32-column blocks plus pairs), so with both buffers 4-byte aligned the moves run over 32-bit words
  // (one monomorphic loop per direction); bytes otherwise.
  if (rm.byteOffset % 4 === 0 && packed.byteOffset % 4 === 0) {
    const a = new Uint32Array(rm.buffer, rm.byteOffset, rm.byteLength >> 2);
    const p = new Uint32Array(packed.buffer, packed.byteOffset, packed.byteLength >> 2);
    if (toPacked) mlx4Pack32(a, p, groups, blocks, pair >> 2, rb >> 2, qBytes >> 2);
    else mlx4Unpack32(p, a, groups, blocks, pair >> 2, rb >> 2, qBytes >> 2);
    return;
  }
  const move = (from: number, to: number, len: number) => {
    if (toPacked) for (let e = 0; e < len; e++) packed[to + e] = rm[from + e];
    else for (let e = 0; e < len; e++) rm[from + e] = packed[to + e];
  };
  for (let k = 0; k < groups; k++) {
    const at = k * (4 * pair + 64 * blocks);
    for (let r = 0; r < 4; r++) {
      move(r * rb + qBytes + k * pair, at + r * pair, pair);
      for (let b = 0; b < blocks; b++) move(r * rb + 16 * (k * blocks + b), at + 4 * pair + 64 * b + 16 * r, 16);
    }
  }
}

/** mlx4Group to packed over 32-bit words: pw words per (scale, bias) pair, rw per row, qw of bits per row. */
function mlx4Pack32(a: Uint32Array, p: Uint32Array, groups: number, blocks: number, pw: number, rw: number, qw: number): void {
  let d = 0;
  for (let k = 0; k < groups; k++) {
    for (let r = 0; r < 4; r++) {
      const s = r * rw + qw + k * pw;
      p[d++] = a[s];
      if (pw === 2) p[d++] = a[s + 1];
    }
    for (let b = 0; b < blocks; b++) {
      for (let r = 0; r < 4; r++) {
        const s = r * rw + 4 * (k * blocks + b);
        p[d] = a[s];
        p[d + 1] = a[s + 1];
        p[d + 2] = a[s + 2];
        p[d + 3] = a[s + 3];
        d += 4;
      }
    }
  }
}

function mlx4Unpack32(p: Uint32Array, a: Uint32Array, groups: number, blocks: number, pw: number, rw: number, qw: number): void {
  let d = 0;
  for (let k = 0; k < groups; k++) {
    for (let r = 0; r < 4; r++) {
      const s = r * rw + qw + k * pw;
      a[s] = p[d++];
      if (pw === 2) a[s + 1] = p[d++];
    }
    for (let b = 0; b < blocks; b++) {
      for (let r = 0; r < 4; r++) {
        const s = r * rw + 4 * (k * blocks + b);
        a[s] = p[d];
        a[s + 1] = p[d + 1];
        a[s + 2] = p[d + 2];
        a[s + 3] = p[d + 3];
        d += 4;
      }
    }
  }
}
