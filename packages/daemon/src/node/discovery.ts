/**
 * Dials every peer that discovery (mDNS, bootstrap) reports, with a short timeout, and remembers
 * the ones that refused us ("not in this cluster") so they are neither re-dialled in a tight loop
 * nor reported as crypto errors. A refused peer is tried again after 1 s, then twice as long each time
 * up to `retryMs`: discovery reports a peer it already knows only once, a first dial that timed out on
 * a busy machine must not keep two pod members apart for good, and a peer refused only because it
 * was still starting should join within a second or two, not a whole retry period later.
 *
 * A member (a peer we were connected to) whose last connection drops is dialled again on the schedule
 * of redial-schedule.ts (backoff, capped, jittered; each dial bounded by the dial timeout) until it
 * answers: libp2p reports a known peer to `peer:discovery` only once, so without this a partition
 * that heals (a cable, a firewall rule, a Wi-Fi drop) would leave the two sides apart for good, each
 * with its own coordinator. Every mDNS answer naming a member we lost makes its dial due at once.
 *
 * A member that stays connected but silent (no heartbeat for `silentAfterMs`, told by `heardAt`) is
 * hung up on, so that it is dialled afresh. After a heal both ends often dial at once and hold two
 * connections; gossipsub sends over a stream on one of them and, when that one closes, opens no new
 * stream on the other while libp2p still calls the peer connected: the pod would split again for good.
 */
import type { Logger } from 'pino';
import { classifyDialError, dialErrorText, dialFailureMessage, type DialFailure } from './dial-errors.js';
import type { OrchardNode } from './create-node.js';
import { connected, DEFAULT_REDIAL_POLICY, dropped, due, emptySchedule, failed, rediscovered, type RedialPolicy, type RedialSchedule } from './redial-schedule.js';

export function isLoopbackAddr(addr: string): boolean {
  return addr.startsWith('/ip4/127.') || addr.startsWith('/ip6/::1/');
}

export interface RefusedPeer {
  peerId: string;
  addresses: string[];
  reason: DialFailure;
  message: string;
  lastTriedAt: number;
  /** Failed dials in a row. */
  attempts: number;
  /** A pod member whose connection dropped: since when it has been unreachable (ms since the epoch). */
  since?: number;
  /** A pod member whose connection dropped: what its last dial said. */
  lastError?: string | null;
}

type PeerLike = { toString(): string };
type DiscoveredPeer = { id: PeerLike; multiaddrs: PeerLike[] };

/** The first retry of a refused peer, ms; each further one waits twice as long, up to the retry period. */
const FIRST_RETRY_MS = 1000;
/** A member not heard at all on a connection this old has no working gossip stream on it. */
const FRESH_SILENCE_MS = 2500;
/**
 * When discovery sees a lost member again, the end with the larger peer id waits this long before
 * dialling, so that usually one connection forms rather than two crossing ones.
 */
const YIELD_MS = 700;

export class AutoDialer {
  #node: OrchardNode;
  #log: Logger;
  #privatePod: boolean;
  #timeoutMs: number;
  #retryMs: number;
  #refused = new Map<string, RefusedPeer>();
  /** What discovery last said about each refused peer, to dial it again with. */
  #seen = new Map<string, DiscoveredPeer>();
  #inFlight = new Set<string>();
  #retry: NodeJS.Timeout;
  /** Peers we have been connected to, with the id object libp2p gave us (to dial them by). */
  #members = new Map<string, PeerLike>();
  /** LAN addresses each member was last discovered at (mDNS, bootstrap). */
  #memberAddrs = new Map<string, PeerLike[]>();
  #redial: RedialSchedule = emptySchedule;
  #policy: RedialPolicy;
  #random: () => number;
  #stopped = false;
  #heardAt?: (peerId: string) => number | undefined;
  #silentAfterMs: number;
  /** When each member's current run of connections began. */
  #connectedSince = new Map<string, number>();
  #onDiscovery = (evt: CustomEvent<DiscoveredPeer>) => void this.dial(evt.detail);
  /** mDNS answers (every query round, unlike `peer:discovery`): a lost member seen again is dialled now. */
  #onMdnsPeer = (evt: CustomEvent<DiscoveredPeer>) => {
    const id = evt.detail.id.toString();
    if (!this.#members.has(id)) return;
    this.#memberAddrs.set(id, evt.detail.multiaddrs);
    this.#redial = rediscovered(this.#redial, id, this.#rediscoveredDue(id));
    this.#redialDue();
  };
  #onConnect = (evt: CustomEvent<PeerLike>) => {
    const id = evt.detail.toString();
    const seen = this.#seen.get(id);
    if (seen) this.#memberAddrs.set(id, seen.multiaddrs);
    this.#refused.delete(id);
    this.#seen.delete(id);
    this.#members.set(id, evt.detail);
    if (!this.#connectedSince.has(id)) this.#connectedSince.set(id, Date.now());
    const lost = this.#redial.get(id);
    if (lost) this.#log.info({ peer: id, unreachableMs: Date.now() - lost.since, dials: lost.attempts }, 'peer reachable again');
    this.#redial = connected(this.#redial, id);
  };
  #onDisconnect = (evt: CustomEvent<PeerLike>) => {
    const id = evt.detail.toString();
    if (this.#stopped || !this.#members.has(id) || this.#node.getConnections(evt.detail as never).length > 0) return;
    this.#connectedSince.delete(id);
    // Only pod members (heard on the control topic) are dialled again: not another pod's node or a relay.
    if (this.#heardAt && this.#heardAt(id) === undefined) return;
    if (!this.#redial.has(id)) this.#log.info({ peer: id }, 'connection to a pod member lost: dialling it again until it answers');
    this.#redial = dropped(this.#redial, id, Date.now(), this.#policy, this.#random);
  };

  constructor(
    node: OrchardNode,
    log: Logger,
    opts: {
      privatePod: boolean;
      timeoutMs?: number;
      retryMs?: number;
      redial?: Partial<RedialPolicy>;
      random?: () => number;
      /** When the pod last heard a peer (a heartbeat), undefined if never: a connected member silent longer than `silentAfterMs` is reconnected. */
      heardAt?: (peerId: string) => number | undefined;
      silentAfterMs?: number;
    },
  ) {
    this.#node = node;
    this.#log = log;
    this.#privatePod = opts.privatePod;
    this.#timeoutMs = opts.timeoutMs ?? 3000;
    this.#retryMs = opts.retryMs ?? 10_000;
    this.#policy = { ...DEFAULT_REDIAL_POLICY, ...opts.redial };
    this.#heardAt = opts.heardAt;
    this.#silentAfterMs = opts.silentAfterMs ?? 5000;
    this.#random = opts.random ?? Math.random;
    node.addEventListener('peer:discovery', this.#onDiscovery as never);
    node.addEventListener('peer:connect', this.#onConnect as never);
    node.addEventListener('peer:disconnect', this.#onDisconnect as never);
    this.#mdns()?.addEventListener('peer', this.#onMdnsPeer as never);
    const tickMs = Math.max(50, Math.min(FIRST_RETRY_MS, this.#retryMs, this.#policy.baseMs) / 2);
    this.#retry = setInterval(() => {
      for (const [id, peer] of this.#seen) if (this.#refused.has(id)) void this.dial(peer);
      this.#redialDue();
      this.#reconnectSilent();
    }, tickMs);
    this.#retry.unref();
  }

  #mdns(): EventTarget | undefined {
    return (this.#node.services as Record<string, unknown> | undefined)?.mdns as EventTarget | undefined;
  }

  /** When to dial a lost member discovery just saw: now, or a moment later at the end with the larger id. */
  #rediscoveredDue(id: string): number {
    return Date.now() + (this.#node.peerId.toString() > id ? YIELD_MS : 0);
  }

  /** Peers refused (never connected) and pod members we lost and keep dialling. */
  refused(): RefusedPeer[] {
    const now = Date.now();
    const lost: RefusedPeer[] = [...this.#redial.values()].map((e) => ({
      peerId: e.peerId,
      addresses: (this.#memberAddrs.get(e.peerId) ?? []).map(String),
      reason: 'unreachable' as const,
      message:
        `peer ${e.peerId} is unreachable: its connection dropped ${Math.round((now - e.since) / 1000)} s ago; dialling it again` +
        (e.attempts ? ` (${e.attempts} failed dial${e.attempts === 1 ? '' : 's'}${e.lastError ? `, last: ${e.lastError}` : ''})` : ''),
      lastTriedAt: e.lastTriedAt ?? e.since,
      attempts: e.attempts,
      since: e.since,
      lastError: e.lastError,
    }));
    return [...[...this.#refused.values()].filter((r) => !this.#redial.has(r.peerId)), ...lost];
  }

  /**
   * Hangs up on members (peers heard before) silent on a connection: not heard since it was made, after
   * FRESH_SILENCE_MS (heartbeats come every second), or not heard for `silentAfterMs`. The drop re-dials them.
   */
  #reconnectSilent(): void {
    if (this.#stopped || !this.#heardAt) return;
    const now = Date.now();
    for (const [id, since] of this.#connectedSince) {
      const heard = this.#heardAt(id);
      const peer = this.#members.get(id);
      if (!peer || heard === undefined) continue;
      const wait = heard < since ? Math.min(FRESH_SILENCE_MS, this.#silentAfterMs) : this.#silentAfterMs;
      if (now - since < wait || now - heard < wait) continue;
      this.#connectedSince.set(id, now); // once per silence period
      this.#log.warn({ peer: id, silentMs: now - heard }, 'pod member connected but silent: reconnecting it (its gossip stream is gone)');
      this.#node.hangUp(peer as never).catch((err: Error) => this.#log.debug({ peer: id, err: err?.message }, 'hang-up failed'));
    }
  }

  /** Dials every lost member whose time has come (one dial per member at a time, each bounded). */
  #redialDue(): void {
    if (this.#stopped) return;
    for (const e of due(this.#redial, Date.now())) {
      const id = e.peerId;
      const peer = this.#members.get(id);
      if (!peer || this.#inFlight.has(id)) continue;
      if (this.#node.getConnections(peer as never).length > 0) {
        this.#redial = connected(this.#redial, id);
        continue;
      }
      this.#inFlight.add(id);
      const lan = (this.#memberAddrs.get(id) ?? []).filter((a) => !isLoopbackAddr(String(a)) && String(a).includes(`/p2p/${id}`));
      this.#node
        .dial((lan.length ? lan : peer) as never, { signal: AbortSignal.timeout(this.#timeoutMs) })
        .then(
          () => {
            this.#redial = connected(this.#redial, id);
          },
          (err: Error) => {
            const entry = this.#redial.get(id);
            // Connected meanwhile (its own dial reached us): this failure no longer matters.
            if (!entry || this.#node.getConnections(peer as never).length > 0) return;
            this.#log[entry.attempts === 0 ? 'info' : 'debug']({ peer: id, err: err?.message }, `pod member ${id} did not answer; dialling it again later`);
            this.#redial = failed(this.#redial, id, dialErrorText(err).slice(0, 300), Date.now(), this.#policy, this.#random);
            if (!this.#redial.has(id)) {
              this.#log.warn({ peer: id }, `pod member ${id} unreachable for ${Math.round(this.#policy.forgetAfterMs / 60_000)} min: no longer dialled (discovery brings it back)`);
              this.#members.delete(id);
              this.#memberAddrs.delete(id);
            }
          },
        )
        .finally(() => this.#inFlight.delete(id));
    }
  }

  async dial(peer: DiscoveredPeer): Promise<void> {
    const id = peer.id.toString();
    if (id === this.#node.peerId.toString() || this.#inFlight.has(id)) return;
    if (this.#members.has(id)) this.#memberAddrs.set(id, peer.multiaddrs);
    // A member we lost is dialled on its redial schedule (made due now: discovery just saw it).
    if (this.#redial.has(id)) {
      this.#redial = rediscovered(this.#redial, id, this.#rediscoveredDue(id));
      return this.#redialDue();
    }
    if (this.#node.getConnections(peer.id as never).length > 0) return;
    const prev = this.#refused.get(id);
    if (prev && Date.now() - prev.lastTriedAt < Math.min(this.#retryMs, FIRST_RETRY_MS * 2 ** (prev.attempts - 1))) return;
    this.#inFlight.add(id);
    this.#seen.set(id, peer);
    try {
      // mDNS answers list the peer's loopback addresses too; on another host those reach our own
      // listener (a confusing handshake failure), so dial the LAN addresses when there are any.
      const lan = peer.multiaddrs.filter((a) => !isLoopbackAddr(String(a)) && String(a).includes(`/p2p/${id}`));
      await this.#node.dial((lan.length ? lan : peer.id) as never, { signal: AbortSignal.timeout(this.#timeoutMs) });
      if (prev) this.#log.info({ peer: id }, 'peer reachable again');
      this.#refused.delete(id);
      this.#seen.delete(id);
    } catch (err) {
      const reason = classifyDialError(err);
      const message = dialFailureMessage(reason, id, this.#privatePod);
      if (!prev || prev.reason !== reason) this.#log.warn({ peer: id, addresses: peer.multiaddrs.map(String) }, message);
      else this.#log.debug({ peer: id, err: (err as Error).message }, message);
      this.#refused.set(id, { peerId: id, addresses: peer.multiaddrs.map(String), reason, message, lastTriedAt: Date.now(), attempts: (prev?.attempts ?? 0) + 1 });
    } finally {
      this.#inFlight.delete(id);
    }
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#retry);
    this.#node.removeEventListener('peer:discovery', this.#onDiscovery as never);
    this.#node.removeEventListener('peer:connect', this.#onConnect as never);
    this.#node.removeEventListener('peer:disconnect', this.#onDisconnect as never);
    this.#mdns()?.removeEventListener('peer', this.#onMdnsPeer as never);
  }
}
