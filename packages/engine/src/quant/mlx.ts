/**
 * MLX affine-quantized linears and embeddings (mlx-community checkpoints; `quantization` /
 * `quantization_config` in config.json), KEPT PACKED in memory. Each quantized `X.weight` is stored
 * by mlx-lm as three tensors:
 * - `X.weight`: uint32 [out, in·bits/32]; the row is one little-endian bit stream, element j at bit
 *   j·bits (bits 2, 4, 8 fill words evenly; bits 3 and 6 pack 8 and 4 elements into 3 bytes);
 * - `X.scales`, `X.biases`: [out, in/group_size] in the model dtype (F16, BF16 or F32);
 * - value = scale·q + bias, q unsigned (0 .. 2^bits − 1).
 *
 * In memory a weight is one buffer of dtype `mlx<bits>_g<group>_<scale dtype>` (kernels/backend.ts
 * MlxDType): per row its packed bits as the file has them, then per group (scale, bias) in the scale
 * dtype, so a row is one contiguous stream for the kernels and a row slice is a byte range. Reading
 * goes through a bounded scratch (a few MiB of rows at a time) and interleaves the scales and biases
 * into place; nothing is widened. Bits 2, 3, 4, 6, 8; group sizes 32, 64, 128. A tensor-parallel
 * column slice must start and end on a group (refused with the numbers otherwise).
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { ModelFormatError, UnsupportedModelError } from '../errors.js';
import type { Backend, MlxDType, Weight } from '../kernels/backend.js';
import { type MlxLayout, mlxDType, mlxLayout, rowBytes } from '../kernels/wasm/formats.js';
import { BF16_TO_F32, F16_TO_F32, f32ToBf16Bits, f32ToF16Bits } from '../numeric/half.js';
import type { Checkpoint } from '../safetensors/checkpoint.js';
import type { GgufCheckpoint } from '../gguf/read-model.js';
import { CHUNK_BYTES, type PendingRead, type ReadScratch, lazyRead } from './read-scratch.js';

export interface MlxQuant {
  bits: MlxLayout['bits'];
  groupSize: MlxLayout['groupSize'];
}

export const MLX_BITS: readonly number[] = [2, 3, 4, 6, 8];
export const MLX_GROUPS: readonly number[] = [32, 64, 128];
const SCALE_DTYPES: Record<string, MlxLayout['scales']> = { F16: 'f16', BF16: 'bf16', F32: 'f32' };

/** What config.json's `quantization` (or `quantization_config`) says of one module. */
type ModuleQuant = { kind: 'none' } | { kind: 'off' } | { kind: 'on'; bits?: unknown; group_size?: unknown; mode?: unknown; own: boolean };

/** Parsed `quantization` objects per checkpoint (read once, not once per tensor: MoE models have thousands). */
const quantConfigs = new WeakMap<object, Record<string, unknown> | null>();

function quantConfig(ckpt: Checkpoint): Record<string, unknown> | null {
  if (quantConfigs.has(ckpt)) return quantConfigs.get(ckpt)!;
  let q: Record<string, unknown> | null = null;
  const path = join(ckpt.dir, 'config.json');
  if (existsSync(path)) {
    try {
      const c = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
      const v = c.quantization ?? c.quantization_config;
      q = v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
    } catch {
      q = null; // config.json itself is validated (with a named error) by loadModelConfig
    }
  }
  quantConfigs.set(ckpt, q);
  return q;
}

/**
 * config.json's quantization for module `base`: mlx-lm writes a per-module entry (`{group_size, bits[,
 * mode]}`, or `false` for a module it left unquantized) where a module differs from the global one.
 */
function configQuant(ckpt: Checkpoint, base: string): ModuleQuant {
  const q = quantConfig(ckpt);
  if (!q) return { kind: 'none' };
  const own = q[base];
  if (own === false) return { kind: 'off' };
  if (own && typeof own === 'object') return { kind: 'on', ...(own as object), own: true };
  return { kind: 'on', bits: q.bits, group_size: q.group_size, mode: q.mode, own: false };
}

/**
 * The MLX quantization mode of `base` from its tensors — `.biases` beside the scales: "affine"; U8
 * scales (E8M0 exponents) and no biases: "mxfp4" (gpt-oss's experts as mlx-lm keeps them) — checked
 * against config.json's mode (the module's own entry, else the global one; mlx-lm's quant_predicate
 * entries may omit it). Any other mode config.json names is refused by name.
 */
function modeOf(ckpt: Checkpoint, base: string, cq: ModuleQuant, fname: string): string {
  const s = ckpt.info(`${base}.scales`);
  const tensors = ckpt.has(`${base}.biases`) ? 'affine' : s.dtype === 'U8' ? 'mxfp4' : null;
  const said = cq.kind === 'on' && cq.mode !== undefined ? String(cq.mode) : null;
  const where = cq.kind === 'on' && cq.own ? `quantization["${base}"]` : 'quantization';
  if (said !== null && said !== 'affine' && said !== 'mxfp4') {
    throw new UnsupportedModelError(`${fname}: ${base} is quantized in MLX mode "${said}" (config.json ${where}); Orchard loads modes "affine" and "mxfp4"`);
  }
  if (!tensors) {
    throw new ModelFormatError(`${fname}: MLX-quantized ${base}.biases: has scales but no ${base}.biases (only MLX's affine mode has ${s.dtype} scales)`, ckpt.file(`${base}.scales`).path, `${base}.biases`);
  }
  // a per-module entry without a mode is mlx-lm's quant_predicate dict; only a stated mode must agree
  if (said !== null && said !== tensors) {
    throw new ModelFormatError(`config.json: ${where} says mode "${said}" but ${base} in ${fname} is ${tensors} (${tensors === 'affine' ? 'scales and biases' : 'U8 scales, no biases'})`, join(ckpt.dir, 'config.json'), cq.kind === 'on' && cq.own ? base : 'quantization');
  }
  return tensors;
}

/** "mxfp4" when `name` (a stacked [experts, rows, cols] weight) is kept in mlx-lm's MXFP4 mode, else null. */
export function mlxMxfp4Of(ckpt: Checkpoint | GgufCheckpoint, name: string): 'mxfp4' | null {
  if (!name.endsWith('.weight') || !('dir' in ckpt)) return null;
  const base = name.slice(0, -'.weight'.length);
  const cq = configQuant(ckpt, base);
  if (cq.kind === 'off' || !ckpt.has(`${base}.scales`)) return null;
  return modeOf(ckpt, base, cq, basename(ckpt.file(name).path)) === 'mxfp4' ? 'mxfp4' : null;
}

/**
 * If `name` — a [rows, cols] linear or embedding weight, or with `experts` a stacked [experts, rows,
 * cols] one (mlx-lm's `switch_mlp`, MLA's per-head `embed_q` / `unembed_out`) — is MLX-quantized in
 * `ckpt` (it has `.scales` next to it), its bits and group size, checked against the shapes and
 * config.json; null when it is stored unquantized (mlx-lm leaves modules whose input is not whole
 * groups, routers that are not Linear layers, and `false` entries in plain floats).
 */
export function mlxQuantOf(ckpt: Checkpoint | GgufCheckpoint, name: string, rows: number, cols: number, experts?: number): MlxQuant | null {
  if (!name.endsWith('.weight') || !('dir' in ckpt) || !ckpt.has(name)) return null;
  const base = name.slice(0, -'.weight'.length);
  const cq = configQuant(ckpt, base);
  const scaled = ckpt.has(`${base}.scales`);
  const file = ckpt.file(name);
  const fname = basename(file.path);
  const cfgPath = join(ckpt.dir, 'config.json');
  if (cq.kind === 'off') {
    if (scaled) throw new ModelFormatError(`config.json: quantization says ${base} is not quantized (false) but ${fname} has ${base}.scales`, cfgPath, base);
    return null;
  }
  if (!scaled) return null;
  const mode = modeOf(ckpt, base, cq, fname);
  if (mode !== 'affine') throw new UnsupportedModelError(`${fname}: ${name} is quantized in MLX mode "${mode}"; Orchard loads mode "affine", and "mxfp4" for stacked experts (gpt-oss)`);
  const lead = experts === undefined ? [] : [experts];
  const w = ckpt.info(name);
  const s = ckpt.info(`${base}.scales`);
  const b = ckpt.has(`${base}.biases`) ? ckpt.info(`${base}.biases`) : null;
  const bad = (why: string, t = name) => new ModelFormatError(`${fname}: MLX-quantized ${t}: ${why}`, file.path, t);
  const dims = [...lead, rows];
  const shaped = (shape: number[]) => shape.length === dims.length + 1 && dims.every((d, i) => shape[i] === d);
  if (w.dtype !== 'U32' || w.shape.length !== dims.length + 1) throw bad(`weight must be U32 [${[...lead, 'rows', 'packed']}], got ${w.dtype} [${w.shape}]`);
  if (!shaped(w.shape)) throw bad(`has shape [${w.shape}], expected [${dims}, packed] from config.json`);
  const packed = w.shape[w.shape.length - 1];
  const bits = (packed * 32) / cols;
  if (!Number.isInteger(bits)) throw bad(`${packed} packed words per row do not hold ${cols} columns at a whole number of bits`);
  if (!MLX_BITS.includes(bits)) throw new UnsupportedModelError(`${fname}: ${name} is ${bits}-bit MLX-quantized; Orchard loads ${MLX_BITS.join(', ')} bits`);
  if (!b) throw bad(`has scales but no ${base}.biases (only MLX's affine mode is supported)`, `${base}.biases`);
  if (!(s.dtype in SCALE_DTYPES) || !shaped(s.shape)) throw bad(`scales must be F16/BF16/F32 [${dims}, groups], got ${s.dtype} [${s.shape}]`, `${base}.scales`);
  if (b.dtype !== s.dtype || b.shape.join() !== s.shape.join()) throw bad(`biases must match scales (${s.dtype} [${s.shape}]), got ${b.dtype} [${b.shape}]`, `${base}.biases`);
  const groupSize = cols / s.shape[s.shape.length - 1];
  if (!MLX_GROUPS.includes(groupSize)) throw new UnsupportedModelError(`${fname}: ${name} has MLX group size ${groupSize}; Orchard loads ${MLX_GROUPS.join(', ')}`);
  if (cq.kind === 'on' && ((cq.bits !== undefined && cq.bits !== bits) || (cq.group_size !== undefined && cq.group_size !== groupSize))) {
    throw new ModelFormatError(
      `config.json: quantization${cq.own ? `["${base}"]` : ''} says bits ${String(cq.bits)}, group_size ${String(cq.group_size)} but ${name} in ${fname} is ${bits}-bit with groups of ${groupSize}`,
      cfgPath,
      cq.own ? base : 'quantization',
    );
  }
  return { bits: bits as MlxQuant['bits'], groupSize: groupSize as MlxQuant['groupSize'] };
}

/**
 * Plans rows r × columns c of an MLX-quantized [rows, cols] weight — or, with `slab`, of matrix `slab`
 * of a stacked [n, rows, cols] one (whole columns only: an expert or a head is never column-split),
 * whose rows are one byte range of the file — as a packed weight of the slice and the reads (words,
 * scales, biases per chunk of rows) that fill it.
 */
export function planMlxMatrix(
  ckpt: Checkpoint,
  name: string,
  q: MlxQuant,
  r: [number, number],
  c: [number, number],
  backend: Pick<Backend, 'allocBytes'>,
  scratch: ReadScratch,
  slab?: number,
): { weight: Weight; reads: PendingRead[] } {
  const base = name.slice(0, -'.weight'.length);
  const file = ckpt.file(name);
  const { bits, groupSize: g } = q;
  if (c[0] % g || c[1] % g) {
    throw new UnsupportedModelError(
      `${basename(file.path)}: cannot split ${name} (MLX ${bits}-bit, groups of ${g}) at columns [${c[0]}, ${c[1]}): a tensor-parallel slice must start and end on a group boundary (a multiple of ${g})`,
    );
  }
  const layout: MlxLayout = { bits, groupSize: g, scales: SCALE_DTYPES[ckpt.info(`${base}.scales`).dtype] };
  const fullCols = (ckpt.info(name).shape.at(-1)! * 32) / bits;
  if (slab !== undefined && (c[0] !== 0 || c[1] !== fullCols)) throw new Error(`planMlxMatrix: ${name} slab ${slab} must be read with all ${fullCols} columns`);
  const dtype = mlxDType(layout);
  const rows = r[1] - r[0];
  const cols = c[1] - c[0];
  const el = layout.scales === 'f32' ? 4 : 2;
  const qBytes = (cols * bits) / 8;
  const groups = cols / g;
  const rb = rowBytes(dtype, cols);
  const weight: Weight = { dtype, rows, cols, bytes: backend.allocBytes(rows * rb) };
  const chunk = Math.max(1, Math.floor(CHUNK_BYTES / qBytes));
  scratch.need(Math.min(chunk, rows) * (qBytes + 2 * groups * el));
  const wordCols: [number, number] = [(c[0] * bits) / 32, (c[1] * bits) / 32];
  const groupCols: [number, number] = [c[0] / g, c[1] / g];
  const reads: PendingRead[] = [];
  for (let r0 = 0; r0 < rows; r0 += chunk) {
    const n = Math.min(chunk, rows - r0);
    const fileRows: [number, number] = [r[0] + r0, r[0] + r0 + n];
    const sOff = n * qBytes;
    const bOff = sOff + n * groups * el;
    const view = (o: number, len: number) => () => scratch.view(o, len);
    // A slab's rows are the elements [row·width, (row + n)·width) of the stacked tensor's row `slab`.
    const at = (cols: [number, number]): [[number, number], [number, number]] => {
      if (slab === undefined) return [fileRows, cols];
      const width = cols[1] - cols[0];
      return [[slab, slab + 1], [fileRows[0] * width, fileRows[1] * width]];
    };
    const [wRows, wCols] = at(wordCols);
    const [gRows, gCols] = at(groupCols);
    reads.push(lazyRead(file, name, view(0, n * qBytes), wRows, wCols));
    reads.push(lazyRead(ckpt.file(`${base}.scales`), `${base}.scales`, view(sOff, n * groups * el), gRows, gCols));
    const interleave = () => interleaveRows(scratch.view(0, bOff + n * groups * el), n, qBytes, groups, el, weight.bytes.subarray(r0 * rb, (r0 + n) * rb));
    reads.push(lazyRead(ckpt.file(`${base}.biases`), `${base}.biases`, view(bOff, n * groups * el), gRows, gCols, interleave));
  }
  return { weight, reads };
}

/**
 * `n` rows from the scratch (all rows' words, then all scales, then all biases) into the packed row
 * layout: each row's words, then (scale, bias) per group.
 */
export function interleaveRows(src: Uint8Array, n: number, qBytes: number, groups: number, el: number, dst: Uint8Array): void {
  const rb = qBytes + 2 * groups * el;
  const sOff = n * qBytes;
  const bOff = sOff + n * groups * el;
  // The rows' bits: a word loop where both buffers are 4-byte aligned (qBytes and rb are multiples of
  // 4: whole 32-column blocks), cheaper than a subarray and a set per row of a few hundred bytes.
  if (src.byteOffset % 4 === 0 && dst.byteOffset % 4 === 0 && qBytes % 4 === 0 && rb % 4 === 0) {
    rows32(new Uint32Array(src.buffer, src.byteOffset, src.byteLength >> 2), new Uint32Array(dst.buffer, dst.byteOffset, dst.byteLength >> 2), n, qBytes >> 2, rb >> 2);
  } else for (let i = 0; i < n; i++) dst.set(src.subarray(i * qBytes, (i + 1) * qBytes), i * rb);
  // (scale, bias) pairs as whole 16- or 32-bit elements where both buffers are aligned to them (every
  // offset is a multiple of el: rows of whole 32-column blocks, scales after n rows of them), bytes
  // otherwise; one loop per element type, so each stays monomorphic.
  const wide = src.byteOffset % el === 0 && dst.byteOffset % el === 0 && qBytes % el === 0;
  if (wide && el === 2) pairs16(new Uint16Array(src.buffer, src.byteOffset, src.byteLength >> 1), new Uint16Array(dst.buffer, dst.byteOffset, dst.byteLength >> 1), n, groups, sOff >> 1, bOff >> 1, rb >> 1, qBytes >> 1);
  else if (wide && el === 4) pairs32(new Uint32Array(src.buffer, src.byteOffset, src.byteLength >> 2), new Uint32Array(dst.buffer, dst.byteOffset, dst.byteLength >> 2), n, groups, sOff >> 2, bOff >> 2, rb >> 2, qBytes >> 2);
  else {
    for (let i = 0; i < n; i++) {
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
}

function rows32(s: Uint32Array, d: Uint32Array, n: number, qw: number, rw: number): void {
  let si = 0;
  for (let i = 0; i < n; i++) {
    let o = i * rw;
    const end = o + qw;
    while (o < end) d[o++] = s[si++];
  }
}

function pairs16(s: Uint16Array, d: Uint16Array, n: number, groups: number, si: number, bi: number, rw: number, qw: number): void {
  for (let i = 0; i < n; i++) {
    let o = i * rw + qw;
    for (let k = 0; k < groups; k++) {
      d[o++] = s[si++];
      d[o++] = s[bi++];
    }
  }
}

function pairs32(s: Uint32Array, d: Uint32Array, n: number, groups: number, si: number, bi: number, rw: number, qw: number): void {
  for (let i = 0; i < n; i++) {
    let o = i * rw + qw;
    for (let k = 0; k < groups; k++) {
      d[o++] = s[si++];
      d[o++] = s[bi++];
    }
  }
}

/**
 * A packed weight's bytes from mlx-lm's three tensors (words of all rows, then scales and biases
 * [rows, groups] in the scale dtype): tests and benchmarks that build weights directly.
 */
export function packMlx(words: Uint8Array, scales: Uint8Array, biases: Uint8Array, rows: number, cols: number, layout: MlxLayout, dst: Uint8Array): void {
  const qBytes = (cols * layout.bits) / 8;
  const groups = cols / layout.groupSize;
  const el = layout.scales === 'f32' ? 4 : 2;
  const src = new Uint8Array(rows * (qBytes + 2 * groups * el));
  src.set(words.subarray(0, rows * qBytes));
  src.set(scales.subarray(0, rows * groups * el), rows * qBytes);
  src.set(biases.subarray(0, rows * groups * el), rows * (qBytes + groups * el));
  interleaveRows(src, rows, qBytes, groups, el, dst);
}

/**
 * `values` [rows, cols] quantized (quantizeMlx) into a weight of `layout` at `dst` (weightBytes of its
 * dtype), scales and biases stored in the layout's scale dtype: tests and benchmarks.
 */
export function quantizeMlxWeight(values: Float32Array, rows: number, cols: number, layout: MlxLayout, dst: Uint8Array): void {
  const { words, scales, biases } = quantizeMlx(values, rows, cols, layout);
  const toBits = layout.scales === 'f16' ? f32ToF16Bits : f32ToBf16Bits;
  const store = (v: Float32Array) => (layout.scales === 'f32' ? new Uint8Array(v.buffer) : new Uint8Array(Uint16Array.from(v, toBits).buffer));
  packMlx(new Uint8Array(words.buffer), store(scales), store(biases), rows, cols, layout, dst);
}

/** The scale and bias of group k of a packed row at byte `o` (row start), as f32. */
function groupAffine(bytes: Uint8Array, o: number, layout: MlxLayout, qBytes: number, k: number): [number, number] {
  if (layout.scales === 'f32') {
    const v = new DataView(bytes.buffer, bytes.byteOffset + o + qBytes + 8 * k, 8);
    return [v.getFloat32(0, true), v.getFloat32(4, true)];
  }
  const p = o + qBytes + 4 * k;
  const table = layout.scales === 'f16' ? F16_TO_F32 : BF16_TO_F32;
  return [table[bytes[p] | (bytes[p + 1] << 8)], table[bytes[p + 2] | (bytes[p + 3] << 8)]];
}

/** Element j's q from a row's packed bit stream starting at byte `o`. */
export function mlxQ(bytes: Uint8Array, o: number, bits: number, j: number): number {
  const bit = j * bits;
  const at = o + (bit >> 3);
  // (bit & 7) + bits <= 15: two bytes always hold the element
  return ((bytes[at] | (bytes[at + 1] << 8)) >> (bit & 7)) & ((1 << bits) - 1);
}

/** Row `r` of a packed MLX weight as f32 values into `dst`: w = f32(f32(scale·q) + bias). */
export function dequantizeMlxRow(dtype: MlxDType, bytes: Uint8Array, cols: number, r: number, dst: Float32Array): void {
  const layout = mlxLayout(dtype);
  const o = r * rowBytes(dtype, cols);
  const qBytes = (cols * layout.bits) / 8;
  const g = layout.groupSize;
  for (let k = 0; k < cols / g; k++) {
    const [s, b] = groupAffine(bytes, o, layout, qBytes, k);
    for (let j = k * g; j < (k + 1) * g; j++) dst[j] = Math.fround(Math.fround(mlxQ(bytes, o, layout.bits, j) * s) + b);
  }
}

/**
 * MLX's affine quantizer (mlx.core.quantize): per group, scale = (max − min)/(2^bits − 1), bias = min,
 * q = round((w − bias)/scale). For tests and benchmarks that build MLX-format checkpoints. Returns the
 * rows' packed words (mlx-lm's layout) and f32 scales/biases (callers store them in their dtype).
 */
export function quantizeMlx(values: Float32Array, rows: number, cols: number, q: MlxQuant): { words: Uint32Array; scales: Float32Array; biases: Float32Array } {
  const { bits, groupSize: g } = q;
  if (cols % g) throw new Error(`quantizeMlx: ${cols} columns are not whole groups of ${g}`);
  const levels = (1 << bits) - 1;
  const words = new Uint32Array((rows * cols * bits) / 32);
  const scales = new Float32Array((rows * cols) / g);
  const biases = new Float32Array((rows * cols) / g);
  for (let gi = 0; gi < scales.length; gi++) {
    const base = gi * g;
    let min = Infinity;
    let max = -Infinity;
    for (let j = 0; j < g; j++) {
      min = Math.min(min, values[base + j]);
      max = Math.max(max, values[base + j]);
    }
    const scale = max > min ? (max - min) / levels : 1;
    scales[gi] = scale;
    biases[gi] = min;
    for (let j = 0; j < g; j++) {
      const qv = Math.max(0, Math.min(levels, Math.round((values[base + j] - min) / scale)));
      // element e of the whole matrix: rows are whole words (cols·bits is a multiple of 32)
      const bit = (base + j) * bits;
      words[bit >>> 5] |= qv << (bit & 31);
      if ((bit & 31) + bits > 32) words[(bit >>> 5) + 1] |= qv >>> (32 - (bit & 31));
    }
  }
  return { words, scales, biases };
}
