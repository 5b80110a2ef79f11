import type { ArchitectureCaps } from './types.js';

/** Mistral: Llama with an optional attention sliding window. */
export const mistral: ArchitectureCaps = {
  name: 'MistralForCausalLM',
  attentionBias: 'none',
  qkNorm: false,
  ropeScaling: [],
  slidingWindow: 'config',
};
