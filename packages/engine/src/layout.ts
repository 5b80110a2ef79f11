/**
 * How an instance of a model is laid out over ranks, and whether the engine can run a layout.
 *
 * The engine owns this: the planner proposes layouts, placement turns them into rank assignments and
 * the runners load `shardSpecOf(layout, rank)` — all of them ask `canRun` the same question, so a
 * layout is never planned that a shard then refuses.
 *
 * Ranks are numbered stage-major (rank = stage·T + tensorRank) and every stage has the same number T
 * of tensor ranks: rank 0 (stage 0, tensor rank 0) drives generation and embeds, tensor rank 0 of the
 * last stage samples. A stage's query heads may be dealt out unevenly (`heads`), for groups whose
 * members differ in speed or memory; the MLP rows follow each rank's share of the heads.
 */
import type { ShardSpec } from './shard.js';
import { UnsupportedModelError } from './errors.js';
import { tensorSlice, type SplitDims } from './model/tensor-split.js';

export interface InstanceLayout {
  /** Layer range [start, end) per stage, in pipeline order. */
  stages: [number, number][];
  /** Tensor-parallel ranks per stage (the same in every stage). */
  tensor: number;
  /**
   * Query heads of each tensor rank, per stage (`heads[stage][tensorRank]`, each stage summing to the
   * model's heads). Absent: every rank gets an equal share.
   */
  heads?: number[][];
}

/** What `canRun` needs to know about a model: the split dimensions and the layer count. */
export interface LayoutDims extends SplitDims {
  numLayers: number;
}

export function worldSize(l: InstanceLayout): number {
  return l.stages.length * l.tensor;
}

export function stageOf(l: InstanceLayout, rank: number): { stage: number; tensorRank: number } {
  return { stage: Math.floor(rank / l.tensor), tensorRank: rank % l.tensor };
}

export function rankOf(l: InstanceLayout, stage: number, tensorRank: number): number {
  return stage * l.tensor + tensorRank;
}

/** The rank that samples: tensor rank 0 of the last stage. */
export function samplerRank(l: InstanceLayout): number {
  return rankOf(l, l.stages.length - 1, 0);
}

/** Ranks of one stage's tensor group, in rank order. */
export function stageMembers(l: InstanceLayout, stage: number): number[] {
  return Array.from({ length: l.tensor }, (_, r) => rankOf(l, stage, r));
}

export function shardSpecOf(l: InstanceLayout, rank: number): ShardSpec {
  const { stage, tensorRank } = stageOf(l, rank);
  const heads = l.heads?.[stage];
  return {
    layers: l.stages[stage],
    tensor: { rank: tensorRank, size: l.tensor, ...(heads ? { heads } : {}) },
    embed: stage === 0,
    head: stage === l.stages.length - 1,
  };
}

/**
 * Layer ranges of a pipeline: `pipeline` stages as even as whole layers allow, or explicit layer counts
 * per stage.
 */
export function pipelineStages(numLayers: number, pipeline: number | number[]): [number, number][] {
  const counts =
    typeof pipeline === 'number'
      ? Array.from({ length: pipeline }, (_, i) => Math.floor(((i + 1) * numLayers) / pipeline) - Math.floor((i * numLayers) / pipeline))
      : pipeline;
  if (!counts.length || counts.some((c) => !Number.isInteger(c) || c < 1)) {
    throw new UnsupportedModelError(`cannot split ${numLayers} layers into pipeline stages ${JSON.stringify(pipeline)}: every stage needs at least one layer`);
  }
  const total = counts.reduce((a, b) => a + b, 0);
  if (total !== numLayers) throw new UnsupportedModelError(`pipeline stages hold ${total} layers but the model has ${numLayers}`);
  const ranges: [number, number][] = [];
  let start = 0;
  for (const c of counts) {
    ranges.push([start, start + c]);
    start += c;
  }
  return ranges;
}

export type CanRun = { ok: true } | { ok: false; reason: string };

/**
 * Whether the engine runs `layout` for a model of `dims`: stages cover every layer once, in order,
 * each non-empty; every stage has `tensor` ranks; each rank gets whole query heads (evenly, or as
 * `heads` says), at least one MLP row and one vocabulary row. The reason names the numbers.
 */
export function canRun(dims: LayoutDims, layout: InstanceLayout): CanRun {
  try {
    checkLayout(dims, layout);
    return { ok: true };
  } catch (err) {
    if (err instanceof UnsupportedModelError) return { ok: false, reason: err.message };
    throw err;
  }
}

/** `canRun` as an assertion: throws UnsupportedModelError with the reason. */
export function checkLayout(dims: LayoutDims, layout: InstanceLayout): void {
  const { stages, tensor } = layout;
  if (!Array.isArray(stages) || stages.length === 0) throw new UnsupportedModelError('a layout needs at least one stage');
  if (!Number.isInteger(tensor) || tensor < 1) throw new UnsupportedModelError(`tensor ranks per stage must be a positive integer, got ${tensor}`);
  let next = 0;
  stages.forEach(([start, end], s) => {
    if (start !== next || !Number.isInteger(end) || end <= start) {
      throw new UnsupportedModelError(`stage ${s} holds layers [${start}, ${end}); it must start at layer ${next} and hold at least one layer`);
    }
    next = end;
  });
  if (next !== dims.numLayers) throw new UnsupportedModelError(`the stages hold layers [0, ${next}) but the model has ${dims.numLayers}`);
  if (layout.heads !== undefined && layout.heads.length !== stages.length) {
    throw new UnsupportedModelError(`heads are given for ${layout.heads.length} stages; the layout has ${stages.length}`);
  }
  stages.forEach((_, s) => {
    // tensorSlice checks whole heads, GQA groups and the MLP/vocabulary shares of every rank.
    for (let r = 0; r < tensor; r++) tensorSlice(dims, r, tensor, layout.heads?.[s]);
  });
}

/**
 * The layout of a plan given stage by stage (layer range and heads per member, as the planner writes
 * it). Refused when stages have different numbers of members: ranks are numbered stage-major with one
 * tensor size. Equal head shares are left implicit, so an even plan gives the plain layout.
 */
export function instanceLayoutOf(stages: readonly { layers: readonly number[]; heads: readonly number[] }[]): InstanceLayout {
  if (stages.length === 0) throw new UnsupportedModelError('a layout needs at least one stage');
  const tensor = stages[0].heads.length;
  if (stages.some((s) => s.heads.length !== tensor)) {
    throw new UnsupportedModelError(`every stage needs the same number of tensor ranks (ranks are numbered stage-major); the stages have ${stages.map((s) => s.heads.length).join('/')}`);
  }
  const uneven = stages.some((s) => s.heads.some((h) => h !== s.heads[0]));
  return {
    stages: stages.map((s) => [s.layers[0], s.layers[1]] as [number, number]),
    tensor,
    ...(uneven ? { heads: stages.map((s) => [...s.heads]) } : {}),
  };
}
