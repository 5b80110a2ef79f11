import type { InstanceManager, PlacedPlan } from './manager.js';

/**
 * An instance as the HTTP APIs show it (`/v1/instances`, the dashboard): its placement without the
 * plan's secret, config or shape, and its live status.
 */
export function publicInstance(manager: InstanceManager, e: { id: string; model: string; placedAt: number; nodes: readonly string[]; plan: unknown }) {
  const p = e.plan as PlacedPlan;
  return {
    id: e.id,
    model: e.model,
    placedAt: e.placedAt,
    nodes: e.nodes,
    strategy: p.strategy,
    stages: p.layout.stages.map((layers, s) => ({ layers, nodes: p.ranks.slice(s * p.layout.tensor, (s + 1) * p.layout.tensor) })),
    tensorParallel: p.layout.tensor,
    requested: p.requested,
    predicted: p.predicted,
    /** Per rank and peer: the transport its data-plane link uses ('rdma' with the device, 'tcp' with why not RDMA). */
    links: manager.linksOf(e.id),
    status: manager.statusOf(e.id),
  };
}
