/**
 * Placement: which nodes run which ranks of a model, from the planner's cluster JSON. Pure.
 *
 * - `auto`: the planner (@orchard/partitioner) picks single / pipeline / tensor / hybrid by predicted
 *   speed; its layout is used when the engine can run it (equal tensor groups whose size divides the
 *   heads and the MLP), else its nodes become a pipeline.
 * - `pipeline` / `tensor`: forced by the caller (`orchard load --strategy`, tests) over `nodes` nodes
 *   (default 2), those with the most free memory first; layers split evenly.
 */
import { InfeasibleError, plan as planModel, type Cluster, type ModelSpec, type Plan } from '@orchard/partitioner';
import { pipelineStages } from '@orchard/engine';
import type { InstanceLayout } from '@orchard/engine';

export type StrategyRequest = 'auto' | 'pipeline' | 'tensor';

export interface PlacementRequest {
  strategy: StrategyRequest;
  /** Nodes to use for a forced strategy. @default 2 */
  nodes?: number;
}

/** What placement needs to know about the model. */
export interface ModelShape {
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  intermediateSize: number;
  /** Weights on disk, bytes (for the memory check of forced layouts). */
  weightsBytes: number;
}

export interface InstancePlan {
  strategy: 'single' | 'pipeline' | 'tensor' | 'hybrid';
  layout: InstanceLayout;
  /** Node (peer id) of each rank; rank = stage·tensor + tensorRank. */
  ranks: string[];
  /** The planner's prediction for this layout, when it made one. */
  predicted: Plan['predicted'] | null;
  explanation: string[];
}

export class PlacementError extends Error {
  override name = 'PlacementError';
}

function tensorOk(shape: ModelShape, t: number): boolean {
  return shape.numHeads % t === 0 && shape.numKvHeads > 0 && shape.numHeads % shape.numKvHeads === 0 && shape.intermediateSize % t === 0;
}

/** Nodes by free memory (most first), ties by id: deterministic on every node. */
function byFreeMemory(cluster: Cluster): Cluster['nodes'] {
  return [...cluster.nodes].sort((a, b) => b.availableBytes - a.availableBytes || (a.id < b.id ? -1 : 1));
}

export function placeForced(shape: ModelShape, cluster: Cluster, req: PlacementRequest): InstancePlan {
  const n = req.nodes ?? 2;
  if (!Number.isInteger(n) || n < 1) throw new PlacementError(`nodes must be a positive integer, got ${n}`);
  if (cluster.nodes.length < n) throw new PlacementError(`${req.strategy} over ${n} nodes needs ${n} live nodes; the pod has ${cluster.nodes.length}`);
  const nodes = byFreeMemory(cluster).slice(0, n);
  const share = shape.weightsBytes / n;
  const short = nodes.find((x) => x.availableBytes > 0 && x.availableBytes < share);
  if (short) throw new PlacementError(`node ${short.id} has ${(short.availableBytes / 2 ** 30).toFixed(2)} GiB free, its share of the weights needs ${(share / 2 ** 30).toFixed(2)} GiB`);
  if (req.strategy === 'tensor') {
    if (!tensorOk(shape, n)) {
      throw new PlacementError(`tensor parallel ${n} needs the ${shape.numHeads} heads and intermediate size ${shape.intermediateSize} to divide by ${n}`);
    }
    return {
      strategy: n === 1 ? 'single' : 'tensor',
      layout: { stages: [[0, shape.numLayers]], tensor: n },
      ranks: nodes.map((x) => x.id),
      predicted: null,
      explanation: [`forced tensor parallel over ${n} node(s) with the most free memory`],
    };
  }
  if (shape.numLayers < n) throw new PlacementError(`a ${n}-stage pipeline needs at least ${n} layers; the model has ${shape.numLayers}`);
  return {
    strategy: n === 1 ? 'single' : 'pipeline',
    layout: { stages: pipelineStages(shape.numLayers, n), tensor: 1 },
    ranks: nodes.map((x) => x.id),
    predicted: null,
    explanation: [`forced ${n}-stage pipeline (layers split evenly) over the node(s) with the most free memory`],
  };
}

/** Turns the planner's plan into a layout the engine runs (equal tensor groups, whole heads). */
export function layoutFromPlan(shape: ModelShape, p: Pick<Plan, 'strategy' | 'stages' | 'predicted' | 'explanation'>): InstancePlan {
  const t = p.stages[0].nodes.length;
  if (p.stages.every((s) => s.nodes.length === t) && tensorOk(shape, t)) {
    return {
      strategy: p.strategy,
      layout: { stages: p.stages.map((s) => [s.layers[0], s.layers[1]] as [number, number]), tensor: t },
      ranks: p.stages.flatMap((s) => s.nodes),
      predicted: p.predicted,
      explanation: p.explanation,
    };
  }
  // Uneven tensor groups are not runnable yet: the same nodes as a pipeline, layers split evenly.
  const nodes = p.stages.flatMap((s) => s.nodes);
  const k = Math.min(nodes.length, shape.numLayers);
  return {
    strategy: k === 1 ? 'single' : 'pipeline',
    layout: { stages: pipelineStages(shape.numLayers, k), tensor: 1 },
    ranks: nodes.slice(0, k),
    predicted: null,
    explanation: [...p.explanation, `the engine runs equal tensor groups only; placed as a ${k}-stage pipeline instead`],
  };
}

export function placeAuto(shape: ModelShape, spec: ModelSpec, cluster: Cluster): InstancePlan {
  let p: Plan;
  try {
    p = planModel(spec, cluster, { contextTokens: 2048, promptTokens: 256 });
  } catch (err) {
    if (err instanceof InfeasibleError) throw new PlacementError(err.message);
    throw err;
  }
  return layoutFromPlan(shape, p);
}

export function place(shape: ModelShape, spec: ModelSpec, cluster: Cluster, req: PlacementRequest): InstancePlan {
  if (cluster.nodes.length === 0) throw new PlacementError('no live node with a profile yet');
  return req.strategy === 'auto' ? placeAuto(shape, spec, cluster) : placeForced(shape, cluster, req);
}

/** How much faster (predicted decode tokens/s) a new plan must be to replace a running instance. */
export const UPGRADE_GAIN = 1.15;

/**
 * Whether an auto-placed instance should give way to `next` (e.g. after a node joined): a different
 * layout predicted at least UPGRADE_GAIN× faster. Forced placements are never changed.
 */
export function shouldUpgrade(current: Pick<InstancePlan, 'ranks' | 'layout' | 'predicted'>, next: Pick<InstancePlan, 'ranks' | 'layout' | 'predicted'>): boolean {
  if (!current.predicted || !next.predicted) return false;
  const same = JSON.stringify(current.ranks) === JSON.stringify(next.ranks) && JSON.stringify(current.layout) === JSON.stringify(next.layout);
  return !same && next.predicted.decodeTokensPerSecond >= current.predicted.decodeTokensPerSecond * UPGRADE_GAIN;
}
