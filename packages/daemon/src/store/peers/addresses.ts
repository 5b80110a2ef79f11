/**
 * Where to dial each peer: every node gossips its libp2p addresses every few seconds on its own
 * topic, so a node reaches a peer it knows only through gossip (a pod joined by `--bootstrap`, where
 * each node is connected to the bootstrap node only) to ask it for chunks or claims.
 */
import { multiaddr, type Multiaddr } from '@multiformats/multiaddr';
import { peerIdFromString } from '@libp2p/peer-id';
import { z } from 'zod';
import type { OrchardNode } from '../../node/create-node.js';

export const ADDRESSES_TOPIC = 'orchard/weights-addrs/1';
const messageSchema = z.object({ addrs: z.array(z.string().max(256)).max(16) });

export function gossipAddresses(node: OrchardNode, everyMs: number): { reach(peer: string): Promise<void>; stop(): void } {
  const pubsub = node.services.pubsub;
  const known = new Map<string, Multiaddr[]>();
  /** reach() calls waiting for a peer's first announcement. */
  const waiting = new Map<string, Set<() => void>>();
  const announce = () => {
    const addrs = node.getMultiaddrs().map(String).slice(0, 16);
    pubsub.publish(ADDRESSES_TOPIC, new TextEncoder().encode(JSON.stringify({ addrs }))).catch(() => undefined);
  };
  const onMessage = (evt: CustomEvent<{ topic: string; type: string; from?: { toString(): string }; data: Uint8Array }>) => {
    const msg = evt.detail;
    if (msg.topic !== ADDRESSES_TOPIC || msg.type !== 'signed' || !msg.from) return;
    try {
      const parsed = messageSchema.safeParse(JSON.parse(new TextDecoder().decode(msg.data)));
      if (!parsed.success) return;
      known.set(msg.from.toString(), parsed.data.addrs.flatMap((a) => {
        try {
          return [multiaddr(a)];
        } catch {
          return [];
        }
      }));
      for (const wake of waiting.get(msg.from.toString()) ?? []) wake();
    } catch {
      /* not JSON: ignored */
    }
  };
  // A peer that has just subscribed hears this node's addresses now, not at the next period: a pull
  // started right after the pod formed would otherwise find the coordinator or a holder unreachable.
  const onSubscription = (evt: CustomEvent<{ subscriptions: Array<{ topic: string; subscribe: boolean }> }>) => {
    if (evt.detail.subscriptions.some((x) => x.topic === ADDRESSES_TOPIC && x.subscribe)) announce();
  };
  pubsub.subscribe(ADDRESSES_TOPIC);
  pubsub.addEventListener('message', onMessage as never);
  pubsub.addEventListener('subscription-change', onSubscription as never);
  announce();
  const timer = setInterval(announce, everyMs);
  timer.unref();
  /** The peer store already has an address for it (mDNS, identify): dialing will find it. */
  const dialable = (peer: string) => node.peerStore.get(peerIdFromString(peer)).then((p) => p.addresses.length > 0, () => false);
  const announced = (peer: string, ms: number) =>
    new Promise<void>((resolve) => {
      const set = waiting.get(peer) ?? new Set();
      waiting.set(peer, set);
      const wake = () => {
        clearTimeout(t);
        set.delete(wake);
        if (set.size === 0) waiting.delete(peer);
        resolve();
      };
      const t = setTimeout(wake, ms);
      set.add(wake);
    });
  return {
    async reach(peer) {
      if (node.getConnections().some((c) => c.remotePeer.toString() === peer)) return;
      // Known only through gossip and not announced yet: wait (bounded) for its addresses rather than
      // fail, which would send this node to the hub for bytes the pod already fetches.
      if (!known.has(peer) && !(await dialable(peer))) await announced(peer, 2 * everyMs);
      const addrs = known.get(peer);
      if (addrs?.length) await node.peerStore.merge(peerIdFromString(peer), { multiaddrs: addrs }).catch(() => undefined);
    },
    stop() {
      clearInterval(timer);
      for (const set of waiting.values()) for (const wake of set) wake();
      pubsub.removeEventListener('message', onMessage as never);
      pubsub.removeEventListener('subscription-change', onSubscription as never);
    },
  };
}
