import type { EventOf } from '../events.js';
import type { ClusterState } from '../types.js';

/** A node (re)appears: live again, profile kept until a fresh one arrives. */
export function applyNodeJoined(state: ClusterState, e: EventOf<'node-joined'>): ClusterState {
  const prev = state.nodes[e.peerId];
  const entry = Object.freeze({
    peerId: e.peerId,
    name: e.name,
    status: 'live' as const,
    joinedAt: e.at,
    leftAt: null,
    leftReason: null,
    profile: prev?.profile ?? null,
  });
  return Object.freeze({ ...state, nodes: Object.freeze({ ...state.nodes, [e.peerId]: entry }) });
}
