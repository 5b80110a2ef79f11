import type { ArchitectureCaps } from './types.js';

/**
 * DeepSeek V3 / R1 and Kimi K2 (which ships this architecture): multi-head latent attention with yarn
 * RoPE; sigmoid routing with a correction bias, group-limited top-k, `routed_scaling_factor`, shared
 * experts; the first `first_k_dense_replace` layers dense.
 */
export const deepseekV3: ArchitectureCaps = {
  name: 'DeepseekV3ForCausalLM',
  attentionBias: 'none',
  qkNorm: false,
  ropeScaling: ['yarn'],
  slidingWindow: 'never',
  attention: 'mla',
  moe: {
    expertsField: 'n_routed_experts',
    intermediateField: 'moe_intermediate_size',
    routing: 'sigmoid-grouped',
    normTopK: 'config',
    sparseLayers: 'first-k-dense',
    sharedExperts: true,
    activation: 'swiglu',
    tensors: { block: 'mlp', router: 'gate', layout: 'per-expert', projections: ['gate_proj', 'up_proj', 'down_proj'] },
  },
};
