import { linkKey } from '../../links/types.js';
import type { EventOf } from '../events.js';
import type { ClusterState } from '../types.js';

/** Latest measurement of one pair over one path replaces the previous one; links to gone nodes are ignored. */
export function applyLinkMeasured(state: ClusterState, e: EventOf<'link-measured'>): ClusterState {
  const { link } = e;
  if (state.nodes[link.a]?.status !== 'live' || state.nodes[link.b]?.status !== 'live') return state;
  return Object.freeze({ ...state, links: Object.freeze({ ...state.links, [linkKey(link)]: Object.freeze(link) }) });
}
