/** RoPE for the WebGPU shard: which table computes the inverse frequencies of a model's config. */
import type { ModelConfig } from '../../config/config.js';
import type { RopeScalingSpec } from './rope.js';
import { ropeInverseFrequencies } from '../../model/rope.js';

/** The model's RoPE scaling as the GPU rope table takes it (llama3, linear); yarn and latent attention use gpuInvFreq. */
export function gpuRopeScaling(config: ModelConfig): RopeScalingSpec | null {
  const s = config.ropeScaling;
  if (!s || s.type === 'yarn') return null;
  return { ...s, type: s.type };
}

/**
 * The engine's own inverse frequencies (model/rope.ts) where the GPU rope table has none: yarn, and latent
 * attention (which rotates only each head's RoPE part); null otherwise.
 */
export function gpuInvFreq(config: ModelConfig): Float64Array | null {
  if (config.ropeScaling?.type !== 'yarn' && !config.mla) return null;
  return ropeInverseFrequencies({ ...config, headDim: config.mla?.ropeDim ?? config.headDim });
}
