/**
 * The wide-area libp2p node: a second libp2p instance beside the pod's, with the same peer key (so
 * offers and receipts are signed by the peer id others dial) but nothing of the pod on it — no
 * mDNS, no pnet, no cluster topics, no data plane, no HTTP. It speaks only what a network needs:
 *
 * - kad-dht under a per-network protocol (`/orchard/<name>/kad/1.0.0`): peer routing (the address of
 *   a peer named in an offer) and content routing (pods providing a model);
 * - circuit relay v2 (a NATed node listens through a relay's reservation) and DCUtR (relayed peers
 *   try to hole-punch a direct connection); autonat (each node learns whether it is reachable);
 * - gossipsub for offers and receipts on the network's topics; ping for RTT; identify.
 *
 * `relay` nodes (`orchard relay`) add the relay server and run the DHT as servers from the start.
 * Import '../polyfills.js' before libp2p on Node 20 (done here).
 */
import '../polyfills.js';
import { noise } from '@chainsafe/libp2p-noise';
import { yamux } from '@chainsafe/libp2p-yamux';
import { autoNAT } from '@libp2p/autonat';
import { bootstrap } from '@libp2p/bootstrap';
import { circuitRelayServer, circuitRelayTransport } from '@libp2p/circuit-relay-v2';
import { dcutr } from '@libp2p/dcutr';
import { gossipsub } from '@libp2p/gossipsub';
import { identify, identifyPush } from '@libp2p/identify';
import type { PeerInfo, PrivateKey } from '@libp2p/interface';
import { kadDHT, passthroughMapper, removePrivateAddressesMapper } from '@libp2p/kad-dht';
import { ping } from '@libp2p/ping';
import { tcp } from '@libp2p/tcp';
import { createLibp2p } from 'libp2p';
import { MAX_SIGNED_BODY } from './signed.js';

export interface WideNodeOptions {
  privateKey: PrivateKey;
  network: string;
  /** TCP listen addresses; members also listen on `/p2p-circuit` (through a relay) unless `relayListen` is false. */
  listen: string[];
  /** Addresses others should dial (a relay on a VPS behind a port mapping). */
  announce?: string[];
  bootstrap: string[];
  role: 'member' | 'relay';
  /**
   * Keep private (RFC 1918 etc.) addresses in DHT records. Off on the internet, where a peer's LAN
   * address means nothing to others; on for a network inside one site.
   * @default false
   */
  privateAddresses?: boolean;
  /** @default true for members */
  relayListen?: boolean;
  relayLimits?: { maxReservations?: number; durationMs?: number; dataBytes?: number };
  dialTimeoutMs?: number;
}

export const offersTopic = (network: string) => `orchard/network/${network}/offers/1`;
export const receiptsTopic = (network: string) => `orchard/network/${network}/receipts/1`;
export const dhtProtocol = (network: string) => `/orchard/${network}/kad/1.0.0`;

export async function createWideNode(o: WideNodeOptions) {
  const mapper: (p: PeerInfo) => PeerInfo = o.privateAddresses ? passthroughMapper : removePrivateAddressesMapper;
  const relay = o.role === 'relay';
  const limits = o.relayLimits ?? {};
  const services = {
    identify: identify(),
    identifyPush: identifyPush(),
    ping: ping(),
    dht: kadDHT({ protocol: dhtProtocol(o.network), peerInfoMapper: mapper, clientMode: false, logPrefix: `libp2p:orchard-${o.network}-dht` }),
    autonat: autoNAT(),
    dcutr: dcutr(),
    pubsub: gossipsub({
      allowPublishToZeroTopicPeers: true,
      emitSelf: false,
      fallbackToFloodsub: false,
      // Offers are small signed documents; bigger messages are dropped unread.
      maxInboundDataLength: 4 * MAX_SIGNED_BODY,
    }),
    ...(relay
      ? {
          relay: circuitRelayServer({
            reservations: {
              maxReservations: limits.maxReservations ?? 256,
              // A relayed job streams tokens for minutes; the libp2p defaults (2 min, 128 KiB) are for signalling only.
              defaultDurationLimit: limits.durationMs ?? 30 * 60_000,
              defaultDataLimit: BigInt(limits.dataBytes ?? 64 * 2 ** 20),
            },
          }),
        }
      : {}),
  };
  const listen = [...o.listen, ...(!relay && o.relayListen !== false ? ['/p2p-circuit'] : [])];
  return createLibp2p({
    privateKey: o.privateKey,
    addresses: { listen, ...(o.announce?.length ? { announce: o.announce } : {}) },
    transports: [tcp(), circuitRelayTransport({ reservationCompletionTimeout: 10_000 })],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    peerDiscovery: o.bootstrap.length ? [bootstrap({ list: o.bootstrap, timeout: 100 })] : [],
    connectionManager: { dialTimeout: o.dialTimeoutMs ?? 10_000 },
    ...(o.privateAddresses ? { connectionGater: { denyDialMultiaddr: () => false } } : {}),
    services,
  });
}

export type WideNode = Awaited<ReturnType<typeof createWideNode>>;

/** Whether a connection goes through a relay (and so is limited) or is direct. */
export function connectionPath(remoteAddr: { toString(): string }): 'relayed' | 'direct' {
  return remoteAddr.toString().includes('/p2p-circuit') ? 'relayed' : 'direct';
}
