/**
 * Reading llama.cpp's mixture-of-experts and latent-attention GGUFs (qwen3moe, llama with experts =
 * Mixtral, deepseek2 = DeepSeek V3 / Kimi K2, gpt-oss) into the engine's config and Hugging Face names:
 * - one routed expert of a stacked `ffn_{gate,up,down}_exps` tensor is presented as
 *   `…experts.E.{gate,up,down}_proj.weight` (slab E of the 3-D tensor, read alone: a rank reads only its
 *   experts' bytes); gpt-oss's per-expert biases likewise as `….bias`;
 * - deepseek2's `attn_k_b` / `attn_v_b` as `self_attn.{k,v}_b_proj.weight` (per-head slabs), its legacy
 *   unsplit `attn_kv_b` as `kv_b_proj.weight`;
 * - hyper-parameters as llama.cpp reads them: qwen3moe and llama always renormalise the top-k weights,
 *   deepseek2's yarn uses beta 32 / 1 and cancels yarn's magnitude on cos/sin (its mscale goes on the
 *   softmax scale instead, from rope.scaling.yarn_log_multiplier), gpt-oss alternates sliding and full
 *   layers from layer 0.
 */
import { basename } from 'node:path';
import type { MlaConfig, MoeConfig, RopeScaling } from '../config/config.js';
import type { ArchitectureCaps } from '../config/architectures/types.js';
import { yarnMscale } from '../config/mla-config.js';
import { ModelFormatError } from '../errors.js';
import type { GgufHeader } from './read.js';

/** A GGUF tensor, or slab `index` of its outermost dimension. */
export interface GgufTensorRef {
  name: string;
  index?: number;
}

const EXPERT_PROJ: Record<string, string> = { gate_proj: 'gate', up_proj: 'up', down_proj: 'down', w1: 'gate', w3: 'up', w2: 'down' };

/**
 * The GGUF tensor behind an HF name of a MoE / MLA layer (`rest` = the part after `model.layers.N.`),
 * or undefined when `rest` is not one of them.
 */
export function moeTensorRef(rest: string, block: string, arch: string): GgufTensorRef | null | undefined {
  const b = `blk.${block}`;
  let m = /^(mlp|block_sparse_moe)\.experts\.(\d+)\.(gate_proj|up_proj|down_proj|w1|w2|w3)\.(weight|bias)$/.exec(rest);
  if (m) return { name: `${b}.ffn_${EXPERT_PROJ[m[3]]}_exps.${m[4]}`, index: Number(m[2]) };
  m = /^mlp\.shared_experts\.(gate|up|down)_proj\.weight$/.exec(rest);
  if (m) return { name: `${b}.ffn_${m[1]}_shexp.weight` };
  const fixed: Record<string, string> = {
    'mlp.gate.weight': 'ffn_gate_inp.weight',
    'block_sparse_moe.gate.weight': 'ffn_gate_inp.weight',
    'mlp.router.weight': 'ffn_gate_inp.weight',
    'mlp.router.bias': 'ffn_gate_inp.bias',
    'mlp.gate.e_score_correction_bias': 'exp_probs_b.bias',
    'self_attn.q_a_proj.weight': 'attn_q_a.weight',
    'self_attn.q_a_layernorm.weight': 'attn_q_a_norm.weight',
    'self_attn.q_b_proj.weight': 'attn_q_b.weight',
    'self_attn.kv_a_proj_with_mqa.weight': 'attn_kv_a_mqa.weight',
    'self_attn.kv_a_layernorm.weight': 'attn_kv_a_norm.weight',
    'self_attn.kv_b_proj.weight': 'attn_kv_b.weight',
    'self_attn.k_b_proj.weight': 'attn_k_b.weight',
    'self_attn.v_b_proj.weight': 'attn_v_b.weight',
    'self_attn.sinks': 'attn_sinks.weight',
  };
  if (arch === 'gpt-oss' && rest === 'post_attention_layernorm.weight') return { name: `${b}.post_attention_norm.weight` };
  return fixed[rest] ? { name: `${b}.${fixed[rest]}` } : undefined;
}

type Meta = {
  int(key: string, fallback?: number): number;
  num(key: string, fallback: number): number;
  get(key: string): unknown;
};

/** The MoE config of a GGUF (its `<arch>.expert_*` keys). */
export function ggufMoeConfig(h: GgufHeader, path: string, arch: string, caps: ArchitectureCaps, numLayers: number, feedForward: number, meta: Meta): MoeConfig {
  const k = (s: string) => `${arch}.${s}`;
  const experts = meta.int(k('expert_count'));
  const topK = meta.int(k('expert_used_count'));
  if (topK > experts) throw new ModelFormatError(`${basename(path)}: ${k('expert_used_count')} ${topK} exceeds ${k('expert_count')} ${experts}`, path, k('expert_used_count'));
  const expertIntermediate = arch === 'llama' ? feedForward : meta.int(k('expert_feed_forward_length'));
  const moeCaps = caps.moe!;
  const deepseek = arch === 'deepseek2';
  const firstMoe = deepseek ? Number(meta.get(k('leading_dense_block_count')) ?? 0) : 0;
  const groups = deepseek ? meta.int(k('expert_group_count'), 1) : 1;
  if (experts % groups) throw new ModelFormatError(`${basename(path)}: ${experts} experts do not divide into ${groups} groups`, path, k('expert_group_count'));
  return {
    experts,
    topK,
    expertIntermediate,
    sharedIntermediate: deepseek ? Number(meta.get(k('expert_shared_count')) ?? 0) * expertIntermediate : 0,
    routing: moeCaps.routing,
    activation: moeCaps.activation,
    normTopK: deepseek ? meta.get(k('expert_weights_norm')) === true : moeCaps.routing === 'softmax',
    groups,
    topkGroups: deepseek ? meta.int(k('expert_group_used_count'), 1) : 1,
    scalingFactor: deepseek ? meta.num(k('expert_weights_scale'), 1) : 1,
    swigluLimit: moeCaps.activation === 'clamped-swiglu' ? 7 : Infinity,
    sparse: Array.from({ length: numLayers }, (_, l) => l >= firstMoe),
  };
}

/** deepseek2's latent attention sizes: MLA keys (key_length_mla …) or the legacy ones (attn_kv_b files). */
export function ggufMlaConfig(h: GgufHeader, arch: string, numHeads: number, meta: Meta, rope: RopeScaling | null): { mla: MlaConfig; headDim: number } {
  const k = (s: string) => `${arch}.${s}`;
  const ropeDim = meta.int(k('rope.dimension_count'));
  const mlaKeys = h.metadata.has(k('attention.key_length_mla'));
  const qk = meta.int(mlaKeys ? k('attention.key_length_mla') : k('attention.key_length'));
  const vDim = meta.int(mlaKeys ? k('attention.value_length_mla') : k('attention.value_length'));
  const logMul = Number(meta.get(k('rope.scaling.yarn_log_multiplier')) ?? 0) / 0.1;
  const mscale = rope?.type === 'yarn' && logMul ? yarnMscale(rope.factor, logMul) : 1;
  return {
    headDim: qk,
    mla: {
      qLoraRank: Number(meta.get(k('attention.q_lora_rank')) ?? 0),
      kvLoraRank: meta.int(k('attention.kv_lora_rank')),
      nopeDim: qk - ropeDim,
      ropeDim,
      vDim,
      ropeInterleave: true, // llama.cpp's deepseek2 rotates adjacent pairs
      softmaxScale: (mscale * mscale) / Math.sqrt(qk),
    },
  };
}

/** Yarn as llama.cpp's loader reads it (beta 32 / 1 except where it reads the keys; deepseek2 cancels the cos/sin magnitude). */
export function ggufYarn(arch: string, meta: Meta, maxPositions: number): RopeScaling {
  const k = (s: string) => `${arch}.${s}`;
  const factor = meta.num(k('rope.scaling.factor'), 1);
  return {
    type: 'yarn',
    factor,
    lowFreqFactor: 0,
    highFreqFactor: 0,
    originalMaxPositionEmbeddings: meta.int(k('rope.scaling.original_context_length'), maxPositions),
    yarn: { betaFast: 32, betaSlow: 1, attentionFactor: arch === 'deepseek2' ? 1 : yarnMscale(factor, 1), truncate: true, mscaleAllDim: 0 },
  };
}
