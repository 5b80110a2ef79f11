import type { EventOf } from '../events.js';
import type { ClusterState } from '../types.js';

/** New profile for a node; a profile from an unknown node also makes it known (and live). */
export function applyProfileUpdated(state: ClusterState, e: EventOf<'profile-updated'>): ClusterState {
  const p = e.profile;
  const prev = state.nodes[p.peerId];
  const entry = Object.freeze(
    prev
      ? { ...prev, name: p.name, profile: p }
      : { peerId: p.peerId, name: p.name, status: 'live' as const, joinedAt: p.updatedAt, leftAt: null, leftReason: null, profile: p },
  );
  return Object.freeze({ ...state, nodes: Object.freeze({ ...state.nodes, [p.peerId]: entry }) });
}
