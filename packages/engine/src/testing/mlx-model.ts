/**
 * Turns a Hugging Face model directory (e.g. from writeRandomModel) into an MLX-quantized checkpoint
 * in mlx-lm's layout, for tests and benchmarks: every linear and the embedding (as mlx-lm's
 * quantize_model does for nn.Linear / nn.Embedding whose input size is a multiple of the group size)
 * becomes `X.weight` uint32 [out, in·bits/32] + `X.scales` + `X.biases` [out, in/group] in the
 * model's dtype; config.json gets `quantization` and `quantization_config` (both, as mlx-lm writes
 * them) with per-module entries for overrides. Optionally also writes an F32 directory holding exactly
 * the dequantized values f32(f32(scale·q) + bias): the float reference the engine must match.
 */
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BF16_TO_F32, F16_TO_F32, f32ToBf16Bits, f32ToF16Bits } from '../numeric/half.js';
import { Checkpoint } from '../safetensors/checkpoint.js';
import { type TensorToWrite, writeSafetensors } from '../safetensors/writer.js';
import { type MlxQuant, quantizeMlx } from '../quant/mlx.js';

export interface MlxModelOptions {
  bits: MlxQuant['bits'];
  groupSize: MlxQuant['groupSize'];
  /** Per-module quantization (module path without `.weight`), e.g. a down_proj at 8 bits. */
  overrides?: Record<string, MlxQuant>;
  /** Write the dequantized F32 model here (same config and tokenizer, no `quantization`). */
  referenceDir?: string;
}

const QUANTIZED = /(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj|embed_tokens|lm_head)\.weight$/;

/** Converts the single-file HF model in `src` to MLX layout in `dst`. */
export function writeMlxModel(src: string, dst: string, options: MlxModelOptions): void {
  cpSync(src, dst, { recursive: true });
  if (options.referenceDir) cpSync(src, options.referenceDir, { recursive: true });
  const ck = Checkpoint.open(src);
  const quantized: TensorToWrite[] = [];
  const reference: TensorToWrite[] = [];
  try {
    for (const name of [...ck.file('model.embed_tokens.weight').tensors.keys()]) {
      const info = ck.info(name);
      const n = info.shape.reduce((a, b) => a * b, 1);
      const rows = info.shape.length === 1 ? 1 : info.shape[0];
      const raw = new Uint8Array(n * (info.dtype === 'F32' ? 4 : 2));
      ck.file(name).readBlock(name, raw, 0, rows, 0, n / rows);
      const base = name.slice(0, -'.weight'.length);
      const q = options.overrides?.[base] ?? options;
      if (!QUANTIZED.test(name) || (n / rows) % q.groupSize) {
        quantized.push({ name, dtype: info.dtype, shape: info.shape, data: raw });
        reference.push({ name, dtype: info.dtype, shape: info.shape, data: raw });
        continue;
      }
      const values = widen(raw, info.dtype);
      const cols = n / rows;
      const { words, scales, biases } = quantizeMlx(values, rows, cols, q);
      // scales and biases in the model's dtype, as mlx-lm stores them; the reference uses the stored values
      const [sRaw, sVal] = narrow(scales, info.dtype);
      const [bRaw, bVal] = narrow(biases, info.dtype);
      quantized.push({ name, dtype: 'U32', shape: [rows, (cols * q.bits) / 32], data: new Uint8Array(words.buffer) });
      quantized.push({ name: `${base}.scales`, dtype: info.dtype, shape: [rows, cols / q.groupSize], data: sRaw });
      quantized.push({ name: `${base}.biases`, dtype: info.dtype, shape: [rows, cols / q.groupSize], data: bRaw });
      if (!options.referenceDir) continue;
      const deq = dequantizeMlxValues(words, sVal, bVal, n, q);
      reference.push({ name, dtype: 'F32', shape: info.shape, data: new Uint8Array(deq.buffer) });
    }
  } finally {
    ck.close();
  }
  writeSafetensors(join(dst, 'model.safetensors'), quantized);
  const cfgPath = join(dst, 'config.json');
  const cfg = JSON.parse(readFileSync(cfgPath, 'utf8'));
  const quantization: Record<string, unknown> = { group_size: options.groupSize, bits: options.bits };
  for (const [module, q] of Object.entries(options.overrides ?? {})) quantization[module] = { group_size: q.groupSize, bits: q.bits };
  cfg.quantization = quantization;
  cfg.quantization_config = quantization;
  writeFileSync(cfgPath, JSON.stringify(cfg, null, 2));
  if (options.referenceDir) {
    writeSafetensors(join(options.referenceDir, 'model.safetensors'), reference);
    const refCfg = JSON.parse(readFileSync(join(options.referenceDir, 'config.json'), 'utf8'));
    refCfg.torch_dtype = 'float32';
    writeFileSync(join(options.referenceDir, 'config.json'), JSON.stringify(refCfg, null, 2));
  }
}

function widen(raw: Uint8Array, dtype: string): Float32Array {
  if (dtype === 'F32') return new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
  const bits = new Uint16Array(raw.buffer, raw.byteOffset, raw.byteLength / 2);
  const table = dtype === 'F16' ? F16_TO_F32 : BF16_TO_F32;
  return Float32Array.from(bits, (b) => table[b]);
}

/** f32 values stored in `dtype`: the stored bytes and the values they hold. */
function narrow(v: Float32Array, dtype: string): [Uint8Array, Float32Array] {
  if (dtype === 'F32') return [new Uint8Array(v.slice().buffer), v];
  const toBits = dtype === 'F16' ? f32ToF16Bits : f32ToBf16Bits;
  const table = dtype === 'F16' ? F16_TO_F32 : BF16_TO_F32;
  const bits = Uint16Array.from(v, toBits);
  return [new Uint8Array(bits.buffer), Float32Array.from(bits, (b) => table[b])];
}

/** f32(f32(scale·q) + bias) of `n` packed elements, row-major: the values an MLX reader gets back. */
export function dequantizeMlxValues(words: Uint32Array, scales: Float32Array, biases: Float32Array, n: number, q: MlxQuant): Float32Array {
  const out = new Float32Array(n);
  const mask = (1 << q.bits) - 1;
  for (let i = 0; i < n; i++) {
    const bit = i * q.bits;
    const [w, b] = [bit >>> 5, bit & 31];
    const qv = ((words[w] >>> b) | (b + q.bits > 32 ? words[w + 1] << (32 - b) : 0)) & mask;
    const g = Math.floor(i / q.groupSize);
    out[i] = Math.fround(Math.fround(qv * scales[g]) + biases[g]);
  }
  return out;
}
