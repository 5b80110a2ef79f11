/**
 * Placement: which nodes run which ranks of a model, from the planner's cluster JSON. Pure.
 *
 * - `auto`: the planner (@orchard/partitioner) picks single / pipeline / tensor / hybrid by predicted
 *   speed among the layouts the engine runs (it is told the engine's capabilities), so its layout is
 *   used as it is, uneven tensor groups included.
 * - `pipeline` / `tensor`: forced by the caller (`orchard load --strategy`, tests) over `nodes` nodes
 *   (default 2), those with the most free memory first; layers and heads split evenly, and the engine's
 *   `canRun` says whether that is possible.
 */
import { canRun, instanceLayoutOf, pipelineStages, type InstanceLayout } from '@orchard/engine';
import { InfeasibleError, plan as planModel, type Cluster, type Plan } from '@orchard/partitioner';
import { engineCapabilities } from '../models/describe.js';
import type { ModelDescription } from '../models/description.js';
import type { PlacementRequest } from '../state/placed-plan.js';
import { planRequestOf, type ServingProfile } from './profile.js';

export type { PlacementRequest };

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

/**
 * The cluster as placement should see it: without nodes that stopped answering heartbeats. A node
 * killed a moment ago stays live in the shared state until gone-after; placing on it would fail again.
 */
export function withoutSilentNodes(cluster: Cluster, o: { selfId: string; heardAt: (peer: string) => number | undefined; now: number; suspectAfterMs: number }): Cluster {
  const silent = new Set(cluster.nodes.filter((n) => n.id !== o.selfId && o.now - (o.heardAt(n.id) ?? -Infinity) > o.suspectAfterMs).map((n) => n.id));
  if (silent.size === 0) return cluster;
  return { ...cluster, nodes: cluster.nodes.filter((n) => !silent.has(n.id)), links: cluster.links.filter((l) => !silent.has(l.a) && !silent.has(l.b)) };
}

/** Nodes by free memory (most first), ties by id: deterministic on every node. */
function byFreeMemory(cluster: Cluster): Cluster['nodes'] {
  return [...cluster.nodes].sort((a, b) => b.availableBytes - a.availableBytes || (a.id < b.id ? -1 : 1));
}

export function placeForced(model: ModelDescription, cluster: Cluster, req: PlacementRequest): InstancePlan {
  const n = req.nodes ?? 2;
  if (!Number.isInteger(n) || n < 1) throw new PlacementError(`nodes must be a positive integer, got ${n}`);
  if (cluster.nodes.length < n) throw new PlacementError(`${req.strategy} over ${n} nodes needs ${n} live nodes; the pod has ${cluster.nodes.length}`);
  const nodes = byFreeMemory(cluster).slice(0, n);
  const share = model.spec.totalBytes / n;
  const short = nodes.find((x) => x.availableBytes > 0 && x.availableBytes < share);
  if (short) throw new PlacementError(`node ${short.id} has ${(short.availableBytes / 2 ** 30).toFixed(2)} GiB free, its share of the weights needs ${(share / 2 ** 30).toFixed(2)} GiB`);
  const layers = model.dims.numLayers;
  if (req.strategy === 'pipeline' && layers < n) throw new PlacementError(`a ${n}-stage pipeline needs at least ${n} layers; the model has ${layers}`);
  const layout: InstanceLayout = req.strategy === 'tensor' ? { stages: [[0, layers]], tensor: n } : { stages: pipelineStages(layers, n), tensor: 1 };
  const verdict = canRun(model.dims, layout);
  if (!verdict.ok) throw new PlacementError(`${req.strategy} over ${n} nodes: ${verdict.reason}`);
  return {
    strategy: n === 1 ? 'single' : (req.strategy as 'pipeline' | 'tensor'),
    layout,
    ranks: nodes.map((x) => x.id),
    predicted: null,
    explanation: [req.strategy === 'tensor' ? `forced tensor parallel over ${n} node(s) with the most free memory` : `forced ${n}-stage pipeline (layers split evenly) over the node(s) with the most free memory`],
  };
}

/** The planner's plan as the runners run it. */
export function layoutFromPlan(p: Pick<Plan, 'strategy' | 'stages' | 'predicted' | 'explanation'>): InstancePlan {
  return {
    strategy: p.strategy,
    layout: instanceLayoutOf(p.stages),
    ranks: p.stages.flatMap((s) => s.nodes),
    predicted: p.predicted,
    explanation: p.explanation,
  };
}

export function placeAuto(model: ModelDescription, cluster: Cluster, profile: ServingProfile): InstancePlan {
  try {
    return layoutFromPlan(planModel(model.spec, cluster, planRequestOf(profile), engineCapabilities(model)));
  } catch (err) {
    if (err instanceof InfeasibleError) throw new PlacementError(err.message);
    throw err;
  }
}

export function place(model: ModelDescription, cluster: Cluster, req: PlacementRequest, profile: ServingProfile): InstancePlan {
  if (model.unsupported) throw new PlacementError(model.unsupported);
  if (cluster.nodes.length === 0) throw new PlacementError('no live node with a profile yet');
  return req.strategy === 'auto' ? placeAuto(model, cluster, profile) : placeForced(model, cluster, req);
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
