/**
 * What the WebGPU shard runs of a model's config. The rest is refused up front with
 * GpuUnavailableError naming it, so `--backend auto` runs such a model on the CPU instead and
 * `--backend gpu` says why in one line.
 */
import type { ModelConfig } from '../../config/config.js';
import type { GqaWeights, LayerWeights } from '../../model/weights.js';
import { GpuUnavailableError } from './context.js';
import type { RopeScalingSpec } from './rope.js';

/** The model's RoPE scaling as the GPU rope table takes it, after checking the GPU runs the model at all. */
export function gpuRopeScaling(config: ModelConfig): RopeScalingSpec | null {
  const refuse = (what: string) => {
    throw new GpuUnavailableError(`the WebGPU backend does not run ${what} yet (${config.architecture}); the CPU backends do`);
  };
  if (config.mla) refuse('latent attention');
  if (config.attentionSinks) refuse('attention sinks');
  if (config.slidingLayers) refuse('per-layer sliding windows');
  const s = config.ropeScaling;
  if (!s) return null;
  if (s.type === 'yarn') return refuse('yarn rope scaling');
  return { ...s, type: s.type };
}

/** A layer's attention as the GPU runs it: grouped-query, without sinks. */
export function gpuAttention(layer: LayerWeights, index: number): GqaWeights {
  const a = layer.attention;
  if (a.kind !== 'gqa' || a.sinks) throw new GpuUnavailableError(`the WebGPU backend does not run ${a.kind === 'mla' ? 'latent attention' : 'attention sinks'} yet (layer ${index})`);
  return a;
}
