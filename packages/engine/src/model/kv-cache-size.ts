/**
 * How many f32 values one token adds to one layer's cache on one tensor rank: K and V of the rank's KV
 * heads, or, with latent attention, the compressed latent plus the shared RoPE key (the same on every
 * rank). The planner's KV-cache sizing follows this formula (test/moe-planner-agreement.test.ts).
 */
import type { ModelConfig } from '../config/config.js';
import { mlaLatentWidth } from '../config/mla-config.js';
import type { TensorSlice } from './tensor-split.js';

export function kvCacheValuesPerToken(config: Pick<ModelConfig, 'mla' | 'headDim'>, slice: Pick<TensorSlice, 'kvHeads'>): number {
  if (config.mla) return mlaLatentWidth(config.mla);
  return 2 * (slice.kvHeads[1] - slice.kvHeads[0]) * config.headDim;
}
