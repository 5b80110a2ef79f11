import type { ArchitectureCaps } from './types.js';

/** Qwen3 (dense): RMSNorm on q and k per head, explicit head_dim, biases only if attention_bias. */
export const qwen3: ArchitectureCaps = {
  name: 'Qwen3ForCausalLM',
  attentionBias: 'config',
  qkNorm: true,
  ropeScaling: [],
  slidingWindow: 'use_sliding_window',
};
