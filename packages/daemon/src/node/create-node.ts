/**
 * The libp2p node: TCP + noise + yamux, identify, ping, gossipsub for cluster messages, mDNS
 * (a service, so the daemon can also watch its raw answers for duplicate identities), bootstrap
 * peers for networks that block multicast, and pnet when a cluster key is given.
 * Import '../polyfills.js' before this module on Node 20.
 */
import '../polyfills.js';
import { noise } from '@chainsafe/libp2p-noise';
import { yamux } from '@chainsafe/libp2p-yamux';
import { bootstrap } from '@libp2p/bootstrap';
import { gossipsub } from '@libp2p/gossipsub';
import { identify } from '@libp2p/identify';
import type { PrivateKey } from '@libp2p/interface';
import { mdns } from '@libp2p/mdns';
import { ping } from '@libp2p/ping';
import { preSharedKey } from '@libp2p/pnet';
import { tcp } from '@libp2p/tcp';
import { createLibp2p } from 'libp2p';
import { MAX_CONTROL_BYTES } from '../control/messages.js';

export interface NodeOptions {
  privateKey: PrivateKey;
  listen: string[];
  bootstrap: string[];
  clusterKey: Uint8Array | null;
  /** mDNS on/off (tests with multicast blocked still leave it on: it simply finds nothing). @default true */
  mdns?: boolean;
  /** Dial deadline: short, because a peer outside a private pod may hang the handshake for seconds. @default 3000 */
  dialTimeoutMs?: number;
}

export async function createNode(options: NodeOptions) {
  const services = {
    identify: identify(),
    ping: ping(),
    pubsub: gossipsub({
      allowPublishToZeroTopicPeers: true,
      emitSelf: false,
      fallbackToFloodsub: false,
      maxInboundDataLength: MAX_CONTROL_BYTES + 64 * 1024,
      // Small pods: every peer is a mesh peer; flood publish keeps latency to one hop.
      floodPublish: true,
    }),
    ...(options.mdns === false ? {} : { mdns: mdns({ interval: 2000 }) }),
  };
  return createLibp2p({
    privateKey: options.privateKey,
    addresses: { listen: options.listen },
    transports: [tcp()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    ...(options.clusterKey ? { connectionProtector: preSharedKey({ psk: options.clusterKey, timeout: 2000 }) } : {}),
    peerDiscovery: options.bootstrap.length ? [bootstrap({ list: options.bootstrap, timeout: 200 })] : [],
    connectionManager: { dialTimeout: options.dialTimeoutMs ?? 3000 },
    // A connection whose ping fails is closed (its peer then goes on the redial schedule, discovery.ts):
    // every 5 s rather than libp2p's 10 s, so a cut link is noticed, and re-dialled, sooner.
    connectionMonitor: { pingInterval: 5000 },
    services,
  });
}

export type OrchardNode = Awaited<ReturnType<typeof createNode>>;
