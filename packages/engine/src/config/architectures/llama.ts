import type { ArchitectureCaps } from './types.js';

/** Llama 1/2/3 (incl. Llama 3.1+ `rope_scaling` type llama3). `attention_bias` adds q/k/v/o biases. */
export const llama: ArchitectureCaps = {
  name: 'LlamaForCausalLM',
  attentionBias: 'config',
  qkNorm: false,
  ropeScaling: ['llama3', 'linear'],
  slidingWindow: 'never',
};
