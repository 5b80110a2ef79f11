/**
 * MLX affine-quantized linears (mlx-community checkpoints; `quantization: {group_size, bits}` in
 * config.json). Each quantized `X.weight` is stored as three tensors:
 * - `X.weight`: uint32 [out, in·bits/32]; element j of a row sits in word ⌊j·bits/32⌋ at bit
 *   (j·bits) mod 32 (little end first);
 * - `X.scales`, `X.biases`: [out, in/group_size] in the model dtype;
 * - value = q·scale + bias, q unsigned (0..2^bits−1).
 *
 * Storage decision: value = q·s + b per group is not a GGUF block format (Q8_0/Q4_0 have no offset
 * term, so no exact repack exists) and the WASM kernels have no affine kernel, so the loader
 * DEQUANTIZES AT LOAD into the dtype of the scales (F16 → f16, BF16 → bf16, F32 → f32): value computed
 * in f32, rounded once to that dtype. Memory is therefore 16 bits per weight (not 4/8) on this path.
 * Bits 4 and 8, group sizes 32/64/128. A tensor-parallel column slice must start and end on a group.
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { ModelFormatError, UnsupportedModelError } from '../errors.js';
import type { Backend, DType, Weight } from '../kernels/backend.js';
import { BF16_TO_F32, F16_TO_F32, f32ToBf16Bits, f32ToF16Bits } from '../numeric/half.js';
import type { Checkpoint } from '../safetensors/checkpoint.js';
import type { GgufCheckpoint } from '../gguf/read-model.js';
import type { PendingRead } from '../model/weights.js';

export interface MlxQuant {
  bits: 4 | 8;
  groupSize: number;
}

const SCALE_DTYPES: Record<string, DType> = { F16: 'f16', BF16: 'bf16', F32: 'f32' };

/** config.json's `quantization` for module `base` (a per-module entry wins over the global one), or null. */
function configQuant(dir: string, base: string): { bits?: unknown; group_size?: unknown } | null {
  const path = join(dir, 'config.json');
  if (!existsSync(path)) return null;
  try {
    const c = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
    const q = (c.quantization ?? c.quantization_config) as Record<string, unknown> | undefined;
    if (!q || typeof q !== 'object') return null;
    const own = q[base];
    if (own && typeof own === 'object') return own as { bits?: unknown; group_size?: unknown };
    return q as { bits?: unknown; group_size?: unknown };
  } catch {
    return null; // config.json itself is validated (with a named error) by loadModelConfig
  }
}

/**
 * If `name` (a [rows, cols] linear weight) is MLX-quantized in `ckpt` — it has `.scales` next to it —
 * its bits and group size, checked against the shapes and config.json; null for a plain tensor.
 */
export function mlxQuantOf(ckpt: Checkpoint | GgufCheckpoint, name: string, rows: number, cols: number): MlxQuant | null {
  if (!name.endsWith('.weight') || !('dir' in ckpt)) return null;
  const base = name.slice(0, -'.weight'.length);
  if (!ckpt.has(`${base}.scales`)) return null;
  const file = ckpt.file(name);
  const fname = basename(file.path);
  const w = ckpt.info(name);
  const s = ckpt.info(`${base}.scales`);
  const b = ckpt.info(`${base}.biases`);
  const bad = (why: string, t = name) => new ModelFormatError(`${fname}: MLX-quantized ${t}: ${why}`, file.path, t);
  if (w.dtype !== 'U32' || w.shape.length !== 2) throw bad(`weight must be U32 [rows, packed], got ${w.dtype} [${w.shape}]`);
  if (w.shape[0] !== rows) throw bad(`has ${w.shape[0]} rows, expected ${rows} from config.json`);
  const bits = (w.shape[1] * 32) / cols;
  if (!Number.isInteger(bits)) throw bad(`${w.shape[1]} packed words per row do not hold ${cols} columns at a whole number of bits`);
  if (bits !== 4 && bits !== 8) throw new UnsupportedModelError(`${fname}: ${name} is ${bits}-bit MLX-quantized; Orchard loads 4 and 8 bits`);
  if (!(s.dtype in SCALE_DTYPES) || s.shape.length !== 2 || s.shape[0] !== rows) throw bad(`scales must be F16/BF16/F32 [${rows}, groups], got ${s.dtype} [${s.shape}]`, `${base}.scales`);
  if (b.dtype !== s.dtype || b.shape.join() !== s.shape.join()) throw bad(`biases must match scales (${s.dtype} [${s.shape}]), got ${b.dtype} [${b.shape}]`, `${base}.biases`);
  const groupSize = cols / s.shape[1];
  if (![32, 64, 128].includes(groupSize)) throw new UnsupportedModelError(`${fname}: ${name} has MLX group size ${groupSize}; Orchard loads 32, 64 and 128`);
  const cq = configQuant(ckpt.dir, base);
  if (cq && ((cq.bits !== undefined && cq.bits !== bits) || (cq.group_size !== undefined && cq.group_size !== groupSize))) {
    throw new ModelFormatError(
      `config.json: quantization says bits ${String(cq.bits)}, group_size ${String(cq.group_size)} but ${name} in ${fname} is ${bits}-bit with groups of ${groupSize}`,
      join(ckpt.dir, 'config.json'),
      'quantization',
    );
  }
  return { bits, groupSize };
}

/**
 * Plans rows r × columns c of an MLX-quantized [rows, cols] weight: reads the packed words, scales
 * and biases of the block, then dequantizes into a weight of the scales' dtype.
 */
export function planMlxMatrix(
  ckpt: Checkpoint,
  name: string,
  q: MlxQuant,
  r: [number, number],
  c: [number, number],
  backend: Backend,
): { weight: Weight; reads: PendingRead[] } {
  const base = name.slice(0, -'.weight'.length);
  const file = ckpt.file(name);
  const { bits, groupSize: g } = q;
  if (c[0] % g || c[1] % g) {
    throw new UnsupportedModelError(
      `${basename(file.path)}: cannot split ${name} (MLX ${bits}-bit, groups of ${g}) at columns [${c[0]}, ${c[1]}): a tensor-parallel slice must start and end on a group boundary`,
    );
  }
  const sInfo = ckpt.info(`${base}.scales`);
  const dtype = SCALE_DTYPES[sInfo.dtype];
  const rows = r[1] - r[0];
  const cols = c[1] - c[0];
  const perWord = 32 / bits;
  const words = new Uint32Array((rows * cols) / perWord);
  const groups = (rows * cols) / g;
  const el = dtype === 'f32' ? 4 : 2;
  const scales = new Uint8Array(groups * el);
  const biases = new Uint8Array(groups * el);
  const weight: Weight = { dtype, rows, cols, bytes: backend.allocBytes(rows * cols * el) };
  const gc: [number, number] = [c[0] / g, c[1] / g];
  const reads: PendingRead[] = [
    { file, name, dest: new Uint8Array(words.buffer), rows: r, cols: [c[0] / perWord, c[1] / perWord] },
    { file: ckpt.file(`${base}.scales`), name: `${base}.scales`, dest: scales, rows: r, cols: gc },
    {
      file: ckpt.file(`${base}.biases`),
      name: `${base}.biases`,
      dest: biases,
      rows: r,
      cols: gc,
      after: () => dequantizeMlx(words, widen(scales, dtype), widen(biases, dtype), rows, cols, q, dtype, weight.bytes),
    },
  ];
  return { weight, reads };
}

function widen(bytes: Uint8Array, dtype: DType): Float32Array {
  if (dtype === 'f32') return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  const bits = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
  const table = dtype === 'f16' ? F16_TO_F32 : BF16_TO_F32;
  return Float32Array.from(bits, (b) => table[b]);
}

/**
 * value[r, j] = q[r, j]·scale[r, ⌊j/g⌋] + bias[r, ⌊j/g⌋] (f32), written as `dtype` into `out`
 * ([rows, cols] row-major). `words` holds the rows' packed uint32 words back to back.
 */
export function dequantizeMlx(
  words: Uint32Array,
  scales: Float32Array,
  biases: Float32Array,
  rows: number,
  cols: number,
  q: MlxQuant,
  dtype: DType,
  out: Uint8Array,
): void {
  const { bits, groupSize: g } = q;
  const perWord = 32 / bits;
  const mask = (1 << bits) - 1;
  const gpr = cols / g;
  const f32 = dtype === 'f32' ? new Float32Array(out.buffer, out.byteOffset, rows * cols) : null;
  const u16 = dtype === 'f32' ? null : new Uint16Array(out.buffer, out.byteOffset, rows * cols);
  const toBits = dtype === 'bf16' ? f32ToBf16Bits : f32ToF16Bits;
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < cols; j++) {
      const word = words[(r * cols + j) / perWord | 0];
      const qv = (word >>> ((j % perWord) * bits)) & mask;
      const gi = r * gpr + ((j / g) | 0);
      const v = Math.fround(Math.fround(qv * scales[gi]) + biases[gi]);
      if (f32) f32[r * cols + j] = v;
      else u16![r * cols + j] = toBits(v);
    }
  }
}

/**
 * MLX's affine quantizer (mlx.core.quantize): per group, scale = (max − min)/(2^bits − 1), bias = min,
 * q = round((w − bias)/scale). For tests and benchmarks that build MLX-format checkpoints.
 * Returns packed words and f32 scales/biases (callers store them in their dtype).
 */
export function quantizeMlx(values: Float32Array, rows: number, cols: number, q: MlxQuant): { words: Uint32Array; scales: Float32Array; biases: Float32Array } {
  const { bits, groupSize: g } = q;
  if (cols % g) throw new Error(`quantizeMlx: ${cols} columns are not whole groups of ${g}`);
  const levels = (1 << bits) - 1;
  const perWord = 32 / bits;
  const words = new Uint32Array((rows * cols) / perWord);
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
      const e = base + j;
      words[(e / perWord) | 0] |= qv << ((e % perWord) * bits);
    }
  }
  return { words, scales, biases };
}
