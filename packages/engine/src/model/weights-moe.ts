/**
 * The weights of one mixture-of-experts layer for one tensor rank: the whole router (choosing needs
 * every score), the routed experts the rank holds (`slice.experts`, whole experts: expert parallelism),
 * and its rows of the shared experts. A rank reads only its own experts' bytes.
 */
import type { ModelConfig, MoeConfig } from '../config/config.js';
import { basename } from 'node:path';
import { ModelFormatError } from '../errors.js';
import type { Weight } from '../kernels/backend.js';
import { mxfp4ExpertShape } from '../quant/mxfp4-hf.js';
import type { Checkpoint } from '../safetensors/checkpoint.js';
import type { TensorSlice } from './tensor-split.js';
import { planDenseMlp, type DenseMlpWeights, type WeightPlanner } from './weight-planner.js';

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
  // gpt-oss's merged tensors are HF's layout; a GGUF presents the same experts one by one (with biases).
  const merged = caps.tensors.layout === 'merged' && rd.has(`${p}.experts.gate_up_proj`);
  // gpt-oss as released: the merged experts in MXFP4 blocks, output-major (quant/mxfp4-hf.ts)
  const mxfp4 = caps.tensors.layout === 'merged' && rd.has(`${p}.experts.gate_up_proj_blocks`);
  const names = caps.tensors.layout === 'merged' ? (['gate_proj', 'up_proj', 'down_proj'] as const) : projections;
  const biased = moe.activation === 'clamped-swiglu';
  // mlx-lm stacks the experts, output-major [E, out, in]: `switch_mlp.{gate,up,down}_proj` (gpt-oss: `experts.*`)
  const stacked = [`${p}.switch_mlp`, `${p}.experts`].find((s) => rd.has(`${s}.gate_proj.weight`));
  const experts: ExpertWeights[] = [];
  for (let e = slice.experts[0]; e < slice.experts[1]; e++) {
    if (stacked) {
      experts.push(stackedExpert(rd, stacked, E, D, I, e, biased));
      continue;
    }
    if (merged || mxfp4) {
      experts.push(mxfp4 ? mergedMxfp4Expert(rd, p, E, D, I, e) : mergedExpert(rd, p, E, D, I, e));
      continue;
    }
    const x = `${p}.experts.${e}`;
    const { gate, up, down } = planDenseMlp(rd, x, I, D, all, names);
    const bias = (proj: string, n: number) => (biased ? rd.vector(`${x}.${proj}.bias`, n) : null);
    experts.push({ gate, up, down, gateBias: bias(names[0], I), upBias: bias(names[1], I), downBias: bias(names[2], D) });
  }
  return {
    kind: 'moe',
    router: rd.matrix(`${p}.${router}.weight`, E, D, [0, E]),
    routerBias: biased ? rd.vector(`${p}.${router}.bias`, E) : null,
    correctionBias: moe.routing === 'sigmoid-grouped' ? rd.vector(`${p}.${router}.e_score_correction_bias`, E) : null,
    firstExpert: slice.experts[0],
    experts,
    shared: moe.sharedIntermediate ? planDenseMlp(rd, `${p}.shared_experts`, moe.sharedIntermediate, D, slice.sharedFfn) : null,
  };
}

/**
 * Expert `e` of mlx-lm's stacked projections `s`.{gate,up,down}_proj [E, out, in] (SwitchGLU: plain floats,
 * or MLX-quantized with scales/biases [E, out, in/group]); gpt-oss's biases [E, out] beside them.
 */
function stackedExpert(rd: WeightPlanner, s: string, E: number, D: number, I: number, e: number, biased: boolean): ExpertWeights {
  const bias = (proj: string, n: number) => (biased ? rd.mergedExpertVector(`${s}.${proj}.bias`, E, n, 1, e)[0] : null);
  return {
    gate: rd.slab(`${s}.gate_proj.weight`, [E, I, D], e),
    up: rd.slab(`${s}.up_proj.weight`, [E, I, D], e),
    down: rd.slab(`${s}.down_proj.weight`, [E, D, I], e),
    gateBias: bias('gate_proj', I),
    upBias: bias('up_proj', I),
    downBias: bias('down_proj', D),
  };
}

/** gpt-oss expert `e` from `experts.gate_up_proj` [E, D, 2I] (gate even columns, up odd), `experts.down_proj` [E, I, D] and their biases. */
function mergedExpert(rd: WeightPlanner, p: string, E: number, D: number, I: number, e: number): ExpertWeights {
  const [gate, up] = rd.mergedExpert(`${p}.experts.gate_up_proj`, E, D, I, 2, e);
  const [gateBias, upBias] = rd.mergedExpertVector(`${p}.experts.gate_up_proj_bias`, E, I, 2, e);
  const [down] = rd.mergedExpert(`${p}.experts.down_proj`, E, I, D, 1, e);
  const [downBias] = rd.mergedExpertVector(`${p}.experts.down_proj_bias`, E, D, 1, e);
  return { gate, up, down, gateBias, upBias, downBias };
}

/**
 * gpt-oss expert `e` from MXFP4 `experts.gate_up_proj_blocks/_scales` [E, 2I, D/32, …] (gate the even
 * rows, up the odd: the same interleave as the bf16 tensor's columns) and `experts.down_proj_*` [E, D, I/32, …].
 */
function mergedMxfp4Expert(rd: WeightPlanner, p: string, E: number, D: number, I: number, e: number): ExpertWeights {
  const expect = (base: string, rows: number, cols: number) => {
    const s = mxfp4ExpertShape(rd.ckpt as Checkpoint, base);
    if (s.experts !== E || s.rows !== rows || s.cols !== cols) {
      throw new ModelFormatError(`${basename(rd.ckpt.file(`${base}_blocks`).path)}: ${base}_blocks holds ${s.experts} experts of [${s.rows}, ${s.cols}], config.json says ${E} of [${rows}, ${cols}]`, rd.ckpt.file(`${base}_blocks`).path, `${base}_blocks`);
    }
  };
  expect(`${p}.experts.gate_up_proj`, 2 * I, D);
  expect(`${p}.experts.down_proj`, D, I);
  const gate = rd.mxfp4Expert(`${p}.experts.gate_up_proj`, e, [0, 2 * I], 2);
  const up = rd.mxfp4Expert(`${p}.experts.gate_up_proj`, e, [1, 2 * I], 2);
  const down = rd.mxfp4Expert(`${p}.experts.down_proj`, e, [0, D]);
  const [gateBias, upBias] = rd.mergedExpertVector(`${p}.experts.gate_up_proj_bias`, E, I, 2, e);
  const [downBias] = rd.mergedExpertVector(`${p}.experts.down_proj_bias`, E, D, 1, e);
  return { gate, up, down, gateBias, upBias, downBias };
}
