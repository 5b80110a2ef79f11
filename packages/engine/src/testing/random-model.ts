/**
 * Writes random-weight model directories in real Hugging Face layout, for tests and benchmarks:
 * config.json, model.safetensors (or model-0000N-of-0000M.safetensors + model.safetensors.index.json),
 * tokenizer.json, tokenizer_config.json (with a chat template) and generation_config.json.
 *
 * Weights use HF tensor names and HF's rotate-half RoPE layout (no permutation), so a directory made
 * here is indistinguishable in format from a downloaded checkpoint. Deterministic for a given seed.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { f32ToBf16Bits, f32ToF16Bits } from '../numeric/half.js';
import { Prng } from '../numeric/prng.js';
import { writeSafetensors, type TensorToWrite } from '../safetensors/writer.js';
import { buildByteLevelTokenizer, type ByteLevelTokenizerOptions } from '../tokenizer/byte-level.js';
import { isSparseLayer, moeConfigFields, writeMlaAttention, writeMoeMlp, type MoeOptions, type TensorMaker } from './random-moe.js';

/**
 * - `llama`: LlamaForCausalLM with GQA.
 * - `llama3`: LlamaForCausalLM with `rope_scaling` type llama3 (small original context so all three
 *   frequency bands of the scaling are exercised).
 * - `mistral`: MistralForCausalLM.
 * - `qwen2`: Qwen2ForCausalLM, q/k/v projections with bias.
 * - `qwen3`: Qwen3ForCausalLM, RMSNorm on q and k per head, explicit head_dim.
 * - `qwen3-moe`: Qwen3MoeForCausalLM (8 experts, top-2, layer 1 dense via `mlp_only_layers`).
 * - `mixtral`: MixtralForCausalLM (8 experts, top-2, experts' size = intermediate_size).
 * - `deepseek-v3`: DeepseekV3ForCausalLM, the Kimi K2 layout: latent attention (q_lora_rank 32,
 *   kv_lora_rank 32, nope 16 / rope 8 / v 16, interleaved yarn RoPE), 8 routed experts in 4 groups
 *   (top-3 of the best 2 groups, sigmoid + correction bias), 1 shared expert, layer 0 dense.
 * - `gpt-oss`: GptOssForCausalLM: q/k/v/o biases, attention sinks, sliding (window 6) and full layers
 *   alternating, yarn RoPE, 8 merged experts (top-2 biased router, softmax over the chosen), clamped
 *   SwiGLU with biases; head_dim 16, experts' size = intermediate_size (default 32).
 * MoE options: see MoeOptions (random-moe.ts).
 */
export type RandomModelVariant = 'llama' | 'llama3' | 'mistral' | 'qwen2' | 'qwen3' | 'qwen3-moe' | 'mixtral' | 'deepseek-v3' | 'gpt-oss';
export type RandomModelDType = 'f32' | 'f16' | 'bf16';

export interface RandomModelOptions extends MoeOptions {
  variant?: RandomModelVariant;
  /** @default 64 */
  hiddenSize?: number;
  /** @default 128 */
  intermediateSize?: number;
  /** @default 4 */
  numLayers?: number;
  /** @default 4 */
  numHeads?: number;
  /** @default 2 (GQA) */
  numKvHeads?: number;
  /** Written as `head_dim` when set (qwen3 default: 32, otherwise hidden / heads). */
  headDim?: number;
  /** Extra vocabulary rows beyond the byte-level tokenizer's 259 tokens (padding, as real models have). @default 5 */
  extraVocab?: number;
  /** @default false */
  tiedEmbeddings?: boolean;
  /** @default 'f32' */
  dtype?: RandomModelDType;
  /** @default 1 */
  seed?: number;
  /** Number of safetensors files; > 1 writes the sharded layout with an index. @default 1 */
  shards?: number;
  /** @default 256 */
  maxPositionEmbeddings?: number;
  /** llama/qwen3: write `attention_bias: true` and q/k/v/o biases. @default false */
  attentionBias?: boolean;
  /** mistral: `sliding_window` (attend to the last N positions). @default null */
  slidingWindow?: number | null;
  /**
   * The byte-level tokenizer's special tokens, chat template, eos/bos: e.g. a model family's own
   * markers and published template, to drive chat-format code with a real tokenizer. @default ChatML
   */
  tokenizer?: ByteLevelTokenizerOptions;
  /** More ids that end generation (generation_config.json's eos_token_id list), by token text. */
  extraEosTokens?: string[];
  /**
   * deepseek-v3: multi-token-prediction layers as DeepSeek-V3's checkpoint has them
   * (`num_nextn_predict_layers`): layer `num_hidden_layers + i` is a decoder layer plus embed_tokens,
   * enorm, hnorm, eh_proj and shared_head.{norm,head}. Written after every other tensor, so the rest of
   * the model is the same as without them. @default 0
   */
  mtpLayers?: number;
}

export interface RandomModelInfo {
  dir: string;
  /** The config.json written. */
  config: Record<string, unknown>;
  /** Bytes of tensor data written (all files). */
  weightBytes: number;
  /** Tensor names in file order. */
  tensorNames: string[];
  /** Id of the eos token (`<|endoftext|>` unless `tokenizer.eosToken` says otherwise). */
  eosTokenId: number;
  /** Id of each added token. */
  specialIds: Record<string, number>;
}

const ARCH: Record<RandomModelVariant, { architecture: string; modelType: string }> = {
  llama: { architecture: 'LlamaForCausalLM', modelType: 'llama' },
  llama3: { architecture: 'LlamaForCausalLM', modelType: 'llama' },
  mistral: { architecture: 'MistralForCausalLM', modelType: 'mistral' },
  qwen2: { architecture: 'Qwen2ForCausalLM', modelType: 'qwen2' },
  qwen3: { architecture: 'Qwen3ForCausalLM', modelType: 'qwen3' },
  'qwen3-moe': { architecture: 'Qwen3MoeForCausalLM', modelType: 'qwen3_moe' },
  mixtral: { architecture: 'MixtralForCausalLM', modelType: 'mixtral' },
  'deepseek-v3': { architecture: 'DeepseekV3ForCausalLM', modelType: 'deepseek_v3' },
  'gpt-oss': { architecture: 'GptOssForCausalLM', modelType: 'gpt_oss' },
};

const QWEN3_LIKE = new Set<RandomModelVariant>(['qwen3', 'qwen3-moe']);
const MOE = new Set<RandomModelVariant>(['qwen3-moe', 'mixtral', 'deepseek-v3', 'gpt-oss']);

const TORCH_DTYPE: Record<RandomModelDType, string> = { f32: 'float32', f16: 'float16', bf16: 'bfloat16' };
const ST_DTYPE: Record<RandomModelDType, string> = { f32: 'F32', f16: 'F16', bf16: 'BF16' };

function encode(values: Float32Array, dtype: RandomModelDType): Uint8Array {
  if (dtype === 'f32') return new Uint8Array(values.buffer.slice(0));
  const out = new Uint16Array(values.length);
  const conv = dtype === 'f16' ? f32ToF16Bits : f32ToBf16Bits;
  for (let i = 0; i < values.length; i++) out[i] = conv(values[i]);
  return new Uint8Array(out.buffer);
}

/** Writes a random model into `dir` (created if missing) and describes it. */
export function writeRandomModel(dir: string, options: RandomModelOptions = {}): RandomModelInfo {
  const variant = options.variant ?? 'llama';
  const hidden = options.hiddenSize ?? 64;
  const inter = options.intermediateSize ?? (variant === 'mixtral' || variant === 'gpt-oss' ? 32 : 128);
  const layers = options.numLayers ?? 4;
  const heads = options.numHeads ?? 4;
  const kvHeads = options.numKvHeads ?? 2;
  const headDim = options.headDim ?? (QWEN3_LIKE.has(variant) ? 32 : hidden / heads);
  const gptOss = variant === 'gpt-oss';
  const dtype = options.dtype ?? 'f32';
  const tied = options.tiedEmbeddings ?? false;
  const shards = options.shards ?? 1;
  const tok = buildByteLevelTokenizer(options.tokenizer);
  const vocab = tok.vocabSize + (options.extraVocab ?? 5);
  const eos = tok.specialIds[options.tokenizer?.eosToken ?? '<|endoftext|>'];
  const rng = new Prng(options.seed ?? 1);
  if (!Number.isInteger(headDim) || headDim % 2) throw new Error(`writeRandomModel: head_dim ${headDim} must be an even integer`);

  mkdirSync(dir, { recursive: true });
  const { architecture, modelType } = ARCH[variant];
  const config: Record<string, unknown> = {
    architectures: [architecture],
    model_type: modelType,
    hidden_size: hidden,
    intermediate_size: inter,
    num_hidden_layers: layers,
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    hidden_act: 'silu',
    max_position_embeddings: options.maxPositionEmbeddings ?? 256,
    rms_norm_eps: variant === 'deepseek-v3' ? 1e-6 : 1e-5,
    rope_theta: variant === 'qwen2' || QWEN3_LIKE.has(variant) ? 1000000 : 10000,
    rope_scaling: null,
    vocab_size: vocab,
    tie_word_embeddings: tied,
    torch_dtype: TORCH_DTYPE[dtype],
    bos_token_id: eos,
    eos_token_id: eos,
    attention_dropout: 0,
  };
  if (options.headDim !== undefined || QWEN3_LIKE.has(variant) || gptOss) config.head_dim = headDim;
  const attentionBias = options.attentionBias ?? false;
  if (attentionBias && variant !== 'llama' && variant !== 'llama3' && !QWEN3_LIKE.has(variant)) {
    throw new Error(`writeRandomModel: attentionBias applies to llama/llama3/qwen3, not ${variant}`);
  }
  if (variant === 'llama' || variant === 'llama3') {
    config.attention_bias = attentionBias;
    config.mlp_bias = false;
  }
  if (variant === 'llama3') {
    config.rope_theta = 500000;
    config.rope_scaling = {
      rope_type: 'llama3',
      factor: 8,
      low_freq_factor: 1,
      high_freq_factor: 4,
      original_max_position_embeddings: 64,
    };
  }
  if (variant === 'mistral' || variant === 'mixtral') config.sliding_window = options.slidingWindow ?? null;
  if (variant === 'qwen2') {
    config.use_sliding_window = false;
    config.sliding_window = null;
    config.max_window_layers = layers;
  }
  if (QWEN3_LIKE.has(variant)) {
    config.attention_bias = attentionBias;
    config.use_sliding_window = false;
    config.sliding_window = null;
  }
  if (MOE.has(variant)) Object.assign(config, moeConfigFields(variant, layers, hidden, options));
  if (variant === 'deepseek-v3') config.num_key_value_heads = heads;
  if (options.mtpLayers) config.num_nextn_predict_layers = options.mtpLayers;

  const tensors: TensorToWrite[] = [];
  const add = (name: string, shape: number[], fill: () => number) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const v = new Float32Array(n);
    for (let i = 0; i < n; i++) v[i] = fill();
    tensors.push({ name, dtype: ST_DTYPE[dtype], shape, data: encode(v, dtype) });
  };
  const linear = (name: string, rows: number, cols: number) => {
    const a = Math.sqrt(3 / cols);
    add(name, [rows, cols], () => rng.symmetric(a));
  };
  const norm = (name: string, n: number) => add(name, [n], () => 1 + rng.symmetric(0.2));
  const bias = (name: string, n: number) => add(name, [n], () => rng.symmetric(0.5));

  add('model.embed_tokens.weight', [vocab, hidden], () => rng.symmetric(1));
  const maker: TensorMaker = { add, linear, norm, symmetric: (a) => rng.symmetric(a) };
  for (let l = 0; l < layers; l++) {
    const p = `model.layers.${l}`;
    norm(`${p}.input_layernorm.weight`, hidden);
    if (variant === 'deepseek-v3') writeMlaAttention(maker, `${p}.self_attn`, config, hidden, heads);
    else writeGqaAttention(l);
    norm(`${p}.post_attention_layernorm.weight`, hidden);
    if (MOE.has(variant) && isSparseLayer(variant, config, l)) writeMoeMlp(maker, p, variant, config, hidden, options);
    else {
      linear(`${p}.mlp.gate_proj.weight`, inter, hidden);
      linear(`${p}.mlp.up_proj.weight`, inter, hidden);
      linear(`${p}.mlp.down_proj.weight`, hidden, inter);
    }
  }
  norm('model.norm.weight', hidden);
  if (!tied) linear('lm_head.weight', vocab, hidden);
  const mtp = options.mtpLayers ?? 0;
  if (mtp > 0 && variant !== 'deepseek-v3') throw new Error(`writeRandomModel: mtpLayers is for deepseek-v3, not ${variant}`);
  for (let l = layers; l < layers + mtp; l++) {
    const p = `model.layers.${l}`;
    add(`${p}.embed_tokens.weight`, [vocab, hidden], () => rng.symmetric(1));
    norm(`${p}.enorm.weight`, hidden);
    norm(`${p}.hnorm.weight`, hidden);
    linear(`${p}.eh_proj.weight`, hidden, 2 * hidden);
    norm(`${p}.input_layernorm.weight`, hidden);
    writeMlaAttention(maker, `${p}.self_attn`, config, hidden, heads);
    norm(`${p}.post_attention_layernorm.weight`, hidden);
    writeMoeMlp(maker, p, variant, config, hidden, options);
    norm(`${p}.shared_head.norm.weight`, hidden);
    linear(`${p}.shared_head.head.weight`, vocab, hidden);
  }

  function writeGqaAttention(l: number): void {
    const p = `model.layers.${l}`;
    linear(`${p}.self_attn.q_proj.weight`, heads * headDim, hidden);
    linear(`${p}.self_attn.k_proj.weight`, kvHeads * headDim, hidden);
    linear(`${p}.self_attn.v_proj.weight`, kvHeads * headDim, hidden);
    if (variant === 'qwen2' || attentionBias || gptOss) {
      bias(`${p}.self_attn.q_proj.bias`, heads * headDim);
      bias(`${p}.self_attn.k_proj.bias`, kvHeads * headDim);
      bias(`${p}.self_attn.v_proj.bias`, kvHeads * headDim);
    }
    if (QWEN3_LIKE.has(variant)) {
      norm(`${p}.self_attn.q_norm.weight`, headDim);
      norm(`${p}.self_attn.k_norm.weight`, headDim);
    }
    linear(`${p}.self_attn.o_proj.weight`, hidden, heads * headDim);
    if (attentionBias || gptOss) bias(`${p}.self_attn.o_proj.bias`, hidden);
    if (gptOss) add(`${p}.self_attn.sinks`, [heads], () => rng.symmetric(1));
  }

  const weightBytes = tensors.reduce((s, t) => s + t.data.byteLength, 0);
  if (shards <= 1) {
    writeSafetensors(join(dir, 'model.safetensors'), tensors, { format: 'pt' });
  } else {
    // Split in file order into `shards` groups of roughly equal bytes, as HF's save_pretrained does.
    const groups: TensorToWrite[][] = Array.from({ length: shards }, () => []);
    let acc = 0;
    for (const t of tensors) {
      const g = Math.min(shards - 1, Math.floor((acc / weightBytes) * shards));
      groups[g].push(t);
      acc += t.data.byteLength;
    }
    const weightMap: Record<string, string> = {};
    groups.forEach((group, i) => {
      const file = `model-${String(i + 1).padStart(5, '0')}-of-${String(shards).padStart(5, '0')}.safetensors`;
      writeSafetensors(join(dir, file), group, { format: 'pt' });
      for (const t of group) weightMap[t.name] = file;
    });
    writeJson(join(dir, 'model.safetensors.index.json'), { metadata: { total_size: weightBytes }, weight_map: weightMap });
  }

  writeJson(join(dir, 'config.json'), config);
  writeJson(join(dir, 'tokenizer.json'), tok.tokenizer);
  writeJson(join(dir, 'tokenizer_config.json'), tok.tokenizerConfig);
  const eosIds = [eos, ...(options.extraEosTokens ?? []).map((t) => {
    const id = tok.specialIds[t];
    if (id === undefined) throw new Error(`writeRandomModel: eos token ${t} is not among the tokenizer's special tokens`);
    return id;
  })];
  writeJson(join(dir, 'generation_config.json'), { bos_token_id: eos, eos_token_id: eosIds, do_sample: false });
  return { dir, config, weightBytes, tensorNames: tensors.map((t) => t.name), eosTokenId: eos, specialIds: tok.specialIds };
}

function writeJson(path: string, value: unknown): void {
  writeFileSync(path, JSON.stringify(value, null, 2) + '\n');
}
