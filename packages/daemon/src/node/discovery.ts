/**
 * Dials every peer that discovery (mDNS, bootstrap) reports, with a short timeout, and remembers
 * the ones that refused us ("not in this cluster") so they are neither re-dialled in a tight loop
 * nor reported as crypto errors. A refused peer is tried again after 1 s, then twice as long each time
 * up to `retryMs`: discovery reports a peer it already knows only once, a first dial that timed out on
 * a busy machine must not keep two pod members apart for good, and a peer refused only because it
 * was still starting should join within a second or two, not a whole retry period later.
 */
import type { Logger } from 'pino';
import { classifyDialError, dialFailureMessage, type DialFailure } from './dial-errors.js';
import type { OrchardNode } from './create-node.js';

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
}

/** The first retry of a refused peer, ms; each further one waits twice as long, up to the retry period. */
const FIRST_RETRY_MS = 1000;

export class AutoDialer {
  #node: OrchardNode;
  #log: Logger;
  #privatePod: boolean;
  #timeoutMs: number;
  #retryMs: number;
  #refused = new Map<string, RefusedPeer>();
  /** What discovery last said about each refused peer, to dial it again with. */
  #seen = new Map<string, { id: { toString(): string }; multiaddrs: { toString(): string }[] }>();
  #inFlight = new Set<string>();
  #retry: NodeJS.Timeout;
  #onDiscovery = (evt: CustomEvent<{ id: { toString(): string }; multiaddrs: { toString(): string }[] }>) => void this.dial(evt.detail);

  constructor(node: OrchardNode, log: Logger, opts: { privatePod: boolean; timeoutMs?: number; retryMs?: number }) {
    this.#node = node;
    this.#log = log;
    this.#privatePod = opts.privatePod;
    this.#timeoutMs = opts.timeoutMs ?? 3000;
    this.#retryMs = opts.retryMs ?? 10_000;
    node.addEventListener('peer:discovery', this.#onDiscovery as never);
    node.addEventListener('peer:connect', ((evt: CustomEvent<{ toString(): string }>) => {
      this.#refused.delete(evt.detail.toString());
      this.#seen.delete(evt.detail.toString());
    }) as never);
    this.#retry = setInterval(() => {
      for (const [id, peer] of this.#seen) if (this.#refused.has(id)) void this.dial(peer);
    }, Math.max(50, Math.min(FIRST_RETRY_MS, this.#retryMs) / 2));
    this.#retry.unref();
  }

  refused(): RefusedPeer[] {
    return [...this.#refused.values()];
  }

  async dial(peer: { id: { toString(): string }; multiaddrs: { toString(): string }[] }): Promise<void> {
    const id = peer.id.toString();
    if (id === this.#node.peerId.toString() || this.#inFlight.has(id)) return;
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
    clearInterval(this.#retry);
    this.#node.removeEventListener('peer:discovery', this.#onDiscovery as never);
  }
}
