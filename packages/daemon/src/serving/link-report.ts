/**
 * Which transport each data-plane link of an instance uses (RDMA with its device, or TCP with the reason),
 * as the runners chose at setup. A daemon knows its own runners' choices from their 'ready' message and
 * learns the other nodes' from a 'links' serve message, re-sent now and then because gossip may drop one;
 * `/api/instances` and `orchard status` show the union.
 */
import type { RunnerLink } from '../runner/protocol.js';

/** One end of one link: rank `rank`'s view of its link to `peer`. */
export interface InstanceLink extends RunnerLink {
  rank: number;
}

export interface LinksMessage {
  type: 'links';
  from: string;
  instance: string;
  ranks: { rank: number; links: RunnerLink[] }[];
}

/** Reasons can quote library errors; the gossip message stays small. */
const MAX_REASON = 300;

export class DataPlaneLinks {
  readonly #byInstance = new Map<string, Map<number, RunnerLink[]>>();

  record(instance: string, rank: number, links: RunnerLink[]): void {
    let ranks = this.#byInstance.get(instance);
    if (!ranks) this.#byInstance.set(instance, (ranks = new Map()));
    ranks.set(
      rank,
      links.map((l) => ({
        peer: l.peer,
        transport: l.transport === 'fallback' ? 'tcp' : l.transport,
        reason: l.reason.slice(0, MAX_REASON),
        ...(l.encryption !== undefined ? { encryption: l.encryption } : {}),
      })),
    );
  }

  /** Accepts only ranks the plan puts on the sender: a node cannot speak for another's runners. */
  accept(m: LinksMessage, ranksOfPlan: readonly string[] | undefined): void {
    if (!ranksOfPlan) return;
    for (const r of m.ranks) if (ranksOfPlan[r.rank] === m.from) this.record(m.instance, r.rank, r.links);
  }

  /** What this node announces for `instance`: its own ranks' links, or null when none is known yet. */
  message(selfId: string, instance: string, ownRanks: Iterable<number>): LinksMessage | null {
    const known = this.#byInstance.get(instance);
    const ranks = [...ownRanks].flatMap((rank) => {
      const links = known?.get(rank);
      return links ? [{ rank, links }] : [];
    });
    return ranks.length ? { type: 'links', from: selfId, instance, ranks } : null;
  }

  /** Every known link end of `instance`, by rank then peer. */
  of(instance: string): InstanceLink[] {
    const ranks = this.#byInstance.get(instance);
    if (!ranks) return [];
    return [...ranks]
      .sort(([a], [b]) => a - b)
      .flatMap(([rank, links]) => links.map((l) => ({ rank, ...l })).sort((a, b) => a.peer - b.peer));
  }

  /** Forgets instances that no longer exist. */
  retain(exists: (instance: string) => boolean): void {
    for (const id of this.#byInstance.keys()) if (!exists(id)) this.#byInstance.delete(id);
  }
}
