/**
 * config.json's `quantization_config`: which weight quantization a Hugging Face checkpoint declares,
 * checked before any weight is read. Pure (the parsed JSON in, a description or a named refusal out).
 *
 * - `quant_method: "fp8"` (DeepSeek V3/V3.1/R1, Kimi K2, Qwen3 *-FP8): E4M3 weights in 128×128 blocks
 *   with `weight_scale_inv` (quant/fp8.ts); `fmt` e4m3, `weight_block_size` [128, 128], dynamic
 *   activations (computed in f32 here) are what Orchard loads.
 * - `quant_method: "compressed-tensors"` with `format: "pack-quantized"` (Kimi-K2-Thinking): symmetric
 *   INT4 weights per group (`weight_packed`, `weight_scale`, `weight_shape`; quant/int4-packed.ts); the
 *   `ignore` list names modules kept in BF16 (names, or `re:` regular expressions).
 * - No `quant_method` (plain models; mlx-lm writes `quantization_config` without one), `"mlx"` and
 *   `"mxfp4"` (gpt-oss, read per tensor by quant/mxfp4-hf.ts): nothing to declare here.
 * - Anything else (awq, gptq, bitsandbytes, hqq, eetq, fbgemm_fp8, marlin, …) is refused naming the method.
 */
import { UnsupportedModelError } from '../errors.js';

export type WeightQuant =
  | { method: 'fp8'; blockSize: [128, 128] }
  | { method: 'compressed-tensors'; bits: 4; groupSize: 32 | 64 | 128; ignore: string[] };

/** Group sizes the INT4 layout runs (the MLX 4-bit kernels' groups). */
export const INT4_GROUPS: readonly number[] = [32, 64, 128];

/** Methods that need no declaration here: their tensors say what they are (MLX's `.scales`, gpt-oss's `_blocks`). */
const SELF_DESCRIBED = new Set(['mxfp4', 'mlx']);

/** The weight quantization config.json declares (null: none, MLX or gpt-oss MXFP4); refusals name the field and `path`. */
export function readWeightQuant(c: Record<string, unknown>, path: string): WeightQuant | null {
  const q = c.quantization_config;
  if (q == null || typeof q !== 'object' || Array.isArray(q)) return null;
  const qc = q as Record<string, unknown>;
  const method = qc.quant_method;
  if (method === undefined) return null;
  const refuse = (field: string, why: string) => new UnsupportedModelError(`config.json: quantization_config.${field} ${why} in ${path}`);
  if (typeof method !== 'string') throw refuse('quant_method', `is ${JSON.stringify(method)}, not a method name`);
  if (SELF_DESCRIBED.has(method)) return null;
  if (method === 'fp8') return fp8Config(qc, refuse);
  if (method === 'compressed-tensors') return compressedTensorsConfig(qc, refuse);
  throw refuse(
    'quant_method',
    `"${method}" is not supported (Orchard loads "fp8" block-scaled E4M3, "compressed-tensors" pack-quantized INT4, gpt-oss "mxfp4", MLX and GGUF quantizations)`,
  );
}

type Refuse = (field: string, why: string) => Error;

function fp8Config(q: Record<string, unknown>, refuse: Refuse): WeightQuant {
  if (q.fmt !== undefined && q.fmt !== 'e4m3') throw refuse('fmt', `"${String(q.fmt)}" is not supported (FP8 weights in e4m3 only)`);
  const bs = q.weight_block_size;
  if (bs == null) throw refuse('weight_block_size', 'is missing: per-tensor FP8 scales are not supported (128×128 blocks only)');
  if (!Array.isArray(bs) || bs.length !== 2 || bs[0] !== 128 || bs[1] !== 128) {
    throw refuse('weight_block_size', `${JSON.stringify(bs)} is not supported (128×128 blocks only)`);
  }
  if (q.activation_scheme !== undefined && q.activation_scheme !== 'dynamic') {
    throw refuse('activation_scheme', `"${String(q.activation_scheme)}" is not supported (dynamic only)`);
  }
  return { method: 'fp8', blockSize: [128, 128] };
}

function compressedTensorsConfig(q: Record<string, unknown>, refuse: Refuse): WeightQuant {
  if (q.format !== 'pack-quantized') throw refuse('format', `${JSON.stringify(q.format)} is not supported (compressed-tensors "pack-quantized" only)`);
  const groups = q.config_groups;
  if (!groups || typeof groups !== 'object' || Array.isArray(groups) || !Object.keys(groups).length) {
    throw refuse('config_groups', 'is missing or empty');
  }
  let groupSize: number | undefined;
  for (const [name, g] of Object.entries(groups as Record<string, unknown>)) {
    const field = `config_groups.${name}`;
    const gr = (g ?? {}) as Record<string, unknown>;
    if (gr.input_activations != null) throw refuse(`${field}.input_activations`, 'is set: quantized activations are not supported (weight-only INT4)');
    if (gr.output_activations != null) throw refuse(`${field}.output_activations`, 'is set: quantized activations are not supported (weight-only INT4)');
    const w = gr.weights as Record<string, unknown> | undefined;
    if (!w || typeof w !== 'object') throw refuse(`${field}.weights`, 'is missing');
    const want: [string, unknown][] = [
      ['type', 'int'],
      ['num_bits', 4],
      ['symmetric', true],
      ['strategy', 'group'],
    ];
    for (const [k, v] of want) {
      if (w[k] !== v) throw refuse(`${field}.weights.${k}`, `${JSON.stringify(w[k])} is not supported (Orchard loads ${k} ${JSON.stringify(v)})`);
    }
    if (w.dynamic !== undefined && w.dynamic !== false) throw refuse(`${field}.weights.dynamic`, `${JSON.stringify(w.dynamic)} is not supported`);
    if (w.actorder != null && w.actorder !== false) throw refuse(`${field}.weights.actorder`, `${JSON.stringify(w.actorder)} is not supported (no activation reordering)`);
    if (typeof w.group_size !== 'number' || !INT4_GROUPS.includes(w.group_size)) {
      throw refuse(`${field}.weights.group_size`, `${JSON.stringify(w.group_size)} is not supported (${INT4_GROUPS.join(', ')})`);
    }
    if (groupSize !== undefined && groupSize !== w.group_size) throw refuse(`${field}.weights.group_size`, `${w.group_size} differs from another group's ${groupSize}`);
    groupSize = w.group_size;
  }
  const ignore = q.ignore ?? [];
  if (!Array.isArray(ignore) || ignore.some((s) => typeof s !== 'string')) throw refuse('ignore', 'must be a list of module names');
  return { method: 'compressed-tensors', bits: 4, groupSize: groupSize as 32 | 64 | 128, ignore: ignore as string[] };
}

/**
 * Whether module `name` (e.g. `model.layers.3.self_attn.q_a_proj`) is in compressed-tensors' `ignore`
 * list: an exact name, or `re:PATTERN` matched from the start of the name as Python's re.match does.
 */
export function isIgnored(ignore: readonly string[], name: string): boolean {
  return ignore.some((entry) => {
    if (!entry.startsWith('re:')) return entry === name;
    try {
      return new RegExp(`^(?:${entry.slice(3)})`).test(name);
    } catch {
      return false;
    }
  });
}
