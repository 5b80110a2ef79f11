/**
 * Keeps one cluster state on every node.
 *
 * - Every node broadcasts a heartbeat each `heartbeatMs`; its liveness view is "heard within
 *   `goneAfterMs`" (plus itself). The coordinator is the smallest live peer id in that view.
 * - Only the coordinator writes: it turns what nodes report (heartbeats, their own profile and link
 *   measurements, goodbyes) into sequenced events `(epoch, seq)` and broadcasts them. Followers apply
 *   them in order; a gap, a new epoch or a new coordinator makes them ask for a snapshot.
 * - A node that becomes coordinator starts a new epoch from the state it already follows (a fresh
 *   node first adopts the snapshot of the pod's previous coordinator, so history survives). One that
 *   started leading before it heard the pod (a joiner with a smaller id whose first heartbeats had
 *   not crossed yet) takes over the log of any peer that led an epoch at least as late, then leads a
 *   later one; that peer does not follow it before, so the pod's instances are not dropped.
 * - Nodes own their facts: each keeps re-sending its profile and links until the shared state shows
 *   them, so nothing is lost to a dropped message or a coordinator change.
 * - A partition that heals: each side led its own epoch. The coordinator (still the smallest live peer
 *   id, now of the whole pod) hears a heartbeat whose log position it has not seen (another leader's
 *   epoch, or more of it than it holds), takes that peer's snapshot and merges it into its own state
 *   (merge.ts: nothing either side wrote is lost; duplicate instances are resolved by rule), then leads
 *   a later epoch that everyone follows. Until then a follower ignores snapshots of an epoch older than
 *   the one it holds, so a side's instances never vanish from its state in between (their runners would
 *   stop, cutting the streams they serve).
 *
 * No I/O here: messages go out through `send`, time comes from `now`, so tests drive several
 * replicas over an in-memory bus with a fake clock.
 */
import type { ControlMessage, LogPosition } from '../control/messages.js';
import { linkKey, type LinkMeasurement } from '../links/types.js';
import type { NodeProfile } from '../profile/types.js';
import { applyEvent } from './apply.js';
import { canonicalJson } from './canonical-json.js';
import { electCoordinator } from './coordinator.js';
import type { ClusterEvent } from './events.js';
import { mergeStates, type MergeResult } from './merge.js';
import { emptyState, type ClusterState } from './types.js';

export interface ReplicaOptions {
  selfId: string;
  name: string;
  bootId: string;
  now: () => number;
  send: (message: ControlMessage) => void;
  /** A node silent this long is gone. @default 5000 */
  goneAfterMs?: number;
  /** Do not claim coordination before hearing the pod for this long after start. @default 1500 */
  settleMs?: number;
  /** Re-send own facts missing from the state at most this often. @default 2000 */
  resendMs?: number;
  onEvent?: (event: ClusterEvent, state: ClusterState) => void;
  onSnapshot?: (state: ClusterState, from: string) => void;
  /**
   * This coordinator merged history it lacked: `heal` when the other side knew this node (a partition
   * healed), `join` when it never heard of it (a pod joined by a node that led alone at first).
   */
  onMerge?: (result: MergeResult, from: string, kind: 'heal' | 'join') => void;
  onDropped?: (from: string, reason: string) => void;
  /**
   * Heartbeats for one peer id alternate between two process instances (boot ids): two machines
   * share an identity (copied data dir). Reported once per peer.
   */
  onDuplicate?: (peerId: string, bootIds: string[]) => void;
}

interface Heard {
  at: number;
  name: string;
  log: LogPosition;
  bootId?: string;
  /** Boot ids seen for this peer id, most recent last (bounded). */
  boots?: string[];
}

/** A merge of another side's history (a healed partition), for status and the log. */
export interface Heal {
  at: number;
  /** The peer whose snapshot was merged. */
  from: string;
  /** The log position merged: who led it, which epoch, up to which event. */
  merged: LogPosition;
  /** Duplicate instances resolved: the one kept and the one that retires once idle. */
  superseded: MergeResult['superseded'];
}

const positionKey = (p: Pick<LogPosition, 'leader' | 'epoch'>) => `${p.leader}\0${p.epoch}`;

/** Fields that change every refresh without meaning anything for placement. */
function profileEssence(p: NodeProfile): string {
  const { updatedAt: _u, memory, diskFreeBytes: _d, ...rest } = p;
  // Available memory matters, but only in steps of 256 MiB; otherwise every refresh is an event.
  return canonicalJson({ ...rest, memory: { total: memory.totalBytes, avail: Math.round(memory.availableBytes / 2 ** 28) } });
}

export class Replica {
  readonly selfId: string;
  #opts: Required<Pick<ReplicaOptions, 'goneAfterMs' | 'settleMs' | 'resendMs'>> & ReplicaOptions;
  #state: ClusterState = emptyState;
  #pos: LogPosition = { epoch: 0, leader: '', seq: 0 };
  #heard = new Map<string, Heard>();
  #startedAt: number;
  #profile: NodeProfile | null = null;
  #links: LinkMeasurement[] = [];
  #lastProfileSent = -Infinity;
  #lastLinksSent = -Infinity;
  #lastSyncRequest = -Infinity;
  #lastSnapshotSent = -Infinity;
  #adoptFrom: string | null = null;
  /** The log position the peer we adopt or merge from announced (its leader and epoch). */
  #adoptPos: LogPosition | null = null;
  /** Histories this node holds: leader and epoch -> the last event of it held (followed, led or merged). */
  #known = new Map<string, number>();
  #heals: Heal[] = [];
  #duplicates = new Set<string>();
  #saidGoodbye = new Set<string>();
  #stopped = false;

  constructor(options: ReplicaOptions) {
    this.selfId = options.selfId;
    this.#opts = { goneAfterMs: 5000, settleMs: 1500, resendMs: 2000, ...options };
    this.#startedAt = options.now();
  }

  get state(): ClusterState {
    return this.#state;
  }
  get position(): LogPosition {
    return { ...this.#pos };
  }
  /** This node leads the current epoch and still sees itself as the smallest live peer. */
  get isCoordinator(): boolean {
    return this.#pos.leader === this.selfId && this.coordinator() === this.selfId;
  }

  /** Peers heard recently, plus self. */
  liveView(): string[] {
    const now = this.#opts.now();
    const ids = [this.selfId];
    for (const [id, h] of this.#heard) if (now - h.at <= this.#opts.goneAfterMs) ids.push(id);
    return ids.sort();
  }

  /** When this replica last heard from `peerId` (now for itself), or undefined if never. */
  heardAt(peerId: string): number | undefined {
    return peerId === this.selfId ? this.#opts.now() : this.#heard.get(peerId)?.at;
  }

  /** The histories of other sides of a healed partition merged by this node, most recent last (at most 8). */
  heals(): Heal[] {
    return [...this.#heals];
  }

  /** Peer ids seen running as two processes at once. */
  duplicates(): string[] {
    return [...this.#duplicates];
  }

  coordinator(): string {
    return electCoordinator(this.liveView()) ?? this.selfId;
  }

  setProfile(profile: NodeProfile): void {
    this.#profile = profile;
    this.#reconcileOwnFacts(true);
  }

  /** Replaces this node's own link measurements (the ones it ran). */
  setLinks(links: LinkMeasurement[]): void {
    this.#links = links;
    this.#reconcileOwnFacts(true);
  }

  /** Leader-only decisions made elsewhere (e.g. placement) enter the log here. */
  propose(event: ClusterEvent): boolean {
    if (!this.isCoordinator) return false;
    this.#emit(event);
    return true;
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#opts.send({ type: 'goodbye', from: this.selfId });
  }

  /** Called every heartbeat interval. */
  tick(): void {
    if (this.#stopped) return;
    const now = this.#opts.now();
    this.#opts.send({ type: 'heartbeat', from: this.selfId, name: this.#opts.name, bootId: this.#opts.bootId, at: now, log: this.position });
    const coordinator = this.coordinator();
    if (coordinator === this.selfId) {
      if (this.#pos.leader !== this.selfId && now - this.#startedAt >= this.#opts.settleMs) this.#claim(now);
      if (this.isCoordinator) this.#leaderSweep(now);
    } else if (this.#pos.leader !== coordinator) {
      this.#requestSync(coordinator, 'follow', now);
    }
    this.#reconcileOwnFacts(false);
  }

  handle(msg: ControlMessage): void {
    if (this.#stopped) return;
    if (msg.from === this.selfId) {
      // Our own id from another process: this node's identity is in use elsewhere too.
      if (msg.type === 'heartbeat' && msg.bootId !== this.#opts.bootId && !this.#duplicates.has(this.selfId)) {
        this.#duplicates.add(this.selfId);
        this.#opts.onDuplicate?.(this.selfId, [this.#opts.bootId, msg.bootId]);
      }
      return;
    }
    const now = this.#opts.now();
    switch (msg.type) {
      case 'heartbeat': {
        const prev = this.#heard.get(msg.from);
        const boots = [...(prev?.boots ?? [])];
        if (boots[boots.length - 1] !== msg.bootId) {
          // A restart moves to a new boot id for good; going back to an earlier one means two live copies.
          if (boots.includes(msg.bootId) && !this.#duplicates.has(msg.from)) {
            this.#duplicates.add(msg.from);
            this.#opts.onDuplicate?.(msg.from, [...new Set([...boots, msg.bootId])]);
          }
          boots.push(msg.bootId);
          if (boots.length > 8) boots.shift();
        }
        this.#heard.set(msg.from, { at: now, name: msg.name, log: msg.log, bootId: msg.bootId, boots });
        this.#saidGoodbye.delete(msg.from);
        if (this.isCoordinator) {
          // A peer holding history we lack: it led (or followed) an epoch we never saw, or more of one
          // than we hold. Either we started leading without hearing it (a node that joins with a
          // smaller id, before its first heartbeats crossed), or a partition healed and its side led on
          // its own. Merge its log into ours, then lead a later epoch; it waits for that (see 'snapshot').
          const p = msg.log;
          if (this.#unseen(p)) {
            if (this.#adoptFrom === null || now - this.#lastSyncRequest >= 2000) {
              this.#adoptFrom = msg.from;
              this.#adoptPos = p;
              this.#requestSync(msg.from, 'adopt', now, true);
            }
            // It joins with its history: marked live before the merge, it would be placed on (an
            // upgrade, a replacement) by decisions that cannot see the instances it already runs.
            return;
          }
          if (this.#state.nodes[msg.from]?.status !== 'live') this.#emit({ type: 'node-joined', peerId: msg.from, name: msg.name, at: now });
        } else if (msg.from === this.coordinator()) {
          const p = msg.log;
          const behind = p.leader !== this.#pos.leader || p.epoch !== this.#pos.epoch || p.seq > this.#pos.seq;
          if (behind && p.leader === msg.from) this.#requestSync(msg.from, 'follow', now);
        }
        return;
      }
      case 'profile': {
        if (!this.isCoordinator || msg.profile.peerId !== msg.from) return;
        this.#ensureJoined(msg.from, msg.profile.name, now);
        const cur = this.#state.nodes[msg.from]?.profile;
        if (!cur || profileEssence(cur) !== profileEssence(msg.profile)) this.#emit({ type: 'profile-updated', profile: msg.profile });
        return;
      }
      case 'links': {
        if (!this.isCoordinator) return;
        for (const link of msg.links) {
          if (link.measuredBy !== msg.from || (link.a !== msg.from && link.b !== msg.from)) {
            this.#opts.onDropped?.(msg.from, `link ${link.a}-${link.b} not measured by the sender`);
            continue;
          }
          const cur = this.#state.links[linkKey(link)];
          if (!cur || cur.measuredAt < link.measuredAt) this.#emit({ type: 'link-measured', link });
        }
        return;
      }
      case 'event': {
        if (msg.from !== this.#pos.leader || msg.epoch !== this.#pos.epoch) {
          if (msg.from === this.coordinator()) this.#requestSync(msg.from, 'follow', now);
          return;
        }
        if (msg.seq <= this.#pos.seq) return; // duplicate
        if (msg.seq !== this.#pos.seq + 1) {
          this.#requestSync(msg.from, 'follow', now);
          return;
        }
        this.#state = applyEvent(this.#state, msg.event);
        this.#pos = { ...this.#pos, seq: msg.seq };
        this.#cover(this.#pos);
        this.#opts.onEvent?.(msg.event, this.#state);
        return;
      }
      case 'sync-request': {
        if (msg.to !== this.selfId) return;
        // Followers only trust the coordinator's log; a node adopting history takes anyone's.
        if (msg.purpose === 'follow' && !this.isCoordinator) return;
        // Requesters retry every second; answering more often than this only amplifies a flood.
        if (now - this.#lastSnapshotSent < 250) return;
        this.#lastSnapshotSent = now;
        this.#opts.send({ type: 'snapshot', from: this.selfId, epoch: this.#pos.epoch, seq: this.#pos.seq, state: this.#state as never });
        return;
      }
      case 'snapshot': {
        if (this.#adoptFrom === msg.from && !this.isCoordinator) {
          this.#adoptFrom = null;
          this.#coverAdopted(msg.epoch, msg.seq);
          this.#state = msg.state as ClusterState;
          this.#pos = { epoch: msg.epoch, leader: '', seq: msg.seq };
          this.#opts.onSnapshot?.(this.#state, msg.from);
          return;
        }
        if (this.#adoptFrom === msg.from && this.isCoordinator) {
          // History we lack (see 'heartbeat'): merged into ours, then led on in a later epoch.
          this.#adoptFrom = null;
          const merged = this.#adoptPos;
          this.#coverAdopted(msg.epoch, msg.seq);
          const theirs = msg.state as ClusterState;
          // The other side knew this node (and lost it): a partition healed. It never heard of us: we joined.
          const kind = this.selfId in theirs.nodes ? 'heal' : 'join';
          const result = mergeStates(this.#state, theirs, now);
          this.#state = result.state;
          this.#pos = { epoch: Math.max(this.#pos.epoch, msg.epoch), leader: '', seq: Math.max(this.#pos.seq, msg.seq) };
          if (kind === 'heal') {
            const heal: Heal = { at: now, from: msg.from, merged: merged ?? { epoch: msg.epoch, leader: '', seq: msg.seq }, superseded: result.superseded };
            this.#heals = [...this.#heals.slice(-7), heal];
          }
          this.#opts.onMerge?.(result, msg.from, kind);
          this.#opts.onSnapshot?.(this.#state, msg.from);
          this.#lead(now);
          this.#reconcileOwnFacts(true);
          return;
        }
        if (msg.from !== this.coordinator()) return;
        // A new coordinator at an epoch no later than the one we led has not seen our history: it
        // takes it over when it hears our heartbeat and then leads a later epoch; following it now
        // would drop our history (the instances running in the pod).
        if (this.#pos.leader === this.selfId && msg.epoch <= this.#pos.epoch) return;
        // The same holds for a follower of another leader's epoch (the other side of a healed
        // partition): the coordinator merges what it lacks, then leads an epoch later than ours.
        if (msg.epoch < this.#pos.epoch || (msg.epoch === this.#pos.epoch && this.#pos.leader !== '' && this.#pos.leader !== msg.from)) return;
        this.#state = msg.state as ClusterState;
        this.#pos = { epoch: msg.epoch, leader: msg.from, seq: msg.seq };
        this.#cover(this.#pos);
        this.#opts.onSnapshot?.(this.#state, msg.from);
        this.#reconcileOwnFacts(true);
        return;
      }
      case 'goodbye': {
        this.#heard.delete(msg.from);
        // Remembered so that whoever leads next records a clean shutdown, not silence.
        this.#saidGoodbye.add(msg.from);
        if (this.isCoordinator && this.#state.nodes[msg.from]?.status === 'live') {
          this.#emit({ type: 'node-left', peerId: msg.from, at: now, reason: 'shutdown' });
        }
        return;
      }
      default: {
        const never: never = msg;
        return never;
      }
    }
  }

  #claim(now: number): void {
    // A node with no history first adopts the log of the pod's last coordinator, if anyone has one.
    if (this.#pos.epoch === 0) {
      let best: [string, Heard] | null = null;
      for (const entry of this.#heard) {
        const log = entry[1].log;
        if (log.epoch > 0 && (!best || log.epoch > best[1].log.epoch || (log.epoch === best[1].log.epoch && log.seq > best[1].log.seq))) best = entry;
      }
      if (best && this.#adoptFrom === null) {
        this.#adoptFrom = best[0];
        this.#adoptPos = best[1].log;
        this.#requestSync(best[0], 'adopt', now, true);
        return;
      }
      if (this.#adoptFrom !== null && now - this.#lastSyncRequest < 2000) return; // still waiting for it
      this.#adoptFrom = null;
    }
    this.#lead(now);
  }

  /** Starts leading a new epoch from the state this node holds. */
  #lead(now: number): void {
    const seenEpochs = [...this.#heard.values()].map((h) => h.log.epoch);
    const epoch = Math.max(this.#pos.epoch, ...seenEpochs) + 1;
    this.#pos = { epoch, leader: this.selfId, seq: this.#pos.seq };
    this.#cover(this.#pos);
    // Nodes the state says are live but we never heard get one full timeout from now.
    for (const n of Object.values(this.#state.nodes)) {
      if (n.status === 'live' && n.peerId !== this.selfId && !this.#heard.has(n.peerId) && !this.#saidGoodbye.has(n.peerId)) {
        this.#heard.set(n.peerId, { at: now, name: n.name, log: { epoch: 0, leader: '', seq: 0 } });
      }
    }
    this.#opts.send({ type: 'snapshot', from: this.selfId, epoch: this.#pos.epoch, seq: this.#pos.seq, state: this.#state as never });
    this.#ensureJoined(this.selfId, this.#opts.name, now);
  }

  #leaderSweep(now: number): void {
    this.#ensureJoined(this.selfId, this.#opts.name, now);
    for (const n of Object.values(this.#state.nodes)) {
      if (n.status !== 'live' || n.peerId === this.selfId) continue;
      const h = this.#heard.get(n.peerId);
      if (!h || now - h.at > this.#opts.goneAfterMs) {
        this.#emit({ type: 'node-left', peerId: n.peerId, at: now, reason: this.#saidGoodbye.has(n.peerId) ? 'shutdown' : 'silent' });
      }
    }
    for (const [id, h] of this.#heard) {
      if (this.#unseen(h.log)) continue; // joins once its history is merged (see 'heartbeat')
      if (now - h.at <= this.#opts.goneAfterMs && this.#state.nodes[id]?.status !== 'live') this.#emit({ type: 'node-joined', peerId: id, name: h.name, at: now });
    }
  }

  #ensureJoined(peerId: string, name: string, now: number): void {
    if (this.#state.nodes[peerId]?.status !== 'live') this.#emit({ type: 'node-joined', peerId, name, at: now });
  }

  /** Whether `p` is history this node does not hold (another leader's epoch, or more of it). */
  #unseen(p: LogPosition): boolean {
    if (p.epoch === 0 || p.leader === '' || p.leader === this.selfId) return false;
    return (this.#known.get(positionKey(p)) ?? -1) < p.seq;
  }

  #cover(p: LogPosition): void {
    if (p.leader === '') return;
    const k = positionKey(p);
    if ((this.#known.get(k) ?? -1) < p.seq) this.#known.set(k, p.seq);
    if (this.#known.size > 256) this.#known.delete(this.#known.keys().next().value!);
  }

  /** The snapshot of the peer we adopted or merged from holds its announced history (and, same epoch, up to `seq`). */
  #coverAdopted(epoch: number, seq: number): void {
    const p = this.#adoptPos;
    this.#adoptPos = null;
    if (!p) return;
    this.#cover(p);
    if (p.epoch === epoch) this.#cover({ ...p, seq: Math.max(p.seq, seq) });
  }

  #emit(event: ClusterEvent): void {
    this.#state = applyEvent(this.#state, event);
    this.#pos = { ...this.#pos, seq: this.#pos.seq + 1 };
    this.#cover(this.#pos);
    this.#opts.send({ type: 'event', from: this.selfId, epoch: this.#pos.epoch, seq: this.#pos.seq, event });
    this.#opts.onEvent?.(event, this.#state);
  }

  #requestSync(to: string, purpose: 'follow' | 'adopt', now: number, force = false): void {
    if (!force && now - this.#lastSyncRequest < 1000) return;
    this.#lastSyncRequest = now;
    this.#opts.send({ type: 'sync-request', from: this.selfId, to, purpose });
  }

  /** Re-send own profile/links while the shared state does not show them. */
  #reconcileOwnFacts(immediate: boolean): void {
    const now = this.#opts.now();
    const me = this.#state.nodes[this.selfId];
    if (this.#profile) {
      const missing = !me?.profile || profileEssence(me.profile) !== profileEssence(this.#profile);
      if (missing && (immediate || now - this.#lastProfileSent >= this.#opts.resendMs)) {
        this.#lastProfileSent = now;
        if (this.isCoordinator) {
          this.#ensureJoined(this.selfId, this.#opts.name, now);
          this.#emit({ type: 'profile-updated', profile: this.#profile });
        } else this.#opts.send({ type: 'profile', from: this.selfId, profile: this.#profile });
      }
    }
    const stale = this.#links.filter((l) => {
      const cur = this.#state.links[linkKey(l)];
      const bothLive = this.#state.nodes[l.a]?.status === 'live' && this.#state.nodes[l.b]?.status === 'live';
      return bothLive && (!cur || cur.measuredAt < l.measuredAt);
    });
    if (stale.length && (immediate || now - this.#lastLinksSent >= this.#opts.resendMs)) {
      this.#lastLinksSent = now;
      if (this.isCoordinator) for (const link of stale) this.#emit({ type: 'link-measured', link });
      else this.#opts.send({ type: 'links', from: this.selfId, links: stale });
    }
  }
}
