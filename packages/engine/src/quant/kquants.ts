/**
 * GGUF K-quants (llama.cpp's Q4_K, Q5_K, Q6_K): plain-TypeScript reference for their block layouts —
 * dequantization (the formulas the kernels must reproduce), a quantizer for our GGUF writer, and the
 * 8-bit activations (ggml's Q8_K) the kernels multiply them with.
 *
 * Super-blocks of 256 weights along a row:
 *
 *   q4_k (144 bytes): f16 d, f16 dmin, 12 bytes of scales, 128 bytes of nibbles.
 *     8 sub-blocks of 32, each with a 6-bit scale sc and a 6-bit min m packed in the 12 bytes
 *     (sub-blocks 0-3: low 6 bits of bytes j and j+4; 4-7: the nibbles of byte j+4 plus the top two
 *     bits of bytes j−4 and j). Nibble bytes in 4 runs of 32: run c holds sub-block 2c in its low
 *     nibbles and 2c+1 in its high ones. w = d·sc·q − dmin·m, q in 0..15.
 *   q5_k (176 bytes): as q4_k, with 32 bytes qh between the scales and the nibbles: bit j of qh[l] is
 *     the fifth bit (16) of element l of sub-block j. w = d·sc·q − dmin·m, q in 0..31.
 *   q6_k (210 bytes): 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales, f16 d
 *     last. 16 sub-blocks of 16; each half of 128 weights n uses ql[64n ..], qh[32n ..]: for l < 32,
 *     element 128n + 32k + l takes the low or high nibble of ql[64n + l + 32·(k&1)] (high for k ≥ 2)
 *     and bits 2k..2k+1 of qh[32n + l]. w = d·sc·(q − 32), q in 0..63.
 *
 * Activations (what llama.cpp multiplies K-quants with, Q8_K): per 256 weights one f32 scale
 * d = 1/(127/amax) and int8 q = nearest-even(x·127/amax). The sign convention of ggml's quantizer
 * (−127/max) flips both q and d, so products are the same.
 */
import { F16_TO_F32, f32ToF16Bits } from '../numeric/half.js';
import { quantizeInt8Blocks } from '../numeric/int8-blocks.js';
import { QK_K, Q4_K_BLOCK_BYTES, Q5_K_BLOCK_BYTES, Q6_K_BLOCK_BYTES } from '../kernels/wasm/formats.js';

export type KQuant = 'q4_k' | 'q5_k' | 'q6_k';

const fround = Math.fround;
const half = (b: Uint8Array, o: number) => F16_TO_F32[b[o] | (b[o + 1] << 8)];

/** Sub-block j's 6-bit scale and min from the 12 packed bytes at `o`. */
export function scaleMinK4(b: Uint8Array, o: number, j: number): [number, number] {
  if (j < 4) return [b[o + j] & 63, b[o + j + 4] & 63];
  return [(b[o + j + 4] & 15) | ((b[o + j - 4] >> 6) << 4), (b[o + j + 4] >> 4) | ((b[o + j] >> 6) << 4)];
}

function packScaleMinK4(sc: ArrayLike<number>, m: ArrayLike<number>, out: Uint8Array, o: number): void {
  for (let j = 0; j < 12; j++) out[o + j] = 0;
  for (let j = 0; j < 8; j++) {
    if (j < 4) {
      out[o + j] |= sc[j] & 63;
      out[o + j + 4] |= m[j] & 63;
    } else {
      out[o + j + 4] = (sc[j] & 15) | ((m[j] & 15) << 4);
      out[o + j - 4] |= (sc[j] >> 4) << 6;
      out[o + j] |= (m[j] >> 4) << 6;
    }
  }
}

/** The integer weights q (before scales) of one super-block at byte `o`, into q[0..256). */
export function superBlockInts(dtype: KQuant, b: Uint8Array, o: number, q: Int32Array): void {
  if (dtype === 'q6_k') {
    for (let n = 0; n < 2; n++) {
      const ql = o + 64 * n;
      const qh = o + 128 + 32 * n;
      for (let l = 0; l < 32; l++) {
        const h = b[qh + l];
        q[128 * n + l] = (b[ql + l] & 15) | ((h & 3) << 4);
        q[128 * n + 32 + l] = (b[ql + 32 + l] & 15) | (((h >> 2) & 3) << 4);
        q[128 * n + 64 + l] = (b[ql + l] >> 4) | (((h >> 4) & 3) << 4);
        q[128 * n + 96 + l] = (b[ql + 32 + l] >> 4) | (((h >> 6) & 3) << 4);
      }
    }
    return;
  }
  const five = dtype === 'q5_k';
  const qs = o + (five ? 48 : 16);
  for (let c = 0; c < 4; c++) {
    for (let l = 0; l < 32; l++) {
      const byte = b[qs + 32 * c + l];
      const hb = five ? b[o + 16 + l] : 0;
      q[64 * c + l] = (byte & 15) | (((hb >> (2 * c)) & 1) << 4);
      q[64 * c + 32 + l] = (byte >> 4) | (((hb >> (2 * c + 1)) & 1) << 4);
    }
  }
}

const blockBytes = (dtype: KQuant) => (dtype === 'q4_k' ? Q4_K_BLOCK_BYTES : dtype === 'q5_k' ? Q5_K_BLOCK_BYTES : Q6_K_BLOCK_BYTES);

/**
 * Per-element scale a and offset b of one super-block (w = a·q + b, f32 as ggml computes them):
 * q4_k/q5_k a = d·sc, b = −dmin·m per 32; q6_k a = d·sc, b = −32·a per 16.
 */
export function superBlockAffine(dtype: KQuant, bytes: Uint8Array, o: number, a: Float32Array, b: Float32Array): void {
  if (dtype === 'q6_k') {
    const d = half(bytes, o + 208);
    for (let j = 0; j < 16; j++) {
      const sc = (bytes[o + 192 + j] << 24) >> 24;
      a[j] = fround(d * sc);
      b[j] = fround(-32 * a[j]);
    }
    return;
  }
  const d = half(bytes, o);
  const dmin = half(bytes, o + 2);
  for (let j = 0; j < 8; j++) {
    const [sc, m] = scaleMinK4(bytes, o + 4, j);
    a[j] = fround(d * sc);
    b[j] = -fround(dmin * m);
  }
}

/**
 * Calls visit(column, q, a, b) for every weight of row `r`: w = a·q + b with a, b the f32 values ggml
 * computes per sub-block (q6_k: q already minus 32 and b = 0, as ggml's d·sc·(q − 32)).
 */
function eachWeight(dtype: KQuant, bytes: Uint8Array, cols: number, r: number, visit: (c: number, q: number, a: number, b: number) => void): void {
  const nb = cols / QK_K;
  const bb = blockBytes(dtype);
  const sub = dtype === 'q6_k' ? 16 : 32;
  const q = new Int32Array(QK_K);
  const a = new Float32Array(16);
  const b = new Float32Array(16);
  for (let i = 0; i < nb; i++) {
    const o = (r * nb + i) * bb;
    superBlockInts(dtype, bytes, o, q);
    superBlockAffine(dtype, bytes, o, a, b);
    for (let e = 0; e < QK_K; e++) {
      const j = (e / sub) | 0;
      if (dtype === 'q6_k') visit(i * QK_K + e, q[e] - 32, a[j], 0);
      else visit(i * QK_K + e, q[e], a[j], b[j]);
    }
  }
}

/** Row `r` of a K-quant weight as f32 values into `dst` (llama.cpp's dequantize_row_q*_K). */
export function dequantizeKRow(dtype: KQuant, bytes: Uint8Array, cols: number, r: number, dst: Float32Array): void {
  eachWeight(dtype, bytes, cols, r, (c, q, a, b) => (dst[c] = fround(fround(a * q) + b)));
}

/**
 * Quantizes row-major [rows, cols] values (cols a multiple of 256) into K-quant super-blocks: our
 * own quantizer (per sub-block min/max for q4_k/q5_k, max-abs for q6_k, the sub-block scales then
 * quantized against the super-block's), not llama.cpp's search; files it writes are read by any
 * GGUF reader because only the layout is shared.
 */
export function quantizeK(dtype: KQuant, values: Float32Array, rows: number, cols: number, dst?: Uint8Array): Uint8Array {
  if (cols % QK_K) throw new Error(`${dtype}: ${cols} columns are not whole super-blocks of ${QK_K}`);
  const bb = blockBytes(dtype);
  const out = dst ?? new Uint8Array((rows * cols * bb) / QK_K);
  const blocks = (rows * cols) / QK_K;
  for (let i = 0; i < blocks; i++) {
    const x = values.subarray(i * QK_K, (i + 1) * QK_K);
    if (dtype === 'q6_k') quantizeQ6Block(x, out, i * bb);
    else quantizeQ45Block(x, out, i * bb, dtype === 'q5_k' ? 31 : 15);
  }
  return out;
}

function quantizeQ45Block(x: Float32Array, out: Uint8Array, o: number, levels: number): void {
  const scale = new Float64Array(8);
  const min = new Float64Array(8);
  for (let j = 0; j < 8; j++) {
    let lo = 0; // the offset term is −dmin·m with m ≥ 0, so a sub-block's minimum is at most 0
    let hi = -Infinity;
    for (let l = 0; l < 32; l++) {
      lo = Math.min(lo, x[32 * j + l]);
      hi = Math.max(hi, x[32 * j + l]);
    }
    scale[j] = Math.max(0, hi - lo) / levels;
    min[j] = -lo;
  }
  const d = F16_TO_F32[f32ToF16Bits(Math.max(...scale) / 63)];
  const dmin = F16_TO_F32[f32ToF16Bits(Math.max(...min) / 63)];
  const sc = Array.from(scale, (s) => (d > 0 ? Math.min(63, Math.round(s / d)) : 0));
  const m = Array.from(min, (v) => (dmin > 0 ? Math.min(63, Math.round(v / dmin)) : 0));
  const v = new DataView(out.buffer, out.byteOffset, out.byteLength);
  v.setUint16(o, f32ToF16Bits(d), true);
  v.setUint16(o + 2, f32ToF16Bits(dmin), true);
  packScaleMinK4(sc, m, out, o + 4);
  const five = levels === 31;
  const qs = o + (five ? 48 : 16);
  if (five) out.fill(0, o + 16, o + 48);
  for (let j = 0; j < 8; j++) {
    const a = fround(d * sc[j]);
    const off = fround(dmin * m[j]);
    for (let l = 0; l < 32; l++) {
      const q = a > 0 ? Math.max(0, Math.min(levels, Math.round((x[32 * j + l] + off) / a))) : 0;
      const c = j >> 1;
      const byte = qs + 32 * c + l;
      if (j & 1) out[byte] = (out[byte] & 15) | ((q & 15) << 4);
      else out[byte] = q & 15;
      if (five && q & 16) out[o + 16 + l] |= 1 << j;
    }
  }
}

function quantizeQ6Block(x: Float32Array, out: Uint8Array, o: number): void {
  const scale = new Float64Array(16);
  for (let j = 0; j < 16; j++) {
    let amax = 0;
    for (let l = 0; l < 16; l++) amax = Math.max(amax, Math.abs(x[16 * j + l]));
    scale[j] = amax / 31;
  }
  const d = F16_TO_F32[f32ToF16Bits(Math.max(...scale) / 127)];
  const v = new DataView(out.buffer, out.byteOffset, out.byteLength);
  v.setUint16(o + 208, f32ToF16Bits(d), true);
  out.fill(0, o, o + 192);
  for (let j = 0; j < 16; j++) {
    const sc = d > 0 ? Math.min(127, Math.round(scale[j] / d)) : 0;
    out[o + 192 + j] = sc;
    const a = fround(d * sc);
    for (let l = 0; l < 16; l++) {
      const e = 16 * j + l;
      const q = (a > 0 ? Math.max(-32, Math.min(31, Math.round(x[e] / a))) : 0) + 32;
      const n = e >> 7;
      const k = (e >> 5) & 3;
      const li = e & 31;
      const ql = o + 64 * n + li + 32 * (k & 1);
      out[ql] |= k >= 2 ? (q & 15) << 4 : q & 15;
      out[o + 128 + 32 * n + li] |= (q >> 4) << (2 * k);
    }
  }
}

export interface KActivations {
  /** int8 values, one per column. */
  q: Int32Array;
  /** f32 scale per 256 columns. */
  d: Float32Array;
}

/** ggml's Q8_K activations of one vector (what the WASM K-quant kernels compute internally). */
export function quantizeActivationsK(x: Float32Array, offset: number, cols: number): KActivations {
  const { q, iscale } = quantizeInt8Blocks(x, offset, cols, QK_K);
  return { q, d: iscale.map((id) => (id === 0 ? 0 : fround(1 / id))) };
}

export interface KProduct {
  /** out[b·rows + r], f64. */
  out: Float64Array;
  /** Σ (|a·q| + |b|)·|x| per output: the size of the terms the kernels round, for tolerances. */
  magnitude: Float64Array;
}

/**
 * f64 oracle of a K-quant matmul: weights dequantized exactly (w = a·q + b, f64), times the f32
 * activations x (`q8k` false) or ggml's Q8_K activations d·q (`q8k` true, the WASM kernels' scheme).
 */
export function matmulKReference(dtype: KQuant, bytes: Uint8Array, rows: number, cols: number, x: Float32Array, n: number, q8k: boolean): KProduct {
  const out = new Float64Array(rows * n);
  const magnitude = new Float64Array(rows * n);
  const xs = Array.from({ length: n }, (_, t) => {
    if (!q8k) return Float64Array.from(x.subarray(t * cols, (t + 1) * cols));
    const a = quantizeActivationsK(x, t * cols, cols);
    return Float64Array.from(a.q, (v, c) => v * a.d[(c / QK_K) | 0]);
  });
  for (let r = 0; r < rows; r++) {
    eachWeight(dtype, bytes, cols, r, (c, q, a, b) => {
      const w = a * q + b;
      const m = Math.abs(a * q) + Math.abs(b);
      for (let t = 0; t < n; t++) {
        out[t * rows + r] += w * xs[t][c];
        magnitude[t * rows + r] += m * Math.abs(xs[t][c]);
      }
    });
  }
  return { out, magnitude };
}
