import type { ArchitectureCaps } from './types.js';

/** Qwen3 (dense): RMSNorm on q and k per head, explicit head_dim, no bias. */
export const qwen3: ArchitectureCaps = {
  name: 'Qwen3ForCausalLM',
  qkvBias: 'config',
  qkNorm: true,
  ropeScaling: [],
  slidingWindow: 'use_sliding_window',
};
