import type { ArchitectureCaps } from './types.js';

/** Mixtral: Mistral attention; `block_sparse_moe` with experts w1 (gate), w3 (up), w2 (down); softmax then renormalised top-k. */
export const mixtral: ArchitectureCaps = {
  name: 'MixtralForCausalLM',
  attentionBias: 'none',
  qkNorm: false,
  ropeScaling: [],
  slidingWindow: 'config',
  moe: {
    expertsField: 'num_local_experts',
    intermediateField: 'intermediate_size',
    routing: 'softmax',
    normTopK: 'always',
    sparseLayers: 'all',
    sharedExperts: false,
    activation: 'swiglu',
    tensors: { block: 'block_sparse_moe', router: 'gate', layout: 'per-expert', projections: ['w1', 'w3', 'w2'] },
  },
};
