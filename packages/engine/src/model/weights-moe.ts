/**
 * The weights of one mixture-of-experts layer for one tensor rank: the whole router (choosing needs
 * every score), the routed experts the rank holds (`slice.experts`, whole experts: expert parallelism),
 * and its rows of the shared experts. A rank reads only its own experts' bytes.
 */
import type { ModelConfig, MoeConfig } from '../config/config.js';
import type { Weight } from '../kernels/backend.js';
import type { TensorSlice } from './tensor-split.js';
import { planDenseMlp, type DenseMlpWeights, type WeightPlanner } from './weights.js';

/** One routed expert: down(act(gate(x), up(x))), intermediate = the expert's size. */
export interface ExpertWeights {
  /** [I, hidden] */
  gate: Weight;
  /** [I, hidden] */
  up: Weight;
  /** [hidden, I] */
  down: Weight;
  /** gpt-oss: [I], [I], [hidden]. */
  gateBias: Float32Array | null;
  upBias: Float32Array | null;
  downBias: Float32Array | null;
}

export interface MoeWeights {
  kind: 'moe';
  /** [experts, hidden] */
  router: Weight;
  /** [experts] — gpt-oss's router bias. */
  routerBias: Float32Array | null;
  /** [experts] — DeepSeek's `e_score_correction_bias`, added to the scores only to choose. */
  correctionBias: Float32Array | null;
  /** Index of `experts[0]` among all routed experts (= slice.experts[0]). */
  firstExpert: number;
  /** Routed experts slice.experts[0] .. slice.experts[1]-1. */
  experts: ExpertWeights[];
  /** Shared experts as one MLP over this rank's rows of their combined intermediate, or null. */
  shared: DenseMlpWeights | null;
}

export function planMoe(rd: WeightPlanner, config: ModelConfig, moe: MoeConfig, slice: TensorSlice, layer: string): MoeWeights {
  const caps = config.caps.moe!;
  const { block, router, projections } = caps.tensors;
  const D = config.hiddenSize;
  const E = moe.experts;
  const I = moe.expertIntermediate;
  const p = `${layer}.${block}`;
  const all: [number, number] = [0, I];
  const experts: ExpertWeights[] = [];
  for (let e = slice.experts[0]; e < slice.experts[1]; e++) {
    const mlp = planDenseMlp(rd, `${p}.experts.${e}`, I, D, all, projections);
    experts.push({ gate: mlp.gate, up: mlp.up, down: mlp.down, gateBias: null, upBias: null, downBias: null });
  }
  return {
    kind: 'moe',
    router: rd.matrix(`${p}.${router}.weight`, E, D, [0, E]),
    routerBias: null,
    correctionBias: moe.routing === 'sigmoid-grouped' ? rd.vector(`${p}.${router}.e_score_correction_bias`, E) : null,
    firstExpert: slice.experts[0],
    experts,
    shared: moe.sharedIntermediate ? planDenseMlp(rd, `${p}.shared_experts`, moe.sharedIntermediate, D, slice.sharedFfn) : null,
  };
}
