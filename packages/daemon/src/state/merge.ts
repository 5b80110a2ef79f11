/**
 * Two histories of one pod made one again: what the coordinator does when a partition heals and it
 * hears a peer whose log it has not seen (replication.ts). Pure: both states in, the merged state out.
 *
 * While split, each side had its own coordinator and wrote its own events. Nothing either side wrote
 * is dropped; where they disagree, a rule decides:
 *
 * - Nodes: a node live on either side is live (the side that marked it gone only lost sight of it; if
 *   nobody hears it now, the coordinator's silence sweep marks it gone again). Both live: the later
 *   join; both gone: the later departure. The newer profile (`updatedAt`) is kept either way.
 * - Links: per pair and path, the later measurement.
 * - Instances: every instance either side holds survives. A removal made on one side during the split
 *   was made because the other side's nodes went silent; the heal proves them back. An instance both
 *   hold keeps a supersede mark either side gave it (one side may merge before the coordinator does).
 * - Duplicates: instances of one model placed on the two sides independently (each side holds one the
 *   other never saw). One is kept; it supersedes the other, which takes no new requests once the keeper
 *   serves and retires when its driver reports it idle (serving/coordinator.ts `retire`, at most
 *   RETIRE_AFTER_MS after the merge), so a stream running on it is not cut. The keeper is, in order:
 *   the one on more nodes, the one of the merging coordinator's side (the smallest live peer id), the
 *   earlier placed, the smaller instance id.
 * - Failed models: a mark from either side stays (the later one when both have it); loading the model
 *   explicitly, or a change of its files, clears it as before.
 */
import type { InstanceEntry, ClusterState, NodeEntry } from './types.js';

export interface Superseded {
  model: string;
  /** The instance kept. */
  keeper: string;
  /** The duplicate that finishes its requests, then retires. */
  retiring: string;
}

export interface MergeResult {
  state: ClusterState;
  /** Duplicate instances resolved by the rule above. */
  superseded: Superseded[];
}

function mergeNode(a: NodeEntry, b: NodeEntry): NodeEntry {
  let base: NodeEntry;
  if (a.status !== b.status) base = a.status === 'live' ? a : b;
  else if (a.status === 'live') base = b.joinedAt > a.joinedAt ? b : a;
  else base = (b.leftAt ?? 0) > (a.leftAt ?? 0) ? b : a;
  const profile = !a.profile ? b.profile : !b.profile ? a.profile : b.profile.updatedAt > a.profile.updatedAt ? b.profile : a.profile;
  return Object.freeze({ ...base, profile, name: profile?.name ?? base.name });
}

function mergeRecords<T>(a: Readonly<Record<string, T>>, b: Readonly<Record<string, T>>, pick: (x: T, y: T) => T): Record<string, T> {
  const out: Record<string, T> = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = k in a ? pick(a[k], v) : v;
  return out;
}

/** Keeper order: more nodes, ours, earlier placed, smaller id. */
function keeperOrder(ours: Set<string>) {
  return (x: InstanceEntry, y: InstanceEntry) =>
    new Set(y.nodes).size - new Set(x.nodes).size ||
    Number(ours.has(y.id)) - Number(ours.has(x.id)) ||
    x.placedAt - y.placedAt ||
    (x.id < y.id ? -1 : x.id > y.id ? 1 : 0);
}

/**
 * `ours`: the merging coordinator's state; `theirs`: the snapshot of the side it lost sight of.
 * `now`: when the merge happens (a retiring duplicate's bound counts from it).
 */
export function mergeStates(ours: ClusterState, theirs: ClusterState, now: number): MergeResult {
  const nodes = mergeRecords(ours.nodes, theirs.nodes, mergeNode);
  const links = mergeRecords(ours.links, theirs.links, (x, y) => (y.measuredAt > x.measuredAt ? y : x));
  const failedModels = mergeRecords(ours.failedModels, theirs.failedModels, (x, y) => (y.at > x.at ? y : x));
  // An instance both hold: ours, unless theirs carries a resolution ours lacks (the other side merged
  // first, with a third node's state, and marked the keeper): dropping the mark would keep both copies.
  const instances: Record<string, InstanceEntry> = mergeRecords(ours.instances, theirs.instances, (x, y) => (!x.plan.supersedes && y.plan.supersedes ? y : x));

  const oursOnly = new Set(Object.keys(ours.instances).filter((id) => !(id in theirs.instances)));
  const theirsOnly = new Set(Object.keys(theirs.instances).filter((id) => !(id in ours.instances)));
  const superseded: Superseded[] = [];
  const involved = () => {
    const s = new Set<string>();
    for (const e of Object.values(instances)) if (e.plan.supersedes && instances[e.plan.supersedes]) s.add(e.id).add(e.plan.supersedes);
    return s;
  };
  const models = [...new Set([...oursOnly, ...theirsOnly].map((id) => instances[id].model))].sort();
  for (const model of models) {
    for (;;) {
      // Instances of the model only one side had, not already in a succession (an upgrade under way).
      const busy = involved();
      const free = Object.values(instances).filter((e) => e.model === model && (oursOnly.has(e.id) || theirsOnly.has(e.id)) && !busy.has(e.id));
      const sorted = free.sort(keeperOrder(oursOnly));
      const keeper = sorted[0];
      if (!keeper) break;
      const otherSide = oursOnly.has(keeper.id) ? theirsOnly : oursOnly;
      const loser = sorted.find((e) => otherSide.has(e.id));
      if (!loser) break;
      instances[keeper.id] = Object.freeze({ ...keeper, plan: { ...keeper.plan, supersedes: loser.id, supersedesSince: now } });
      superseded.push({ model, keeper: keeper.id, retiring: loser.id });
    }
  }
  return {
    state: Object.freeze({
      nodes: Object.freeze(nodes),
      links: Object.freeze(links),
      instances: Object.freeze(instances),
      failedModels: Object.freeze(failedModels),
    }),
    superseded,
  };
}
