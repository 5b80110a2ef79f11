/**
 * What the WebGPU shard runs of a model's config. The rest is refused up front with
 * GpuUnavailableError naming it, so `--backend auto` runs such a model on the CPU instead and
 * `--backend gpu` says why in one line.
 */
import type { ModelConfig } from '../../config/config.js';
import type { GqaWeights, LayerWeights } from '../../model/weights.js';
import { GpuUnavailableError } from './context.js';
import type { RopeScalingSpec } from './rope.js';
import { ropeInverseFrequencies } from '../../model/rope.js';

/** The model's RoPE scaling as the GPU rope table takes it, after checking the GPU runs the model at all. */
export function gpuRopeScaling(config: ModelConfig): RopeScalingSpec | null {
  const refuse = (what: string) => {
    throw new GpuUnavailableError(`the WebGPU backend does not run ${what} yet (${config.architecture}); the CPU backends do`);
  };
  if (config.mla) refuse('latent attention');
  const s = config.ropeScaling;
  if (!s || s.type === 'yarn') return null; // yarn: gpuInvFreq
  return { ...s, type: s.type };
}

/** Yarn's inverse frequencies (the engine's own, model/rope.ts); null for the scalings the GPU rope table computes itself. */
export function gpuInvFreq(config: ModelConfig): Float64Array | null {
  return config.ropeScaling?.type === 'yarn' ? ropeInverseFrequencies(config) : null;
}

/** A layer's attention as the GPU runs it: grouped-query. */
export function gpuAttention(layer: LayerWeights, index: number): GqaWeights {
  const a = layer.attention;
  if (a.kind !== 'gqa') throw new GpuUnavailableError(`the WebGPU backend does not run latent attention yet (layer ${index})`);
  return a;
}
