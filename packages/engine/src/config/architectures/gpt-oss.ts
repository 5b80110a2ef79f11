import type { ArchitectureCaps } from './types.js';

/**
 * gpt-oss: attention with q/k/v/o biases and learned sinks, sliding-window and full layers alternating
 * (`layer_types`), yarn RoPE; every layer MoE with a biased router (top-k logits, softmax over those),
 * merged input-major expert tensors with biases, and the clamped SwiGLU.
 */
export const gptOss: ArchitectureCaps = {
  name: 'GptOssForCausalLM',
  attentionBias: 'config',
  qkNorm: false,
  ropeScaling: ['yarn'],
  slidingWindow: 'layer_types',
  attentionSinks: true,
  moe: {
    expertsField: 'num_local_experts',
    intermediateField: 'intermediate_size',
    routing: 'topk-softmax',
    normTopK: 'never',
    sparseLayers: 'all',
    sharedExperts: false,
    activation: 'clamped-swiglu',
    tensors: { block: 'mlp', router: 'router', layout: 'merged', projections: ['gate_up_proj', 'gate_up_proj', 'down_proj'] },
  },
};
