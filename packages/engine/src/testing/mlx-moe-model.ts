/**
 * Turns a Hugging Face mixture-of-experts directory (writeRandomModel's qwen3-moe, mixtral, deepseek-v3, gpt-oss)
 * into the directory mlx-lm's `convert -q` writes, for tests: its `sanitize` renames and stacks, its
 * quantize_model predicate, its shards and index, its config fields.
 *
 * - Experts stacked output-major per projection: `mlp.switch_mlp.{gate,up,down}_proj` [E, out, in]
 *   (Mixtral: `block_sparse_moe.switch_mlp.*` from w1/w3/w2).
 * - gpt-oss: `mlp.experts.{gate,up,down}_proj` [E, out, in] with `.bias` [E, out], kept in MXFP4 as
 *   released (mlx-lm loads the MXFP4 original in mode "mxfp4": `.weight` uint32 [E, out, in/8], `.scales`
 *   uint8 [E, out, in/32], no `.biases`); global `quantization` {32, 4, mxfp4}, and `-q` adds an affine
 *   entry per module it quantizes (the router's from gpt_oss.py's predicate: 8 bits, groups of 64).
 * - DeepSeek V3 / Kimi K2 MLA: `kv_b_proj` as it is (mlx-lm before 2026-02), or split per head into
 *   `embed_q` [H, kvLoraRank, nope] (the key rows, transposed) and `unembed_out` [H, v, kvLoraRank].
 * - Quantized: every module with `to_quantized` (Linear, Embedding, SwitchLinear, MultiLinear — not
 *   DeepSeek's MoEGate, a bare parameter) whose input is whole groups; the model's quant_predicate
 *   (qwen3_moe: `mlp.gate` at 8 bits, groups of 64) and the caller's per-module entries (or `false`)
 *   recorded in `quantization`; `quantization_config` the same object.
 * - Shards `model-0000N-of-0000M.safetensors` (metadata `format: mlx`) split where the next tensor
 *   would pass `maxShardBytes`, `model.safetensors.index.json` with total_size, total_parameters and the
 *   sorted weight_map (written for one shard too, as save_model does).
 *
 * `referenceDir` gets the Hugging Face layout again in F32, every value exactly the one the MLX files
 * hold (dequantized f32(f32(scale·q) + bias), or the stored float): the float reference.
 */
import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BF16_TO_F32, F16_TO_F32, f32ToBf16Bits, f32ToF16Bits } from '../numeric/half.js';
import { SafetensorsFile } from '../safetensors/reader.js';
import { SAFETENSORS_DTYPE_SIZES } from '../safetensors/format.js';
import { type TensorToWrite, writeSafetensors } from '../safetensors/writer.js';
import { type MlxQuant, quantizeMlx } from '../quant/mlx.js';
import { dequantizeMxfp4Row, quantizeMxfp4 } from '../quant/mxfp4.js';
import { dequantizeMlxValues } from './mlx-model.js';

export interface MlxMoeModelOptions {
  bits: MlxQuant['bits'];
  groupSize: MlxQuant['groupSize'];
  /** Per-module entries (mlx-lm module paths, e.g. `model.layers.1.mlp.switch_mlp.down_proj`); `false` = left unquantized. */
  overrides?: Record<string, MlxQuant | false>;
  /** DeepSeek V3 MLA: `kv_b_proj` (mlx-lm before 2026-02) or per-head `embed_q` / `unembed_out` (since). @default 'embed_q' */
  mla?: 'kv_b_proj' | 'embed_q';
  /** mlx-lm's shard limit (MAX_FILE_SIZE_GB = 5 GiB); tests pass a small one to get several files. */
  maxShardBytes?: number;
  /** Write the F32 Hugging Face-layout model of exactly the stored values here. */
  referenceDir?: string;
}

/** A tensor as floats, with the dtype it is stored in. */
interface FloatTensor {
  dtype: string;
  shape: number[];
  values: Float32Array;
}

/** Which source names become which stacked mlx-lm name, per model type. */
const EXPERT_NAMES: Record<string, { block: string; projections: [string, string][] }> = {
  qwen3_moe: { block: 'mlp', projections: [['gate_proj', 'gate_proj'], ['up_proj', 'up_proj'], ['down_proj', 'down_proj']] },
  deepseek_v3: { block: 'mlp', projections: [['gate_proj', 'gate_proj'], ['up_proj', 'up_proj'], ['down_proj', 'down_proj']] },
  kimi_k2: { block: 'mlp', projections: [['gate_proj', 'gate_proj'], ['up_proj', 'up_proj'], ['down_proj', 'down_proj']] },
  mixtral: { block: 'block_sparse_moe', projections: [['w1', 'gate_proj'], ['w3', 'up_proj'], ['w2', 'down_proj']] },
  // gpt-oss: merged HF tensors, split by splitGptOssExperts; mlx-lm keeps them under `experts`
  gpt_oss: { block: 'mlp', projections: [] },
};

export function writeMlxMoeModel(src: string, dst: string, options: MlxMoeModelOptions): void {
  const config = JSON.parse(readFileSync(join(src, 'config.json'), 'utf8')) as Record<string, unknown>;
  const modelType = String(config.model_type);
  const names = EXPERT_NAMES[modelType];
  if (!names) throw new Error(`writeMlxMoeModel: model_type ${modelType} is not one of ${Object.keys(EXPERT_NAMES).join(', ')}`);
  const source = readAll(src);
  const layers = config.num_hidden_layers as number;
  const experts = (config.num_experts ?? config.num_local_experts ?? config.n_routed_experts) as number;

  // sanitize: stack experts, split kv_b_proj (float values; quantization comes after, as in convert)
  const mlx = new Map(source);
  for (let l = 0; l < layers; l++) {
    const b = `model.layers.${l}.${names.block}`;
    for (const [from, to] of names.projections) {
      if (!mlx.has(`${b}.experts.0.${from}.weight`)) continue;
      const parts = Array.from({ length: experts }, (_, e) => take(mlx, `${b}.experts.${e}.${from}.weight`));
      const [rows, cols] = parts[0].shape;
      const values = new Float32Array(experts * rows * cols);
      parts.forEach((p, e) => values.set(p.values, e * rows * cols));
      mlx.set(`${b}.switch_mlp.${to}.weight`, { dtype: parts[0].dtype, shape: [experts, rows, cols], values });
    }
    const a = `model.layers.${l}.self_attn`;
    if ((options.mla ?? 'embed_q') === 'embed_q' && mlx.has(`${a}.kv_b_proj.weight`)) {
      const kvb = take(mlx, `${a}.kv_b_proj.weight`);
      const { H, nope, v, L } = mlaDims(config);
      const k = new Float32Array(H * L * nope);
      const u = new Float32Array(H * v * L);
      for (let h = 0; h < H; h++) {
        const base = h * (nope + v);
        for (let i = 0; i < nope; i++) for (let j = 0; j < L; j++) k[(h * L + j) * nope + i] = kvb.values[(base + i) * L + j];
        u.set(kvb.values.subarray((base + nope) * L, (base + nope + v) * L), h * v * L);
      }
      mlx.set(`${a}.embed_q.weight`, { dtype: kvb.dtype, shape: [H, L, nope], values: k });
      mlx.set(`${a}.unembed_out.weight`, { dtype: kvb.dtype, shape: [H, v, L], values: u });
    }
  }
  if (config.tie_word_embeddings) mlx.delete('lm_head.weight');
  const gptOss = modelType === 'gpt_oss';
  /** gpt-oss's experts stay MXFP4 as released: mlx-lm loads them in mode mxfp4 and `-q` quantizes the rest. */
  const mxfp4 = new Set<string>();
  if (gptOss) for (let l = 0; l < layers; l++) splitGptOssExperts(mlx, `model.layers.${l}.mlp.experts`, experts, config.intermediate_size as number).forEach((n) => mxfp4.add(n));

  // quantize_model
  const global: MlxQuant = { bits: options.bits, groupSize: options.groupSize };
  // A model already quantized when loaded (gpt-oss: MXFP4 experts) keeps its global entry, and
  // quantize_model records every module it quantizes on top of it (fine_grained_config).
  const quantization: Record<string, unknown> = gptOss ? { group_size: 32, bits: 4, mode: 'mxfp4' } : { group_size: global.groupSize, bits: global.bits, mode: 'affine' };
  const out: TensorToWrite[] = [];
  /** The values the files hold, per mlx-lm name, for the reference. */
  const held = new Map<string, FloatTensor>();
  const bitsOf = new Map<string, number>();
  for (const [name, t] of mlx) {
    const base = name.slice(0, -'.weight'.length);
    const cols = t.shape[t.shape.length - 1];
    if (mxfp4.has(name)) {
      const rows = t.values.length / cols;
      const gguf = quantizeMxfp4(t.values, rows, cols);
      const { blocks, scales } = ggufToMlxMxfp4(gguf, (rows * cols) / 32);
      const lead = t.shape.slice(0, -1);
      out.push({ name, dtype: 'U32', shape: [...lead, cols / 8], data: blocks });
      out.push({ name: `${base}.scales`, dtype: 'U8', shape: [...lead, cols / 32], data: scales });
      const deq = new Float32Array(rows * cols);
      for (let r = 0; r < rows; r++) dequantizeMxfp4Row(gguf, cols, r, deq.subarray(r * cols, (r + 1) * cols));
      held.set(name, { dtype: 'F32', shape: t.shape, values: deq });
      bitsOf.set(name, 4);
      continue;
    }
    let q: MlxQuant | false = name.endsWith('.weight') && t.shape.length >= 2 && quantizable(modelType, base) ? global : false;
    if (q && cols % global.groupSize) q = false; // mlx-lm's predicate: the input must be whole groups
    if (q) {
      const own = options.overrides?.[base] ?? modelPredicate(modelType, base);
      if (own !== undefined) {
        q = own;
        quantization[base] = own === false ? false : { group_size: own.groupSize, bits: own.bits };
      } else if (gptOss) quantization[base] = { group_size: global.groupSize, bits: global.bits, mode: 'affine' };
    }
    if (!q) {
      out.push({ name, dtype: t.dtype, shape: t.shape, data: encode(t.values, t.dtype) });
      held.set(name, t);
      continue;
    }
    const rows = t.values.length / cols;
    const { words, scales, biases } = quantizeMlx(t.values, rows, cols, q);
    const lead = t.shape.slice(0, -1);
    const s = stored(scales, t.dtype);
    const b = stored(biases, t.dtype);
    out.push({ name, dtype: 'U32', shape: [...lead, (cols * q.bits) / 32], data: new Uint8Array(words.buffer) });
    out.push({ name: `${base}.scales`, dtype: t.dtype, shape: [...lead, cols / q.groupSize], data: encode(s, t.dtype) });
    out.push({ name: `${base}.biases`, dtype: t.dtype, shape: [...lead, cols / q.groupSize], data: encode(b, t.dtype) });
    bitsOf.set(name, q.bits);
    held.set(name, { dtype: 'F32', shape: t.shape, values: dequantizeMlxValues(words, s, b, t.values.length, q) });
  }

  cpSync(src, dst, { recursive: true, filter: (f) => !f.endsWith('.safetensors') && !f.endsWith('.safetensors.index.json') });
  writeShards(dst, out, options.maxShardBytes ?? 5 * 2 ** 30, bitsOf);
  const cfg = { ...config, quantization, quantization_config: quantization };
  writeFileSync(join(dst, 'config.json'), JSON.stringify(Object.fromEntries(Object.entries(cfg).sort(([x], [y]) => (x < y ? -1 : 1))), null, 4));

  if (options.referenceDir) writeReference(src, options.referenceDir, source, held, config, names, layers, experts);
}

/** Modules mlx-lm can quantize: everything with a 2-D+ weight but DeepSeek's MoEGate (a bare parameter, no to_quantized). */
function quantizable(modelType: string, base: string): boolean {
  return !((modelType === 'deepseek_v3' || modelType === 'kimi_k2') && base.endsWith('.mlp.gate'));
}

/** The model class's own quant_predicate (qwen3_moe.py: the router at 8 bits, groups of 64). */
function modelPredicate(modelType: string, base: string): MlxQuant | undefined {
  if (modelType === 'qwen3_moe' && base.endsWith('mlp.gate')) return { bits: 8, groupSize: 64 };
  if (modelType === 'gpt_oss' && base.endsWith('router')) return { bits: 8, groupSize: 64 };
  return undefined;
}

function mlaDims(config: Record<string, unknown>): { H: number; nope: number; v: number; L: number } {
  return { H: config.num_attention_heads as number, nope: config.qk_nope_head_dim as number, v: config.v_head_dim as number, L: config.kv_lora_rank as number };
}

/** mlx-lm's make_shards and save_model: split before the tensor that would pass the limit; index always. */
function writeShards(dst: string, tensors: TensorToWrite[], maxBytes: number, bitsOf: Map<string, number>): void {
  const shards: TensorToWrite[][] = [[]];
  let size = 0;
  for (const t of tensors) {
    if (size + t.data.byteLength > maxBytes && shards[shards.length - 1].length) {
      shards.push([]);
      size = 0;
    }
    shards[shards.length - 1].push(t);
    size += t.data.byteLength;
  }
  const weightMap: Record<string, string> = {};
  let totalParameters = 0;
  shards.forEach((shard, i) => {
    const file = shards.length > 1 ? `model-${String(i + 1).padStart(5, '0')}-of-${String(shards.length).padStart(5, '0')}.safetensors` : 'model.safetensors';
    writeSafetensors(join(dst, file), shard, { format: 'mlx' });
    for (const t of shard) {
      weightMap[t.name] = file;
      // get_total_parameters counts a quantized weight's elements unpacked
      const n = t.shape.reduce((a, b) => a * b, 1);
      if (!t.name.endsWith('.scales') && !t.name.endsWith('.biases')) totalParameters += t.dtype === 'U32' ? (n * 32) / bitsOf.get(t.name)! : n;
    }
  });
  const totalSize = tensors.reduce((n, t) => n + t.data.byteLength, 0);
  const sorted = Object.fromEntries(Object.keys(weightMap).sort().map((k) => [k, weightMap[k]]));
  writeFileSync(join(dst, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: totalSize, total_parameters: totalParameters }, weight_map: sorted }, null, 4));
}

/** The F32 Hugging Face layout of the held values: experts unstacked, kv_b_proj rebuilt from embed_q / unembed_out. */
function writeReference(
  src: string,
  dir: string,
  source: Map<string, FloatTensor>,
  held: Map<string, FloatTensor>,
  config: Record<string, unknown>,
  names: { block: string; projections: [string, string][] },
  layers: number,
  experts: number,
): void {
  cpSync(src, dir, { recursive: true, filter: (f) => !f.endsWith('.safetensors') && !f.endsWith('.safetensors.index.json') });
  const values = new Map<string, Float32Array>();
  for (const [name, t] of held) values.set(name, t.values);
  for (let l = 0; l < layers; l++) {
    const b = `model.layers.${l}.${names.block}`;
    for (const [from, to] of names.projections) {
      const stackedValues = values.get(`${b}.switch_mlp.${to}.weight`);
      if (!stackedValues) continue;
      const per = stackedValues.length / experts;
      for (let e = 0; e < experts; e++) values.set(`${b}.experts.${e}.${from}.weight`, stackedValues.subarray(e * per, (e + 1) * per));
    }
    const a = `model.layers.${l}.self_attn`;
    const k = values.get(`${a}.embed_q.weight`);
    const u = values.get(`${a}.unembed_out.weight`);
    if (k && u) {
      const { H, nope, v, L } = mlaDims(config);
      const kvb = new Float32Array(H * (nope + v) * L);
      for (let h = 0; h < H; h++) {
        const base = h * (nope + v);
        for (let i = 0; i < nope; i++) for (let j = 0; j < L; j++) kvb[(base + i) * L + j] = k[(h * L + j) * nope + i];
        kvb.set(u.subarray(h * v * L, (h + 1) * v * L), (base + nope) * L);
      }
      values.set(`${a}.kv_b_proj.weight`, kvb);
    }
  }
  if (config.model_type === 'gpt_oss') for (let l = 0; l < layers; l++) mergeGptOssExperts(values, `model.layers.${l}.mlp.experts`, experts, config.intermediate_size as number, config.hidden_size as number);
  if (config.tie_word_embeddings) values.delete('lm_head.weight');
  const tensors: TensorToWrite[] = [];
  for (const [name, t] of source) {
    const v = values.get(name);
    if (!v) {
      if (name === 'lm_head.weight' && config.tie_word_embeddings) continue;
      throw new Error(`writeMlxMoeModel: no held values for ${name}`);
    }
    tensors.push({ name, dtype: 'F32', shape: t.shape, data: new Uint8Array(v.slice().buffer) });
  }
  writeSafetensors(join(dir, 'model.safetensors'), tensors);
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, torch_dtype: 'float32' }, null, 2));
}

/**
 * gpt-oss's merged input-major experts (`gate_up_proj` [E, D, 2I], gate the even columns; `down_proj`
 * [E, I, D]; biases [E, 2I], [E, D]) as mlx-lm's sanitize leaves them: `gate_proj` / `up_proj` [E, I, D]
 * and `down_proj` [E, D, I] output-major, biases `*.bias` [E, I] / [E, D]. Returns the weights' names.
 */
function splitGptOssExperts(m: Map<string, FloatTensor>, x: string, E: number, I: number): string[] {
  const gu = take(m, `${x}.gate_up_proj`);
  const gub = take(m, `${x}.gate_up_proj_bias`);
  const dn = take(m, `${x}.down_proj`);
  const db = take(m, `${x}.down_proj_bias`);
  const D = gu.shape[1];
  const gate = new Float32Array(E * I * D);
  const up = new Float32Array(E * I * D);
  const down = new Float32Array(E * D * I);
  const gb = new Float32Array(E * I);
  const ub = new Float32Array(E * I);
  for (let e = 0; e < E; e++) {
    for (let o = 0; o < I; o++) {
      for (let i = 0; i < D; i++) {
        gate[(e * I + o) * D + i] = gu.values[(e * D + i) * 2 * I + 2 * o];
        up[(e * I + o) * D + i] = gu.values[(e * D + i) * 2 * I + 2 * o + 1];
      }
      gb[e * I + o] = gub.values[e * 2 * I + 2 * o];
      ub[e * I + o] = gub.values[e * 2 * I + 2 * o + 1];
    }
    for (let o = 0; o < D; o++) for (let i = 0; i < I; i++) down[(e * D + o) * I + i] = dn.values[(e * I + i) * D + o];
  }
  const dt = gu.dtype;
  m.set(`${x}.gate_proj.weight`, { dtype: dt, shape: [E, I, D], values: gate });
  m.set(`${x}.gate_proj.bias`, { dtype: gub.dtype, shape: [E, I], values: gb });
  m.set(`${x}.up_proj.weight`, { dtype: dt, shape: [E, I, D], values: up });
  m.set(`${x}.up_proj.bias`, { dtype: gub.dtype, shape: [E, I], values: ub });
  m.set(`${x}.down_proj.weight`, { dtype: dt, shape: [E, D, I], values: down });
  m.set(`${x}.down_proj.bias`, { dtype: db.dtype, shape: [E, D], values: db.values });
  return [`${x}.gate_proj.weight`, `${x}.up_proj.weight`, `${x}.down_proj.weight`];
}

/** The inverse of splitGptOssExperts over held values: Hugging Face's merged tensors again. */
function mergeGptOssExperts(v: Map<string, Float32Array>, x: string, E: number, I: number, D: number): void {
  const gate = v.get(`${x}.gate_proj.weight`)!;
  const up = v.get(`${x}.up_proj.weight`)!;
  const down = v.get(`${x}.down_proj.weight`)!;
  const gb = v.get(`${x}.gate_proj.bias`)!;
  const ub = v.get(`${x}.up_proj.bias`)!;
  const gu = new Float32Array(E * D * 2 * I);
  const gub = new Float32Array(E * 2 * I);
  const dn = new Float32Array(E * I * D);
  for (let e = 0; e < E; e++) {
    for (let o = 0; o < I; o++) {
      for (let i = 0; i < D; i++) {
        gu[(e * D + i) * 2 * I + 2 * o] = gate[(e * I + o) * D + i];
        gu[(e * D + i) * 2 * I + 2 * o + 1] = up[(e * I + o) * D + i];
      }
      gub[e * 2 * I + 2 * o] = gb[e * I + o];
      gub[e * 2 * I + 2 * o + 1] = ub[e * I + o];
    }
    for (let o = 0; o < D; o++) for (let i = 0; i < I; i++) dn[(e * I + i) * D + o] = down[(e * D + o) * I + i];
  }
  v.set(`${x}.gate_up_proj`, gu);
  v.set(`${x}.gate_up_proj_bias`, gub);
  v.set(`${x}.down_proj`, dn);
  v.set(`${x}.down_proj_bias`, v.get(`${x}.down_proj.bias`)!);
}

/** GGUF-order MXFP4 blocks (exponent, then byte j = elements j, j+16) in mlx-lm's words: element k at bits 4k, exponents apart. */
function ggufToMlxMxfp4(gguf: Uint8Array, nBlocks: number): { blocks: Uint8Array; scales: Uint8Array } {
  const blocks = new Uint8Array(nBlocks * 16);
  const scales = new Uint8Array(nBlocks);
  for (let b = 0; b < nBlocks; b++) {
    scales[b] = gguf[17 * b];
    for (let k = 0; k < 32; k++) {
      const q = gguf[17 * b + 1 + (k & 15)];
      blocks[16 * b + (k >> 1)] |= (k < 16 ? q & 15 : q >> 4) << (4 * (k & 1));
    }
  }
  return { blocks, scales };
}

/** Every tensor of a single-file or sharded directory as floats, in the files' order. */
function readAll(dir: string): Map<string, FloatTensor> {
  const index = join(dir, 'model.safetensors.index.json');
  const files = existsSync(index) ? [...new Set(Object.values((JSON.parse(readFileSync(index, 'utf8')) as { weight_map: Record<string, string> }).weight_map))] : ['model.safetensors'];
  const out = new Map<string, FloatTensor>();
  for (const file of files) {
    const f = SafetensorsFile.open(join(dir, file));
    try {
      for (const [name, info] of f.tensors) {
        const n = info.shape.reduce((x, y) => x * y, 1);
        const rows = info.shape.length === 1 ? 1 : info.shape[0];
        const raw = new Uint8Array(n * SAFETENSORS_DTYPE_SIZES[info.dtype]);
        f.readBlock(name, raw, 0, rows, 0, n / rows);
        out.set(name, { dtype: info.dtype, shape: info.shape, values: decode(raw, info.dtype) });
      }
    } finally {
      f.close();
    }
  }
  return out;
}

function take(m: Map<string, FloatTensor>, name: string): FloatTensor {
  const t = m.get(name);
  if (!t) throw new Error(`writeMlxMoeModel: missing ${name}`);
  m.delete(name);
  return t;
}

function decode(raw: Uint8Array, dtype: string): Float32Array {
  if (dtype === 'F32') return new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
  const table = dtype === 'F16' ? F16_TO_F32 : BF16_TO_F32;
  return Float32Array.from(new Uint16Array(raw.buffer, raw.byteOffset, raw.byteLength / 2), (b) => table[b]);
}

function encode(v: Float32Array, dtype: string): Uint8Array {
  if (dtype === 'F32') return new Uint8Array(v.slice().buffer);
  const toBits = dtype === 'F16' ? f32ToF16Bits : f32ToBf16Bits;
  return new Uint8Array(Uint16Array.from(v, toBits).buffer);
}

/** f32 values as `dtype` stores them (scales and biases are kept in the model's dtype). */
function stored(v: Float32Array, dtype: string): Float32Array {
  return dtype === 'F32' ? v : decode(encode(v, dtype), dtype);
}

