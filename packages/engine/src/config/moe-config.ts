/**
 * The mixture-of-experts part of config.json, read as the architecture's capabilities describe it
 * (architectures/types.ts MoeCaps). Defaults are those of the Hugging Face config classes.
 */
import { ModelFormatError } from '../errors.js';
import type { MoeCaps } from './architectures/types.js';
import type { ConfigFields } from './fields.js';

export interface MoeConfig {
  /** Routed experts per MoE layer. */
  experts: number;
  /** Experts chosen per token (`num_experts_per_tok`). */
  topK: number;
  /** One routed expert's intermediate size. */
  expertIntermediate: number;
  /** All shared experts together as one MLP of this intermediate size; 0 = none. */
  sharedIntermediate: number;
  routing: MoeCaps['routing'];
  activation: MoeCaps['activation'];
  /** Renormalise the chosen experts' weights to sum 1. */
  normTopK: boolean;
  /** Sigmoid-grouped routing: `n_group` groups, the best `topk_group` of which may be chosen from. */
  groups: number;
  topkGroups: number;
  /** Multiplies the routed experts' weights (`routed_scaling_factor`). */
  scalingFactor: number;
  /** Clamped SwiGLU limit (gpt-oss `swiglu_limit`). */
  swigluLimit: number;
  /** Per decoder layer: true = MoE, false = dense MLP of intermediate_size. */
  sparse: boolean[];
}

export function readMoeConfig(f: ConfigFields, caps: MoeCaps, numLayers: number): MoeConfig {
  const experts = f.int(caps.expertsField);
  const topK = f.int('num_experts_per_tok');
  if (topK > experts) throw new ModelFormatError(`config.json: num_experts_per_tok ${topK} exceeds ${caps.expertsField} ${experts}`, f.path, 'num_experts_per_tok');
  const expertIntermediate = f.int(caps.intermediateField);
  const sharedIntermediate = caps.sharedExperts ? f.count('n_shared_experts', 1) * expertIntermediate : 0;

  let groups = 1;
  let topkGroups = 1;
  if (caps.routing === 'sigmoid-grouped') {
    groups = f.int('n_group', 8);
    topkGroups = f.int('topk_group', 4);
    if (experts % groups) throw new ModelFormatError(`config.json: ${experts} routed experts do not divide into n_group ${groups} groups`, f.path, 'n_group');
    if (topkGroups > groups) throw new ModelFormatError(`config.json: topk_group ${topkGroups} exceeds n_group ${groups}`, f.path, 'topk_group');
    // Group scores add each group's two best experts.
    if (experts / groups < 2) throw new ModelFormatError(`config.json: each of the n_group ${groups} groups needs at least 2 of the ${experts} experts`, f.path, 'n_group');
    if (topK > topkGroups * (experts / groups)) {
      throw new ModelFormatError(`config.json: num_experts_per_tok ${topK} exceeds the ${topkGroups * (experts / groups)} experts of topk_group ${topkGroups} groups`, f.path, 'num_experts_per_tok');
    }
  }

  const sparse = Array.from({ length: numLayers }, (_, i) => i);
  let isSparse: (i: number) => boolean = () => true;
  if (caps.sparseLayers === 'decoder-sparse-step') {
    const step = f.int('decoder_sparse_step', 1);
    const dense = new Set(f.ints('mlp_only_layers'));
    isSparse = (i) => !dense.has(i) && (i + 1) % step === 0;
  } else if (caps.sparseLayers === 'first-k-dense') {
    // HF's DeepseekV3 reads only first_k_dense_replace; DeepSeek's own modeling code also skips
    // layers off moe_layer_freq (1 in every released config), and so do we.
    const firstMoe = f.count('first_k_dense_replace', 3);
    const freq = f.int('moe_layer_freq', 1);
    isSparse = (i) => i >= firstMoe && i % freq === 0;
  }

  return {
    experts,
    topK,
    expertIntermediate,
    sharedIntermediate,
    routing: caps.routing,
    activation: caps.activation,
    normTopK: caps.normTopK === 'always' || (caps.normTopK === 'config' && f.bool('norm_topk_prob', caps.routing === 'sigmoid-grouped')),
    groups,
    topkGroups,
    scalingFactor: caps.routing === 'sigmoid-grouped' ? f.num('routed_scaling_factor', 2.5) : 1,
    swigluLimit: caps.activation === 'clamped-swiglu' ? f.num('swiglu_limit', 7) : Infinity,
    sparse: sparse.map(isSparse),
  };
}
