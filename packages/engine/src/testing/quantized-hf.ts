/**
 * Turns a Hugging Face model directory (from writeRandomModel, one safetensors file) into the layouts
 * the big official checkpoints ship, for tests:
 * - `writeFp8Model`: DeepSeek V3/R1 and Kimi K2's FP8 (`quant_method: "fp8"`): every linear of the
 *   layers (attention projections, dense MLP, routed and shared experts) as F8_E4M3 `X.weight` + F32
 *   `X.weight_scale_inv` [ceil(out/128), ceil(in/128)]; the embedding, the LM head, every norm, the
 *   router (`mlp.gate.weight`) and `e_score_correction_bias` as the source has them (BF16 / F32 in
 *   DeepSeek's files).
 * - `writeInt4PackedModel`: Kimi-K2-Thinking's compressed-tensors `pack-quantized` INT4: only the routed
 *   experts (`mlp.experts.N.*_proj`) as `X.weight_packed` I32 [out, in/8] + `X.weight_scale` (model
 *   dtype) [out, in/group] + `X.weight_shape` I32 [2]; everything else BF16, as Kimi's `ignore` list
 *   (attention, shared experts, dense MLPs, lm_head) and targets (Linear only: not the router) leave it.
 * Both shard the tensors over `shards` files named as DeepSeek's (model-00001-of-000163.safetensors)
 * with model.safetensors.index.json (`metadata.total_size`, `weight_map`), and optionally write the
 * float reference: the same model with every quantized weight as F32 holding exactly its dequantized
 * values (the rest unchanged, no quantization_config).
 */
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BF16_TO_F32, F16_TO_F32, f32ToBf16Bits, f32ToF16Bits } from '../numeric/half.js';
import { Checkpoint } from '../safetensors/checkpoint.js';
import { type TensorToWrite, writeSafetensors } from '../safetensors/writer.js';
import { E4M3_TO_F32, quantizeFp8Blocks } from '../quant/fp8.js';
import { quantizeInt4Packed } from '../quant/int4-packed.js';
import { FP8_BLOCK } from '../kernels/wasm/formats.js';
import { isIgnored } from '../config/quantization.js';

export interface QuantizedHfOptions {
  /** Safetensors files to spread the tensors over. @default 2 */
  shards?: number;
  /** Write the dequantized F32 reference model here. */
  referenceDir?: string;
}

/** DeepSeek V3's quantization_config, field for field. */
export const DEEPSEEK_FP8_QUANTIZATION_CONFIG = { activation_scheme: 'dynamic', fmt: 'e4m3', quant_method: 'fp8', weight_block_size: [128, 128] };

/** Kimi-K2-Thinking's quantization_config (compressed-tensors 0.12 fields), with `groupSize`. */
export function kimiInt4QuantizationConfig(groupSize = 32): Record<string, unknown> {
  return {
    config_groups: {
      group_0: {
        input_activations: null,
        output_activations: null,
        targets: ['Linear'],
        weights: {
          actorder: null,
          block_structure: null,
          dynamic: false,
          group_size: groupSize,
          num_bits: 4,
          observer: 'minmax',
          observer_kwargs: {},
          strategy: 'group',
          symmetric: true,
          type: 'int',
        },
      },
    },
    format: 'pack-quantized',
    ignore: ['lm_head', 're:.*self_attn.*', 're:.*shared_experts.*', 're:.*mlp\\.(gate|up|gate_up|down)_proj.*'],
    kv_cache_scheme: null,
    quant_method: 'compressed-tensors',
    quantization_status: 'compressed',
  };
}

/** Linear weights DeepSeek's FP8 release keeps in blocks: the layers' projections, not norms, router, embedding or head. */
const FP8_LINEAR = /^model\.layers\.\d+\.(self_attn|mlp)\..*(proj|proj_with_mqa)\.weight$/;

/**
 * `scaleDtype`: the dtype of `weight_scale_inv`: F32 as DeepSeek and Kimi ship it (default), BF16 as
 * Qwen3's FP8 repositories (e.g. Qwen3-30B-A3B-FP8), F16 as some Qwen3 2507 FP8 files. `embeddings`: the
 * embedding and LM head in FP8 blocks too (not what the official releases do; some conversions do).
 */
export function writeFp8Model(src: string, dst: string, options: QuantizedHfOptions & { scaleDtype?: 'F32' | 'BF16' | 'F16'; embeddings?: boolean } = {}): void {
  const sd = options.scaleDtype ?? 'F32';
  const bits = sd === 'F16' ? f32ToF16Bits : f32ToBf16Bits;
  const table = sd === 'F16' ? F16_TO_F32 : BF16_TO_F32;
  convert(src, dst, options, DEEPSEEK_FP8_QUANTIZATION_CONFIG, (name, info, values) => {
    const tables = options.embeddings && (name === 'model.embed_tokens.weight' || name === 'lm_head.weight');
    if ((!FP8_LINEAR.test(name) && !tables) || info.shape.length !== 2) return null;
    const [rows, cols] = info.shape;
    const { codes, scaleInv } = quantizeFp8Blocks(values, rows, cols, sd === 'F32' ? Math.fround : (v) => table[bits(v)]);
    const deq = new Float32Array(rows * cols);
    const bc = Math.ceil(cols / FP8_BLOCK);
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) deq[r * cols + c] = Math.fround(E4M3_TO_F32[codes[r * cols + c]] * scaleInv[Math.floor(r / FP8_BLOCK) * bc + Math.floor(c / FP8_BLOCK)]);
    }
    return {
      tensors: [
        { name, dtype: 'F8_E4M3', shape: [rows, cols], data: codes },
        {
          name: `${name}_scale_inv`,
          dtype: sd,
          shape: [Math.ceil(rows / FP8_BLOCK), bc],
          data: sd === 'F32' ? new Uint8Array(scaleInv.buffer) : new Uint8Array(Uint16Array.from(scaleInv, bits).buffer),
        },
      ],
      dequantized: deq,
    };
  });
}

export function writeInt4PackedModel(src: string, dst: string, options: QuantizedHfOptions & { groupSize?: 32 | 64 | 128 } = {}): void {
  const g = options.groupSize ?? 32;
  const config = kimiInt4QuantizationConfig(g);
  const ignore = config.ignore as string[];
  convert(src, dst, options, config, (name, info, values) => {
    // compressed-tensors targets nn.Linear modules: the routed experts' projections are the ones Kimi's ignore list leaves
    const base = name.slice(0, -'.weight'.length);
    if (!/^model\.layers\.\d+\.mlp\.experts\.\d+\.(gate|up|down)_proj\.weight$/.test(name) || isIgnored(ignore, base)) return null;
    const [rows, cols] = info.shape;
    const half = info.dtype === 'F16' ? f32ToF16Bits : f32ToBf16Bits;
    const table = info.dtype === 'F16' ? F16_TO_F32 : BF16_TO_F32;
    // scales stored in the model dtype, and the quantizer divides by the stored value
    const round = info.dtype === 'F32' ? Math.fround : (v: number) => table[half(v)];
    const { words, scales } = quantizeInt4Packed(values, rows, cols, g, round);
    const deq = new Float32Array(rows * cols);
    const wpr = Math.ceil(cols / 8);
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        const q = ((words[r * wpr + (c >> 3)] >>> (4 * (c & 7))) & 15) - 8;
        deq[r * cols + c] = Math.fround(q * scales[r * (cols / g) + Math.floor(c / g)]);
      }
    }
    const sRaw = info.dtype === 'F32' ? new Uint8Array(scales.buffer) : new Uint8Array(Uint16Array.from(scales, half).buffer);
    return {
      tensors: [
        { name: `${base}.weight_packed`, dtype: 'I32', shape: [rows, wpr], data: new Uint8Array(words.buffer) },
        { name: `${base}.weight_scale`, dtype: info.dtype, shape: [rows, cols / g], data: sRaw },
        { name: `${base}.weight_shape`, dtype: 'I32', shape: [2], data: new Uint8Array(Int32Array.from([rows, cols]).buffer) },
      ],
      dequantized: deq,
    };
  });
}

type Quantizer = (name: string, info: { dtype: string; shape: number[] }, values: Float32Array) => { tensors: TensorToWrite[]; dequantized: Float32Array } | null;

function convert(src: string, dst: string, options: QuantizedHfOptions, quantizationConfig: Record<string, unknown>, quantize: Quantizer): void {
  const shards = options.shards ?? 2;
  const ck = Checkpoint.open(src);
  const out: TensorToWrite[] = [];
  const reference: TensorToWrite[] = [];
  try {
    for (const name of [...ck.file('model.embed_tokens.weight').tensors.keys()]) {
      const info = ck.info(name);
      const n = info.shape.reduce((a, b) => a * b, 1);
      const rows = info.shape.length === 1 ? 1 : info.shape[0];
      const raw = new Uint8Array(n * (info.dtype === 'F32' ? 4 : 2));
      ck.file(name).readBlock(name, raw, 0, rows, 0, n / rows);
      const values = widen(raw, info.dtype);
      const q = quantize(name, info, values);
      // DeepSeek's and Kimi's files keep the router's correction bias in F32 whatever the model dtype
      const kept = name.endsWith('.e_score_correction_bias')
        ? { name, dtype: 'F32', shape: info.shape, data: new Uint8Array(values.buffer, values.byteOffset, values.byteLength) }
        : { name, dtype: info.dtype, shape: info.shape, data: raw };
      out.push(...(q ? q.tensors : [kept]));
      reference.push(q ? { name, dtype: 'F32', shape: info.shape, data: new Uint8Array(q.dequantized.buffer) } : kept);
    }
  } finally {
    ck.close();
  }
  writeDir(src, dst, out, shards, (c) => ({ ...c, quantization_config: quantizationConfig }));
  if (options.referenceDir) writeDir(src, options.referenceDir, reference, shards, (c) => c);
}

/** `src`'s other files, config.json edited, and `tensors` over `shards` files with their index. */
function writeDir(src: string, dst: string, tensors: TensorToWrite[], shards: number, edit: (c: Record<string, unknown>) => Record<string, unknown>): void {
  cpSync(src, dst, { recursive: true });
  rmSync(join(dst, 'model.safetensors'), { force: true });
  const config = JSON.parse(readFileSync(join(src, 'config.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(dst, 'config.json'), JSON.stringify(edit(config), null, 2));
  const weightMap: Record<string, string> = {};
  let total = 0;
  const per = Math.ceil(tensors.length / shards);
  for (let s = 0; s < shards; s++) {
    const file = `model-${String(s + 1).padStart(5, '0')}-of-${String(shards).padStart(6, '0')}.safetensors`;
    const part = tensors.slice(s * per, (s + 1) * per);
    writeSafetensors(join(dst, file), part, { format: 'pt' });
    for (const t of part) {
      weightMap[t.name] = file;
      total += t.data.byteLength;
    }
  }
  writeFileSync(join(dst, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2));
}

function widen(raw: Uint8Array, dtype: string): Float32Array {
  if (dtype === 'F32') return new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
  const h = new Uint16Array(raw.buffer, raw.byteOffset, raw.byteLength / 2);
  const table = dtype === 'F16' ? F16_TO_F32 : BF16_TO_F32;
  return Float32Array.from(h, (v) => table[v]);
}
