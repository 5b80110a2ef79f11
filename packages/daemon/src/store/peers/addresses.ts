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
    } catch {
      /* not JSON: ignored */
    }
  };
  pubsub.subscribe(ADDRESSES_TOPIC);
  pubsub.addEventListener('message', onMessage as never);
  announce();
  const timer = setInterval(announce, everyMs);
  timer.unref();
  return {
    async reach(peer) {
      if (node.getConnections().some((c) => c.remotePeer.toString() === peer)) return;
      const addrs = known.get(peer);
      if (addrs?.length) await node.peerStore.merge(peerIdFromString(peer), { multiaddrs: addrs }).catch(() => undefined);
    },
    stop() {
      clearInterval(timer);
      pubsub.removeEventListener('message', onMessage as never);
    },
  };
}
