/**
 * Whether this node can reach the whole pod, for `orchard status`: the members it lost and what their
 * silence most likely means. Pure: the state, what the dialer knows and the heals in; a report out.
 *
 * One side of a split cannot tell a dead peer from a cut network for sure; the dial tells the likely
 * case. A refused dial (ECONNREFUSED) means the peer's host answers but no daemon listens: it is down.
 * A dial that gets no answer at all (timeout, host or network unreachable) means the path is cut: the
 * pod is most likely split, each side serving on its own with its own coordinator until the path comes
 * back, when the two merge (replication.ts, merge.ts). A member that said goodbye is neither.
 */
import type { Heal } from './replication.js';
import type { ClusterState } from './types.js';

export interface LostPeer {
  peerId: string;
  /** When its connection dropped (ms since the epoch). */
  since?: number;
  attempts: number;
  message: string;
  /** The last dial's error, when the dialer says it. */
  lastError?: string | null;
}

export type UnreachableCause = 'no-answer' | 'refused' | 'silent';

export interface PartitionReport {
  /** Members this node cannot reach (and that did not say goodbye). */
  unreachable: { peerId: string; name: string | null; since: number | null; cause: UnreachableCause; message: string }[];
  /** Some of them get no answer at all: most likely the network between is cut and the pod split in two. */
  split: boolean;
  /** One line for people, or null when the whole pod is reachable. */
  message: string | null;
  /** The last time this node (as coordinator) merged another side's history back in. */
  lastHeal: (Heal & { agoSec: number }) | null;
}

const REFUSED = /ECONNREFUSED|connection refused/i;

export function causeOf(lost: LostPeer): UnreachableCause {
  if (!lost.attempts || !lost.lastError) return 'silent';
  return REFUSED.test(lost.lastError) ? 'refused' : 'no-answer';
}

export function partitionReport(input: { state: ClusterState; selfId: string; lost: LostPeer[]; heals: Heal[]; now: number }): PartitionReport {
  const { state, selfId, now } = input;
  const byId = new Map(input.lost.map((l) => [l.peerId, l]));
  const unreachable: PartitionReport['unreachable'] = [];
  for (const l of input.lost) {
    const node = state.nodes[l.peerId];
    // Peers the pod never counted as members (another pod's node, a relay) are not the pod's concern here.
    if (l.peerId === selfId || !node || node.leftReason === 'shutdown') continue;
    unreachable.push({ peerId: l.peerId, name: node.name, since: l.since ?? null, cause: causeOf(l), message: l.message });
  }
  // Members the state has marked gone for silence that the dialer does not track (no direct connection).
  for (const n of Object.values(state.nodes)) {
    if (n.peerId === selfId || n.status !== 'gone' || n.leftReason !== 'silent' || byId.has(n.peerId)) continue;
    unreachable.push({ peerId: n.peerId, name: n.name, since: n.leftAt, cause: 'silent', message: `${n.name} (${n.peerId}) went silent` });
  }
  unreachable.sort((a, b) => (a.peerId < b.peerId ? -1 : 1));
  const split = unreachable.some((u) => u.cause === 'no-answer');
  const names = (us: typeof unreachable) => us.map((u) => u.name ?? u.peerId).join(', ');
  const cut = unreachable.filter((u) => u.cause === 'no-answer');
  const down = unreachable.filter((u) => u.cause === 'refused');
  const silent = unreachable.filter((u) => u.cause === 'silent');
  const parts = [
    cut.length ? `${names(cut)} ${cut.length === 1 ? 'does' : 'do'} not answer: the network between is likely cut and the pod split (each side serves on its own; they merge back when they reconnect)` : '',
    down.length ? `${names(down)} refuse${down.length === 1 ? 's' : ''} connections: the daemon there is not running` : '',
    silent.length ? `${names(silent)} went silent` : '',
  ].filter(Boolean);
  const last = input.heals[input.heals.length - 1];
  return {
    unreachable,
    split,
    message: parts.length ? `${parts.join('; ')}.` : null,
    lastHeal: last ? { ...last, agoSec: Math.round((now - last.at) / 1000) } : null,
  };
}
