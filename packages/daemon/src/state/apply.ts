/** Folds one event into the state: one reducer per event type, exhaustive by construction. */
import type { ClusterEvent } from './events.js';
import { applyInstancePlaced, applyInstanceRemoved, applyModelCleared, applyModelFailed } from './reducers/instances.js';
import { applyLinkMeasured } from './reducers/link-measured.js';
import { applyNodeJoined } from './reducers/node-joined.js';
import { applyNodeLeft } from './reducers/node-left.js';
import { applyProfileUpdated } from './reducers/profile-updated.js';
import type { ClusterState } from './types.js';

export function applyEvent(state: ClusterState, event: ClusterEvent): ClusterState {
  switch (event.type) {
    case 'node-joined':
      return applyNodeJoined(state, event);
    case 'node-left':
      return applyNodeLeft(state, event);
    case 'profile-updated':
      return applyProfileUpdated(state, event);
    case 'link-measured':
      return applyLinkMeasured(state, event);
    case 'instance-placed':
      return applyInstancePlaced(state, event);
    case 'instance-removed':
      return applyInstanceRemoved(state, event);
    case 'model-failed':
      return applyModelFailed(state, event);
    case 'model-cleared':
      return applyModelCleared(state, event);
    default: {
      const never: never = event;
      throw new Error(`unknown cluster event ${(never as { type: string }).type}`);
    }
  }
}

export function applyEvents(state: ClusterState, events: readonly ClusterEvent[]): ClusterState {
  return events.reduce(applyEvent, state);
}

export function liveNodeIds(state: ClusterState): string[] {
  return Object.values(state.nodes)
    .filter((n) => n.status === 'live')
    .map((n) => n.peerId)
    .sort();
}
