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

export function applyModelFailed(state: ClusterState, e: EventOf<'model-failed'>): ClusterState {
  const entry = Object.freeze({ model: e.model, reason: e.reason, attempts: e.attempts, at: e.at });
  return Object.freeze({ ...state, failedModels: Object.freeze({ ...state.failedModels, [e.model]: entry }) });
}

export function applyModelCleared(state: ClusterState, e: EventOf<'model-cleared'>): ClusterState {
  if (!(e.model in state.failedModels)) return state;
  const { [e.model]: _cleared, ...rest } = state.failedModels;
  return Object.freeze({ ...state, failedModels: Object.freeze(rest) });
}
