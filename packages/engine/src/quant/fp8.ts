/**
 * FP8 block-scaled weights as DeepSeek V3/V3.1/R1, Kimi K2 and Qwen3's FP8 repositories ship them
 * (`quantization_config: { quant_method: "fp8", fmt: "e4m3", weight_block_size: [128, 128] }`):
 * - `X.weight`: F8_E4M3 [out, in], one code per weight;
 * - `X.weight_scale_inv`: [ceil(out/128), ceil(in/128)] (F32 in DeepSeek's files; BF16/F16 widened
 *   exactly), one factor per 128×128 block, the last row and column of blocks possibly short;
 * - value = e4m3(code)·scale_inv (DeepSeek's `weight_dequant`: the code widened to f32, times the
 *   block's factor, in f32). Despite the name the factor multiplies.
 *
 * In memory a weight is dtype 'fp8_e4m3' (kernels/backend.ts): per row its ceil(cols/128) f32 block
 * factors (its block row's, repeated on each of the 128 rows: +3% over the file), then its code
 * bytes as the file has them. So any whole rows are a byte range (tensor-parallel row splits need no
 * block alignment) and a row is one stream for the kernels. A column slice must start on a 128-column
 * block and end on one or at the last column (refused with the numbers otherwise). Nothing is widened
 * in memory: the 1-token kernel decodes each code as it multiplies; prompt batches widen a few rows at a
 * time into per-thread scratch (wasm/fp8tiles.ts).
 */
import { basename } from 'node:path';
import { ModelFormatError, UnsupportedModelError } from '../errors.js';
import type { Backend, Weight } from '../kernels/backend.js';
import { FP8_BLOCK, rowBytes } from '../kernels/wasm/formats.js';
import { BF16_TO_F32, F16_TO_F32 } from '../numeric/half.js';
import type { Checkpoint } from '../safetensors/checkpoint.js';
import type { GgufCheckpoint } from '../gguf/read-model.js';
import { CHUNK_BYTES, type PendingRead, type ReadScratch, lazyRead } from './read-scratch.js';

/** The largest finite E4M3 magnitude (code 0x7e: 2^8·1.75). */
export const E4M3_MAX = 448;

/**
 * E4M3 (OCP FP8, "e4m3fn"): sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities; codes
 * 0x7f and 0xff are NaN; exponent 0 is subnormal (m/8·2^-6). Every code's value, as f32 (exact).
 */
export const E4M3_TO_F32: Float32Array = (() => {
  const t = new Float32Array(256);
  for (let c = 0; c < 256; c++) {
    const sign = c & 0x80 ? -1 : 1;
    const e = (c >> 3) & 15;
    const m = c & 7;
    if (e === 15 && m === 7) t[c] = NaN;
    else t[c] = sign * (e === 0 ? (m / 8) * 2 ** -6 : (1 + m / 8) * 2 ** (e - 7));
  }
  return t;
})();

/** Non-negative finite codes 0..0x7e in increasing value, for rounding. */
const POSITIVE = E4M3_TO_F32.subarray(0, 0x7f);

/**
 * The E4M3 code nearest to `v` (ties to the even code, i.e. an even mantissa), saturating at ±448
 * (NaN stays NaN): what a quantizer writes after dividing by the block's scale. For test writers.
 */
export function f32ToE4M3(v: number): number {
  if (Number.isNaN(v)) return 0x7f;
  const sign = v < 0 || Object.is(v, -0) ? 0x80 : 0;
  const a = Math.min(Math.abs(v), E4M3_MAX);
  // largest code whose value <= a
  let lo = 0;
  let hi = POSITIVE.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (POSITIVE[mid] <= a) lo = mid;
    else hi = mid - 1;
  }
  let c = lo;
  if (c < POSITIVE.length - 1) {
    const below = a - POSITIVE[c];
    const above = POSITIVE[c + 1] - a;
    if (above < below || (above === below && (c & 1) === 1)) c++;
  }
  return sign | c;
}

/** Bytes of a [rows, cols] 'fp8_e4m3' weight. */
export function fp8WeightBytes(rows: number, cols: number): number {
  return rows * rowBytes('fp8_e4m3', cols);
}

/** Row `r` of an 'fp8_e4m3' weight as f32 values into `dst`: f32(e4m3(code)·scale), DeepSeek's weight_dequant. */
export function dequantizeFp8Row(bytes: Uint8Array, cols: number, r: number, dst: Float32Array): void {
  const nb = Math.ceil(cols / FP8_BLOCK);
  const o = r * (nb * 4 + cols);
  const view = new DataView(bytes.buffer, bytes.byteOffset + o, nb * 4);
  const q = o + nb * 4;
  for (let b = 0; b < nb; b++) {
    const s = view.getFloat32(b * 4, true);
    const end = Math.min(cols, (b + 1) * FP8_BLOCK);
    for (let c = b * FP8_BLOCK; c < end; c++) dst[c] = Math.fround(E4M3_TO_F32[bytes[q + c]] * s);
  }
}

/**
 * Packs codes [rows, cols] and DeepSeek's block factors [ceil(rows/128), ceil(cols/128)] (f32) into an
 * 'fp8_e4m3' weight at `dst`: tests and benchmarks that build weights directly.
 */
export function packFp8(codes: Uint8Array, scaleInv: Float32Array, rows: number, cols: number, dst: Uint8Array): void {
  const nb = Math.ceil(cols / FP8_BLOCK);
  const rb = nb * 4 + cols;
  const view = new DataView(dst.buffer, dst.byteOffset, dst.byteLength);
  for (let r = 0; r < rows; r++) {
    for (let b = 0; b < nb; b++) view.setFloat32(r * rb + b * 4, scaleInv[Math.floor(r / FP8_BLOCK) * nb + b], true);
    dst.set(codes.subarray(r * cols, (r + 1) * cols), r * rb + nb * 4);
  }
  markNanBlocks(dst.subarray(0, rows * rb), cols);
}

/**
 * Sets the factor of every row block that holds a NaN code (0x7f/0xff) to NaN, in packed 'fp8_e4m3' rows
 * of `cols` columns: the kernels then give NaN for the row without checking each code (wasm/fp8tiles.ts).
 * Real checkpoints hold none, so the scan is two native byte searches over the codes.
 */
export function markNanBlocks(rowsBytes: Uint8Array, cols: number): void {
  const nb = Math.ceil(cols / FP8_BLOCK);
  const rb = nb * 4 + cols;
  const buf = Buffer.from(rowsBytes.buffer, rowsBytes.byteOffset, rowsBytes.byteLength);
  for (const nan of [0x7f, 0xff]) {
    for (let at = buf.indexOf(nan); at >= 0; at = buf.indexOf(nan, at + 1)) {
      const c = (at % rb) - nb * 4;
      if (c < 0) continue; // a byte of a factor, not a code
      buf.writeFloatLE(NaN, at - (at % rb) + Math.floor(c / FP8_BLOCK) * 4);
    }
  }
}

/**
 * DeepSeek-style block quantization of [rows, cols] f32 values: per 128×128 block scale = amax/448
 * (1 for an all-zero block) rounded by `round`, code = nearest E4M3 of value/scale. Returns the codes (row-major) and
 * the f32 factors [ceil(rows/128), ceil(cols/128)] as `weight_scale_inv` stores them. For test writers.
 */
export function quantizeFp8Blocks(values: Float32Array, rows: number, cols: number, round: (v: number) => number = Math.fround): { codes: Uint8Array; scaleInv: Float32Array } {
  const br = Math.ceil(rows / FP8_BLOCK);
  const bc = Math.ceil(cols / FP8_BLOCK);
  const scaleInv = new Float32Array(br * bc);
  const codes = new Uint8Array(rows * cols);
  for (let i = 0; i < br; i++) {
    for (let j = 0; j < bc; j++) {
      const r1 = Math.min(rows, (i + 1) * FP8_BLOCK);
      const c1 = Math.min(cols, (j + 1) * FP8_BLOCK);
      let amax = 0;
      for (let r = i * FP8_BLOCK; r < r1; r++) for (let c = j * FP8_BLOCK; c < c1; c++) amax = Math.max(amax, Math.abs(values[r * cols + c]));
      // (`round`: to the dtype the factor is stored in, e.g. BF16 in Qwen3's FP8 files; codes saturate at ±448)
      const s = amax > 0 ? round(amax / E4M3_MAX) : 1;
      scaleInv[i * bc + j] = s;
      for (let r = i * FP8_BLOCK; r < r1; r++) for (let c = j * FP8_BLOCK; c < c1; c++) codes[r * cols + c] = f32ToE4M3(values[r * cols + c] / s);
    }
  }
  return { codes, scaleInv };
}

const SCALE_DTYPES: Record<string, 4 | 2> = { F32: 4, BF16: 2, F16: 2 };

/**
 * Whether `name` (a [rows, cols] weight) is FP8 in `ckpt`: an F8_E4M3 tensor with its
 * `weight_scale_inv` next to it, shapes checked; errors name file and tensor. False for other dtypes.
 */
export function isFp8Weight(ckpt: Checkpoint | GgufCheckpoint, name: string, rows: number, cols: number): boolean {
  if (!name.endsWith('.weight') || !('dir' in ckpt) || !ckpt.has(name)) return false;
  const file = ckpt.file(name);
  const info = file.info(name);
  const fname = basename(file.path);
  if (info.dtype === 'F8_E5M2') {
    throw new UnsupportedModelError(`${fname}: ${name} is F8_E5M2; Orchard loads FP8 weights in E4M3 (fmt "e4m3") only`);
  }
  if (info.dtype !== 'F8_E4M3') return false;
  if (info.shape.length !== 2 || info.shape[0] !== rows || info.shape[1] !== cols) {
    throw new ModelFormatError(`${fname}: tensor ${name} has shape [${info.shape}], expected [${rows},${cols}] from config.json`, file.path, name);
  }
  const sName = `${name}_scale_inv`;
  if (!ckpt.has(sName)) throw new ModelFormatError(`${fname}: FP8 tensor ${name} has no ${sName} (block scales)`, file.path, sName);
  const sFile = ckpt.file(sName);
  const s = sFile.info(sName);
  const want = [Math.ceil(rows / FP8_BLOCK), Math.ceil(cols / FP8_BLOCK)];
  if (!(s.dtype in SCALE_DTYPES) || s.shape.length !== 2 || s.shape[0] !== want[0] || s.shape[1] !== want[1]) {
    throw new ModelFormatError(
      `${basename(sFile.path)}: tensor ${sName} is ${s.dtype} [${s.shape}]; ${name} [${rows},${cols}] in ${FP8_BLOCK}×${FP8_BLOCK} blocks needs F32 (or BF16/F16) [${want}]`,
      sFile.path,
      sName,
    );
  }
  return true;
}

/**
 * Rows r × columns c of the FP8 weight `name` as an 'fp8_e4m3' weight, and the reads that fill it (codes
 * and the block factors of a few MiB of rows at a time through `scratch`). `alloc` gives the weight's
 * buffer (the backend's allocBytes).
 */
export function planFp8Matrix(
  ckpt: Checkpoint,
  name: string,
  r: [number, number],
  c: [number, number],
  alloc: Backend['allocBytes'],
  scratch: ReadScratch,
): { weight: Weight; reads: PendingRead[] } {
  const file = ckpt.file(name);
  const info = file.info(name);
  const [allRows, allCols] = info.shape;
  if (r[0] < 0 || r[1] > allRows || r[0] > r[1] || c[0] < 0 || c[1] > allCols || c[0] >= c[1]) {
    throw new RangeError(`${basename(file.path)}: rows [${r}) × columns [${c}) outside ${name} [${allRows}, ${allCols}]`);
  }
  if (c[0] % FP8_BLOCK || (c[1] % FP8_BLOCK && c[1] !== allCols)) {
    throw new UnsupportedModelError(
      `${basename(file.path)}: cannot split ${name} (fp8, ${FP8_BLOCK}×${FP8_BLOCK} blocks) at columns [${c[0]}, ${c[1]}): a tensor-parallel slice must start and end on a ${FP8_BLOCK}-column block boundary (or the last column, ${allCols})`,
    );
  }
  const sName = `${name}_scale_inv`;
  const sFile = ckpt.file(sName);
  const sDtype = sFile.info(sName).dtype;
  const sEl = SCALE_DTYPES[sDtype];
  const rows = r[1] - r[0];
  const cols = c[1] - c[0];
  const nb = Math.ceil(cols / FP8_BLOCK);
  const rb = nb * 4 + cols;
  const weight: Weight = { dtype: 'fp8_e4m3', rows, cols, bytes: alloc(rows * rb) };
  const blockCols: [number, number] = [c[0] / FP8_BLOCK, c[0] / FP8_BLOCK + nb];
  // whole 128-row blocks per step, so a step reads each of its block rows of factors once
  const chunk = Math.max(FP8_BLOCK, Math.floor(CHUNK_BYTES / cols / FP8_BLOCK) * FP8_BLOCK);
  const maxBlockRows = Math.ceil(Math.min(chunk, rows) / FP8_BLOCK) + 1;
  scratch.need(Math.min(chunk, rows) * cols + maxBlockRows * nb * sEl);
  const reads: PendingRead[] = [];
  for (let r0 = 0; r0 < rows; r0 += chunk) {
    const n = Math.min(chunk, rows - r0);
    const fileRows: [number, number] = [r[0] + r0, r[0] + r0 + n];
    const b0 = Math.floor(fileRows[0] / FP8_BLOCK);
    const b1 = Math.floor((fileRows[1] - 1) / FP8_BLOCK) + 1;
    const sOff = n * cols;
    const sLen = (b1 - b0) * nb * sEl;
    const place = () => placeFp8Rows(scratch.view(0, sOff + sLen), n, cols, fileRows[0], b0, sDtype, weight.bytes.subarray(r0 * rb, (r0 + n) * rb));
    reads.push(lazyRead(file, name, () => scratch.view(0, n * cols), fileRows, c));
    reads.push(lazyRead(sFile, sName, () => scratch.view(sOff, sLen), [b0, b1], blockCols, place));
  }
  return { weight, reads };
}

/**
 * `n` rows of codes (the scratch's first n·cols bytes) and their block factors (after them: block rows
 * b0.. of ceil(cols/128) factors in `sDtype`) into packed 'fp8_e4m3' rows at `out`, then NaN blocks
 * marked. `firstRow`: the file row of the first code row (which block row of factors it takes).
 */
export function placeFp8Rows(src: Uint8Array, n: number, cols: number, firstRow: number, b0: number, sDtype: string, out: Uint8Array): void {
  const nb = Math.ceil(cols / FP8_BLOCK);
  const rb = nb * 4 + cols;
  const sEl = SCALE_DTYPES[sDtype];
  if (!sEl) throw new Error(`fp8 block factors: unsupported dtype ${sDtype}`);
  const sView = new DataView(src.buffer, src.byteOffset + n * cols, src.byteLength - n * cols);
  const table = sDtype === 'BF16' ? BF16_TO_F32 : F16_TO_F32;
  // One block row's factors as f32 bytes, built once and copied onto each of its (up to 128) rows.
  const factors = new Float32Array(nb);
  const factorBytes = new Uint8Array(factors.buffer);
  let built = -1;
  for (let i = 0; i < n; i++) {
    const sRow = Math.floor((firstRow + i) / FP8_BLOCK) - b0;
    if (sRow !== built) {
      for (let b = 0; b < nb; b++) {
        const at = (sRow * nb + b) * sEl;
        factors[b] = sEl === 4 ? sView.getFloat32(at, true) : table[sView.getUint16(at, true)];
      }
      built = sRow;
    }
    out.set(factorBytes, i * rb);
    out.set(src.subarray(i * cols, (i + 1) * cols), i * rb + nb * 4);
  }
  markNanBlocks(out, cols);
}
