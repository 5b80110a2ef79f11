import type { EventOf } from '../events.js';
import type { ClusterState } from '../types.js';

/** A node is gone: kept in the table (the UI shows it greyed), its links dropped (they are re-measured on return). */
export function applyNodeLeft(state: ClusterState, e: EventOf<'node-left'>): ClusterState {
  const prev = state.nodes[e.peerId];
  if (!prev || prev.status === 'gone') return state;
  const links = Object.fromEntries(Object.entries(state.links).filter(([, l]) => l.a !== e.peerId && l.b !== e.peerId));
  return Object.freeze({
    ...state,
    nodes: Object.freeze({ ...state.nodes, [e.peerId]: Object.freeze({ ...prev, status: 'gone' as const, leftAt: e.at, leftReason: e.reason }) }),
    links: Object.freeze(links),
  });
}
