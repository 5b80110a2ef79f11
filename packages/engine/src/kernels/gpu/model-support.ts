/** What the WebGPU shard runs of a model's config, refusing the rest with a message naming it. */
import type { ModelConfig } from '../../config/config.js';
import { UnsupportedModelError } from '../../errors.js';
import type { RopeScalingSpec } from './rope.js';

/** The model's RoPE scaling as the GPU rope table takes it (llama3, linear); yarn is CPU-only so far. */
export function gpuRopeScaling(config: ModelConfig): RopeScalingSpec | null {
  const s = config.ropeScaling;
  if (!s) return null;
  if (s.type === 'yarn') throw new UnsupportedModelError(`the WebGPU backend does not run yarn rope scaling (${config.architecture}); use the CPU backends`);
  return { ...s, type: s.type };
}
