import type { ArchitectureCaps } from './types.js';

/** Qwen3-MoE: Qwen3 attention; softmax router, top-k, `norm_topk_prob`; dense layers by `decoder_sparse_step` / `mlp_only_layers`. */
export const qwen3Moe: ArchitectureCaps = {
  name: 'Qwen3MoeForCausalLM',
  attentionBias: 'config',
  qkNorm: true,
  ropeScaling: [],
  slidingWindow: 'use_sliding_window',
  moe: {
    expertsField: 'num_experts',
    intermediateField: 'moe_intermediate_size',
    routing: 'softmax',
    normTopK: 'config',
    sparseLayers: 'decoder-sparse-step',
    sharedExperts: false,
    activation: 'swiglu',
    tensors: { block: 'mlp', router: 'gate', layout: 'per-expert', projections: ['gate_proj', 'up_proj', 'down_proj'] },
  },
};
