import type { ArchitectureCaps } from './types.js';

/** Qwen2 / Qwen2.5: bias on q/k/v (not o). Sliding window only when `use_sliding_window` is set (refused). */
export const qwen2: ArchitectureCaps = {
  name: 'Qwen2ForCausalLM',
  attentionBias: 'qkv',
  qkNorm: false,
  ropeScaling: [],
  slidingWindow: 'use_sliding_window',
};
