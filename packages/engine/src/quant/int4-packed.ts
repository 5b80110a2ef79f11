/**
 * compressed-tensors `pack-quantized` INT4 weights (Kimi-K2-Thinking's routed experts;
 * `quantization_config.format: "pack-quantized"`, symmetric int4 per group), as compressed-tensors'
 * PackedQuantizationCompressor writes them for a module `X`:
 * - `X.weight_packed`: I32 [out, ceil(in/8)]; each int32 holds 8 consecutive weights of a row, weight
 *   i of the word in bits 4i..4i+3 (the first in the low bits), stored unsigned as q + 8 (q in −8..7);
 * - `X.weight_scale`: [out, in/group] in the model dtype (BF16 in Kimi's files);
 * - `X.weight_shape`: [2] = [out, in] (the unpadded shape);
 * - no zero point (symmetric); value = q·scale.
 *
 * Kept as MLX 4-bit in memory ('mlx4_g<group>_<scale dtype>', quant/mlx.ts): the packed words are
 * already MLX's bit stream (element j at bit 4j of the row's little-endian bytes, unsigned), so they
 * are the weight's bytes unchanged, and (q + 8)·s + (−8·s) = q·s exactly — the products have at most
 * 12 significant bits and −8·s is exact in the scale dtype — so every weight equals q·s in f32, and
 * the MLX kernels (reference, WASM packed 4-bit, WebGPU), row and group-aligned column splits apply
 * as they are. The bias costs one scale-sized value per group: 5.0 bits per weight in memory against
 * the file's 4.5 (BF16 scales, groups of 32).
 */
import { basename } from 'node:path';
import { ModelFormatError, UnsupportedModelError } from '../errors.js';
import type { Backend, Weight } from '../kernels/backend.js';
import { type MlxLayout, mlxDType, rowBytes } from '../kernels/wasm/formats.js';
import { isIgnored, type WeightQuant } from '../config/quantization.js';
import { BF16_TO_F32, F16_TO_F32, f32ToBf16Bits, f32ToF16Bits } from '../numeric/half.js';
import type { Checkpoint } from '../safetensors/checkpoint.js';
import type { GgufCheckpoint } from '../gguf/read-model.js';
import { CHUNK_BYTES, type PendingRead, type ReadScratch, lazyRead } from './read-scratch.js';

const SCALE_DTYPES: Record<string, MlxLayout['scales']> = { F16: 'f16', BF16: 'bf16', F32: 'f32' };
type CtQuant = Extract<WeightQuant, { method: 'compressed-tensors' }>;

/**
 * If `name` (`X.weight`, a [rows, cols] linear) is stored pack-quantized in `ckpt` (`X.weight_packed`
 * present), its layout, checked against the shapes and config.json's quantization_config; else null.
 */
export function int4LayoutOf(ckpt: Checkpoint | GgufCheckpoint, name: string, rows: number, cols: number, quant: WeightQuant | undefined): MlxLayout | null {
  if (!name.endsWith('.weight') || !('dir' in ckpt)) return null;
  const base = name.slice(0, -'.weight'.length);
  const pName = `${base}.weight_packed`;
  if (!ckpt.has(pName)) return null;
  const file = ckpt.file(pName);
  const fname = basename(file.path);
  const bad = (t: string, why: string) => new ModelFormatError(`${fname}: pack-quantized ${t}: ${why}`, file.path, t);
  if (quant?.method !== 'compressed-tensors') {
    throw new ModelFormatError(`${fname}: ${pName} is pack-quantized but config.json's quantization_config does not declare compressed-tensors`, file.path, pName);
  }
  if (isIgnored(quant.ignore, base)) throw bad(pName, `module ${base} is in quantization_config.ignore, yet stored quantized`);
  const g = quant.groupSize;
  if (cols % g) throw new UnsupportedModelError(`${fname}: ${base} has ${cols} input columns, not whole groups of ${g}`);
  const p = ckpt.info(pName);
  if (p.dtype !== 'I32' || p.shape.length !== 2 || p.shape[0] !== rows || p.shape[1] !== Math.ceil(cols / 8)) {
    throw bad(pName, `must be I32 [${rows}, ${Math.ceil(cols / 8)}] for [${rows}, ${cols}] from config.json, got ${p.dtype} [${p.shape}]`);
  }
  const sName = `${base}.weight_scale`;
  if (!ckpt.has(sName)) throw bad(sName, 'missing');
  const s = ckpt.info(sName);
  if (!(s.dtype in SCALE_DTYPES) || s.shape.length !== 2 || s.shape[0] !== rows || s.shape[1] !== cols / g) {
    throw bad(sName, `must be BF16/F16/F32 [${rows}, ${cols / g}] (groups of ${g}), got ${s.dtype} [${s.shape}]`);
  }
  const shName = `${base}.weight_shape`;
  if (!ckpt.has(shName)) throw bad(shName, 'missing');
  const sh = ckpt.info(shName);
  if ((sh.dtype !== 'I32' && sh.dtype !== 'I64') || sh.shape.length !== 1 || sh.shape[0] !== 2) throw bad(shName, `must be I32 or I64 [2], got ${sh.dtype} [${sh.shape}]`);
  if (ckpt.has(`${base}.weight_zero_point`)) throw bad(`${base}.weight_zero_point`, 'present: only symmetric INT4 (no zero point) is supported');
  return { bits: 4, groupSize: g, scales: SCALE_DTYPES[s.dtype] };
}

/**
 * Rows r × columns c of the pack-quantized weight `name` as an MLX 4-bit weight (see the file comment)
 * and the reads that fill it: `weight_shape` (checked against [rows, cols] when read), then per few MiB
 * of rows the packed words and the scales, through `scratch`.
 */
export function planInt4Matrix(
  ckpt: Checkpoint,
  name: string,
  layout: MlxLayout,
  [rows, cols]: [number, number],
  r: [number, number],
  c: [number, number],
  backend: Backend,
  scratch: ReadScratch,
): { weight: Weight; reads: PendingRead[] } {
  const base = name.slice(0, -'.weight'.length);
  const pName = `${base}.weight_packed`;
  const sName = `${base}.weight_scale`;
  const shName = `${base}.weight_shape`;
  const file = ckpt.file(pName);
  const g = layout.groupSize;
  if (c[0] % g || c[1] % g) {
    throw new UnsupportedModelError(
      `${basename(file.path)}: cannot split ${base} (pack-quantized int4, groups of ${g}) at columns [${c[0]}, ${c[1]}): a tensor-parallel slice must start and end on a group boundary (a multiple of ${g})`,
    );
  }
  const dtype = mlxDType(layout);
  const n = r[1] - r[0];
  const width = c[1] - c[0];
  const el = layout.scales === 'f32' ? 4 : 2;
  const qBytes = width / 2;
  const groups = width / g;
  const rb = rowBytes(dtype, width);
  const weight: Weight = { dtype, rows: n, cols: width, bytes: backend.allocBytes(n * rb) };
  const shapeEl = ckpt.info(shName).dtype === 'I64' ? 8 : 4;
  const chunk = Math.max(1, Math.floor(CHUNK_BYTES / qBytes));
  scratch.need(Math.max(2 * shapeEl, Math.min(chunk, n) * (qBytes + groups * el)));
  const checkShape = () => {
    const v = scratch.view(0, 2 * shapeEl);
    const dv = new DataView(v.buffer, v.byteOffset, v.byteLength);
    const got = shapeEl === 8 ? [Number(dv.getBigInt64(0, true)), Number(dv.getBigInt64(8, true))] : [dv.getInt32(0, true), dv.getInt32(4, true)];
    if (got[0] !== rows || got[1] !== cols) {
      const f = ckpt.file(shName);
      throw new ModelFormatError(`${basename(f.path)}: ${shName} says [${got}], but ${pName} holds [${rows}, ${cols}] from config.json`, f.path, shName);
    }
  };
  const reads: PendingRead[] = [lazyRead(ckpt.file(shName), shName, () => scratch.view(0, 2 * shapeEl), [0, 1], [0, 2], checkShape)];
  // int32 words: 8 weights each (g is a multiple of 8, so a slice is whole words)
  const wordCols: [number, number] = [c[0] / 8, c[1] / 8];
  const groupCols: [number, number] = [c[0] / g, c[1] / g];
  for (let r0 = 0; r0 < n; r0 += chunk) {
    const k = Math.min(chunk, n - r0);
    const fileRows: [number, number] = [r[0] + r0, r[0] + r0 + k];
    const sOff = k * qBytes;
    const place = () => placeRows(scratch.view(0, sOff + k * groups * el), k, qBytes, groups, layout.scales, weight.bytes.subarray(r0 * rb, (r0 + k) * rb));
    reads.push(lazyRead(file, pName, () => scratch.view(0, sOff), fileRows, wordCols));
    reads.push(lazyRead(ckpt.file(sName), sName, () => scratch.view(sOff, k * groups * el), fileRows, groupCols, place));
  }
  return { weight, reads };
}

/**
 * −8·s as stored bits for every 16-bit scale s (f16, bf16): what f32ToBits(−8·toF32(s)) gives, once
 * per format instead of once per group.
 */
const NEG8: Partial<Record<'f16' | 'bf16', Uint16Array>> = {};
function neg8Table(scales: 'f16' | 'bf16'): Uint16Array {
  let t = NEG8[scales];
  if (!t) {
    const toBits = scales === 'f16' ? f32ToF16Bits : f32ToBf16Bits;
    const table = scales === 'f16' ? F16_TO_F32 : BF16_TO_F32;
    t = new Uint16Array(65536);
    for (let h = 0; h < 65536; h++) t[h] = toBits(-8 * table[h]);
    NEG8[scales] = t;
  }
  return t;
}

/** `n` rows from the scratch (all rows' packed bytes, then all scales) into MLX rows: bytes, then (scale, −8·scale) per group. */
export function placeRows(src: Uint8Array, n: number, qBytes: number, groups: number, scales: MlxLayout['scales'], dst: Uint8Array): void {
  const el = scales === 'f32' ? 4 : 2;
  const rb = qBytes + 2 * groups * el;
  const sOff = n * qBytes;
  for (let i = 0; i < n; i++) dst.set(src.subarray(i * qBytes, (i + 1) * qBytes), i * rb);
  if (scales === 'f32') {
    const sv = new DataView(src.buffer, src.byteOffset, src.byteLength);
    const dv = new DataView(dst.buffer, dst.byteOffset, dst.byteLength);
    for (let i = 0; i < n; i++) {
      for (let k = 0; k < groups; k++) {
        const o = i * rb + qBytes + 2 * k * el;
        const v = sv.getFloat32(sOff + (i * groups + k) * el, true);
        dv.setFloat32(o, v, true);
        dv.setFloat32(o + 4, -8 * v, true);
      }
    }
    return;
  }
  // −8·s: exact in the scale's own format (an exponent step of 3, the sign flipped), from the table
  const neg8 = neg8Table(scales);
  if (src.byteOffset % 2 === 0 && dst.byteOffset % 2 === 0 && qBytes % 2 === 0) {
    const s16 = new Uint16Array(src.buffer, src.byteOffset, src.byteLength >> 1);
    const d16 = new Uint16Array(dst.buffer, dst.byteOffset, dst.byteLength >> 1);
    let si = sOff >> 1;
    for (let i = 0; i < n; i++) {
      let o = (i * rb + qBytes) >> 1;
      for (let k = 0; k < groups; k++) {
        const h = s16[si++];
        d16[o++] = h;
        d16[o++] = neg8[h];
      }
    }
    return;
  }
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < groups; k++) {
      const o = i * rb + qBytes + 4 * k;
      const s = sOff + (i * groups + k) * 2;
      const h = src[s] | (src[s + 1] << 8);
      const m = neg8[h];
      dst[o] = src[s];
      dst[o + 1] = src[s + 1];
      dst[o + 2] = m & 0xff;
      dst[o + 3] = m >> 8;
    }
  }
}

/**
 * compressed-tensors' symmetric INT4 group quantizer for test writers: per group scale = amax/7.5
 * stored in the scale dtype — so q = round(w/scale) stays within −8..7 —, q = round-half-even(w/scale)
 * clamped to −8..7. Returns the packed words [rows, ceil(cols/8)] (q + 8, weight i of a word at bits 4i)
 * and the scales as f32 (their stored values). The quantizer's own numerics do not matter to the
 * loader, only the layout.
 */
export function quantizeInt4Packed(values: Float32Array, rows: number, cols: number, groupSize: number, round: (v: number) => number): { words: Int32Array; scales: Float32Array } {
  if (cols % groupSize) throw new Error(`quantizeInt4Packed: ${cols} columns are not whole groups of ${groupSize}`);
  const wpr = Math.ceil(cols / 8);
  const words = new Int32Array(rows * wpr);
  const scales = new Float32Array((rows * cols) / groupSize);
  for (let r = 0; r < rows; r++) {
    for (let k = 0; k < cols / groupSize; k++) {
      let amax = 0;
      for (let j = k * groupSize; j < (k + 1) * groupSize; j++) amax = Math.max(amax, Math.abs(values[r * cols + j]));
      const s = round(amax > 0 ? amax / 7.5 : 1);
      scales[r * (cols / groupSize) + k] = s;
      for (let j = k * groupSize; j < (k + 1) * groupSize; j++) {
        const x = values[r * cols + j] / s;
        let q = Math.round(x);
        if (Math.abs(x - Math.trunc(x)) === 0.5 && q % 2 !== 0) q -= 1;
        q = Math.max(-8, Math.min(7, q));
        words[r * wpr + (j >> 3)] |= (q + 8) << (4 * (j & 7));
      }
    }
  }
  return { words, scales };
}
