/**
 * Plain-TypeScript reference for the GGUF block formats (q8_0, q4_0): quantizers that follow
 * ggml's reference quantize_row_*_ref, dequantization, and the two dot products a kernel can be
 * checked against:
 * - exact: dequantized weights · f32 activations, accumulated in f64;
 * - q8 activations: the activations first quantized per 32-block like llama.cpp's Q8_0 activations
 *   (d = f16(amax/127), q = nearest-even(x·(127/amax))), integer block dots, accumulated in f64.
 * The WASM kernels compute the second; tests bound their distance to the first.
 */
import { F16_TO_F32, f32ToF16Bits } from '../../numeric/half.js';
import { quantizeInt8Blocks, roundHalfEven } from '../../numeric/int8-blocks.js';
import type { DType } from '../backend.js';
import { dequantizeKRow } from '../../quant/kquants.js';
import { dequantizeMlxRow } from '../../quant/mlx.js';
import { KVALUES, dequantizeMxfp4Row, e8m0Half } from '../../quant/mxfp4.js';
import { E4M3_TO_F32, dequantizeFp8Row } from '../../quant/fp8.js';
import { FP8_BLOCK, MXFP4_BLOCK_BYTES, Q4_0_BLOCK_BYTES, Q8_0_BLOCK_BYTES, QK, isMlx, rowBytes, weightBytes } from './formats.js';

const fround = Math.fround;

function roundAway(v: number): number {
  return v < 0 ? -Math.round(-v) : Math.round(v);
}


/** Quantize row-major `[rows, cols]` f32 values to q8_0 (ggml quantize_row_q8_0_ref). */
export function quantizeQ8_0(values: Float32Array, rows: number, cols: number, dst?: Uint8Array): Uint8Array {
  const out = dst ?? new Uint8Array(weightBytes('q8_0', rows, cols));
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  let o = 0;
  for (let r = 0; r < rows; r++) {
    for (let b = 0; b < cols / QK; b++) {
      const base = r * cols + b * QK;
      let amax = 0;
      for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(values[base + j]));
      const d = fround(amax / 127);
      const id = d ? fround(1 / d) : 0;
      view.setUint16(o, f32ToF16Bits(d), true);
      for (let j = 0; j < QK; j++) view.setInt8(o + 2 + j, roundAway(fround(values[base + j] * id)));
      o += Q8_0_BLOCK_BYTES;
    }
  }
  return out;
}

/** Quantize row-major `[rows, cols]` f32 values to q4_0 (ggml quantize_row_q4_0_ref). */
export function quantizeQ4_0(values: Float32Array, rows: number, cols: number, dst?: Uint8Array): Uint8Array {
  const out = dst ?? new Uint8Array(weightBytes('q4_0', rows, cols));
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  let o = 0;
  for (let r = 0; r < rows; r++) {
    for (let b = 0; b < cols / QK; b++) {
      const base = r * cols + b * QK;
      let amax = 0;
      let max = 0;
      for (let j = 0; j < QK; j++) {
        const v = values[base + j];
        if (Math.abs(v) > amax) {
          amax = Math.abs(v);
          max = v;
        }
      }
      const d = fround(max / -8);
      const id = d ? fround(1 / d) : 0;
      view.setUint16(o, f32ToF16Bits(d), true);
      for (let j = 0; j < QK / 2; j++) {
        const x0 = fround(values[base + j] * id);
        const x1 = fround(values[base + j + QK / 2] * id);
        const q0 = Math.min(15, Math.trunc(fround(x0 + 8.5)));
        const q1 = Math.min(15, Math.trunc(fround(x1 + 8.5)));
        out[o + 2 + j] = q0 | (q1 << 4);
      }
      o += Q4_0_BLOCK_BYTES;
    }
  }
  return out;
}

/** Row `r` of a quantized weight (q8_0, q4_0, K-quants, MXFP4, MLX affine, FP8) as f32 values into `dst`. */
export function dequantizeRow(dtype: DType, bytes: Uint8Array, cols: number, r: number, dst: Float32Array): void {
  if (dtype === 'q4_k' || dtype === 'q5_k' || dtype === 'q6_k') return dequantizeKRow(dtype, bytes, cols, r, dst);
  if (isMlx(dtype)) return dequantizeMlxRow(dtype, bytes, cols, r, dst);
  if (dtype === 'mxfp4') return dequantizeMxfp4Row(bytes, cols, r, dst);
  if (dtype === 'fp8_e4m3') return dequantizeFp8Row(bytes, cols, r, dst);
  const nb = cols / QK;
  if (dtype === 'q8_0') {
    let o = r * nb * Q8_0_BLOCK_BYTES;
    for (let b = 0; b < nb; b++, o += Q8_0_BLOCK_BYTES) {
      const d = F16_TO_F32[bytes[o] | (bytes[o + 1] << 8)];
      for (let j = 0; j < QK; j++) dst[b * QK + j] = ((bytes[o + 2 + j] << 24) >> 24) * d;
    }
    return;
  }
  if (dtype === 'q4_0') {
    let o = r * nb * Q4_0_BLOCK_BYTES;
    for (let b = 0; b < nb; b++, o += Q4_0_BLOCK_BYTES) {
      const d = F16_TO_F32[bytes[o] | (bytes[o + 1] << 8)];
      for (let j = 0; j < QK / 2; j++) {
        const byte = bytes[o + 2 + j];
        dst[b * QK + j] = ((byte & 15) - 8) * d;
        dst[b * QK + j + QK / 2] = ((byte >> 4) - 8) * d;
      }
    }
    return;
  }
  throw new Error(`dequantizeRow: ${dtype} is not a block format`);
}

/**
 * Row r of an fp8_e4m3 weight (cols % 32 == 0) as FP8 prompt batches see it (wasm/fp8tiles.ts
 * $fp8qwiden): per 32-column block s = max(0, E − 9) for the block's largest exponent field E, each
 * code as round(v·2^(9−s)) (ties to even) and the block's factor scale·2^(s−9).
 */
export function fp8RowInts(bytes: Uint8Array, cols: number, r: number, q: Int32Array, d: Float64Array | Float32Array): void {
  const nb128 = Math.ceil(cols / FP8_BLOCK);
  const row = r * rowBytes('fp8_e4m3', cols);
  const scales = new DataView(bytes.buffer, bytes.byteOffset + row, nb128 * 4);
  const codes = bytes.subarray(row + nb128 * 4, row + nb128 * 4 + cols);
  for (let b = 0; b < cols / QK; b++) {
    let max = 0;
    for (let j = b * QK; j < (b + 1) * QK; j++) max = Math.max(max, codes[j] & 0x7f);
    const s = Math.max(0, (max >> 3) - 9);
    const scale = scales.getFloat32(Math.floor((b * QK) / FP8_BLOCK) * 4, true);
    // a block with a NaN code has a NaN scale already (quant/fp8.ts markNanBlocks)
    d[b] = fround(scale * 2 ** (s - 9));
    for (let j = b * QK; j < (b + 1) * QK; j++) {
      const n = roundHalfEven(E4M3_TO_F32[codes[j] & 0x7f] * 2 ** (9 - s));
      q[j] = codes[j] & 0x80 ? -n : n;
    }
  }
}

/** Integer weight values (before the scale) of row `r`, and the row's block scales (q8_0, q4_0, mxfp4, fp8_e4m3). */
function rowInts(dtype: DType, bytes: Uint8Array, cols: number, r: number, q: Int32Array, d: Float64Array): void {
  const nb = cols / QK;
  if (dtype === 'fp8_e4m3') return fp8RowInts(bytes, cols, r, q, d);
  if (dtype === 'mxfp4') {
    // ggml's form: doubled FP4 integers times 2^(e − 128)
    for (let b = 0, o = r * nb * MXFP4_BLOCK_BYTES; b < nb; b++, o += MXFP4_BLOCK_BYTES) {
      d[b] = e8m0Half(bytes[o]);
      for (let j = 0; j < 16; j++) {
        q[b * QK + j] = KVALUES[bytes[o + 1 + j] & 15];
        q[b * QK + j + 16] = KVALUES[bytes[o + 1 + j] >> 4];
      }
    }
    return;
  }
  const bb = dtype === 'q8_0' ? Q8_0_BLOCK_BYTES : Q4_0_BLOCK_BYTES;
  let o = r * nb * bb;
  for (let b = 0; b < nb; b++, o += bb) {
    d[b] = F16_TO_F32[bytes[o] | (bytes[o + 1] << 8)];
    for (let j = 0; j < QK; j++) {
      if (dtype === 'q8_0') q[b * QK + j] = (bytes[o + 2 + j] << 24) >> 24;
      else q[b * QK + j] = j < 16 ? (bytes[o + 2 + j] & 15) - 8 : (bytes[o + 2 + j - 16] >> 4) - 8;
    }
  }
}

export interface QuantizedActivations {
  /** Integer values, one per column. */
  q: Int32Array;
  /** Per 32-block scale after f16 rounding (what the dot products use). */
  d: Float32Array;
  /** Per 32-block scale before f16 rounding (amax/127). */
  dRaw: Float32Array;
}

/** llama.cpp-style Q8_0 activations of one vector (what the WASM kernels compute internally). */
export function quantizeActivations(x: Float32Array, offset: number, cols: number): QuantizedActivations {
  const { q, amax } = quantizeInt8Blocks(x, offset, cols, QK);
  const dRaw = amax.map((m) => fround(m / 127));
  const d = dRaw.map((dr) => F16_TO_F32[f32ToF16Bits(dr)]);
  return { q, d, dRaw };
}

/** FP8 prompt batches' activations (quant_q8 mode 2): ±16383 per 32 columns, d = amax/16383 kept in f32. */
export function quantizeFp8Activations(x: Float32Array, offset: number, cols: number): QuantizedActivations {
  const { q, amax } = quantizeInt8Blocks(x, offset, cols, QK, FP8_ACT_LEVELS);
  const d = amax.map((m) => fround(m / FP8_ACT_LEVELS));
  return { q, d, dRaw: d };
}

/** Levels of FP8 prompt batches' activations: with codes of at most 15·2^8 (fp8RowInts), 32 products stay within i32. */
export const FP8_ACT_LEVELS = 16383;

export interface QuantDotResult {
  /** out[b·rows + r], f64. */
  out: Float64Array;
  /** Σ |term| per output, to scale tolerances. */
  magnitude: Float64Array;
}

/** Exact: dequantized weights · x, in f64. */
export function matmulExact(dtype: DType, bytes: Uint8Array, rows: number, cols: number, x: Float32Array, n: number): QuantDotResult {
  const out = new Float64Array(rows * n);
  const magnitude = new Float64Array(rows * n);
  const row = new Float32Array(cols);
  for (let r = 0; r < rows; r++) {
    dequantizeRow(dtype, bytes, cols, r, row);
    for (let b = 0; b < n; b++) {
      let s = 0;
      let m = 0;
      for (let c = 0; c < cols; c++) {
        const t = row[c] * x[b * cols + c];
        s += t;
        m += Math.abs(t);
      }
      out[b * rows + r] = s;
      magnitude[b * rows + r] = m;
    }
  }
  return { out, magnitude };
}

/** With x quantized per block to Q8_0 first (llama.cpp's scheme), in f64. */
export function matmulQ8Activations(
  dtype: DType,
  bytes: Uint8Array,
  rows: number,
  cols: number,
  x: Float32Array,
  n: number,
): QuantDotResult {
  const nb = cols / QK;
  const out = new Float64Array(rows * n);
  const magnitude = new Float64Array(rows * n);
  const acts = Array.from({ length: n }, (_, b) => quantizeActivations(x, b * cols, cols));
  const q = new Int32Array(cols);
  const d = new Float64Array(nb);
  for (let r = 0; r < rows; r++) {
    rowInts(dtype, bytes, cols, r, q, d);
    for (let b = 0; b < n; b++) {
      const a = acts[b];
      let s = 0;
      let m = 0;
      for (let k = 0; k < nb; k++) {
        let si = 0;
        let mi = 0;
        for (let j = k * QK; j < (k + 1) * QK; j++) {
          si += q[j] * a.q[j];
          mi += Math.abs(q[j] * a.q[j]);
        }
        s += si * d[k] * a.d[k];
        m += mi * Math.abs(d[k] * a.d[k]);
      }
      out[b * rows + r] = s;
      magnitude[b * rows + r] = m;
    }
  }
  return { out, magnitude };
}

/**
 * What q8_0's integer prompt tiles (wasm/qtiles.ts) give for a weight `rowInts` reads, bit for bit: per
 * row and token, block by block from +0, sum += f32(integer block total)·(d_w·d_x) in f32; the
 * activations as quant_q8 writes them for the format (FP8: quantizeFp8Activations).
 */
export function q8TilesOutput(dtype: DType, bytes: Uint8Array, rows: number, cols: number, x: Float32Array, n: number): Float32Array {
  const nb = cols / QK;
  const out = new Float32Array(rows * n);
  const quantize = dtype === 'fp8_e4m3' ? quantizeFp8Activations : quantizeActivations;
  const acts = Array.from({ length: n }, (_, b) => quantize(x, b * cols, cols));
  const q = new Int32Array(cols);
  const d = new Float32Array(nb);
  const dw = new Float64Array(nb);
  for (let r = 0; r < rows; r++) {
    rowInts(dtype, bytes, cols, r, q, dw);
    d.set(dw);
    for (let t = 0; t < n; t++) {
      const a = acts[t];
      let s = 0;
      for (let k = 0; k < nb; k++) {
        let si = 0;
        for (let j = k * QK; j < (k + 1) * QK; j++) si += q[j] * a.q[j];
        s = fround(s + fround(fround(si) * fround(d[k] * a.d[k])));
      }
      out[t * rows + r] = s;
    }
  }
  return out;
}
