import type { EventOf } from '../events.js';
import type { ClusterState } from '../types.js';

export function applyInstancePlaced(state: ClusterState, e: EventOf<'instance-placed'>): ClusterState {
  const i = e.instance;
  const entry = Object.freeze({ id: i.id, model: i.model, placedAt: i.placedAt, nodes: Object.freeze([...i.nodes]), plan: i.plan });
  return Object.freeze({ ...state, instances: Object.freeze({ ...state.instances, [i.id]: entry }) });
}

export function applyInstanceRemoved(state: ClusterState, e: EventOf<'instance-removed'>): ClusterState {
  if (!(e.id in state.instances)) return state;
  const { [e.id]: _removed, ...rest } = state.instances;
  return Object.freeze({ ...state, instances: Object.freeze(rest) });
}
