/**
 * `orchard relay`: what a community runs on a machine with a public address — the network's
 * bootstrap peer, a circuit relay v2 server (NATed pods listen through it; relayed jobs pass
 * through it as noise ciphertext), and a DHT server. It serves no model and keeps no keys but its
 * own; it listens to the network's gossip (it must, to forward it) and so can report what it saw.
 */
import type { PrivateKey } from '@libp2p/interface';
import type { Logger } from 'pino';
import { NetworkObserver } from './observer.js';
import { networkNodes, type NetworkNodeView } from './status.js';
import { createWideNode, type WideNode } from './wide-node.js';

export interface RelaySettings {
  network: string;
  listen: string[];
  announce: string[];
  bootstrap: string[];
  privateAddresses: boolean;
  maxReservations?: number;
}

export interface RelayStatus {
  network: string;
  peer: string;
  addresses: string[];
  connections: number;
  reservations: number;
  nodes: NetworkNodeView[];
  receipts: number;
}

export class NetworkRelay {
  readonly node: WideNode;
  readonly #observer: NetworkObserver;
  readonly #network: string;

  private constructor(node: WideNode, observer: NetworkObserver, network: string) {
    this.node = node;
    this.#observer = observer;
    this.#network = network;
  }

  static async start(o: { key: PrivateKey; settings: RelaySettings; log: Logger; now?: () => number }): Promise<NetworkRelay> {
    const s = o.settings;
    const node = await createWideNode({
      privateKey: o.key,
      network: s.network,
      listen: s.listen,
      announce: s.announce,
      bootstrap: s.bootstrap,
      role: 'relay',
      privateAddresses: s.privateAddresses,
      relayLimits: { maxReservations: s.maxReservations },
    });
    const observer = new NetworkObserver(node, s.network, o.log, o.now ?? Date.now);
    observer.attach();
    await node.start();
    // A relay is reachable by definition (that is its job): serve the DHT at once rather than wait for autonat.
    await node.services.dht.setMode('server');
    return new NetworkRelay(node, observer, s.network);
  }

  addresses(): string[] {
    return this.node.getMultiaddrs().map(String);
  }

  status(now = Date.now()): RelayStatus {
    const relay = (this.node.services as { relay?: { reservations: { size: number } } }).relay;
    return {
      network: this.#network,
      peer: this.node.peerId.toString(),
      addresses: this.addresses(),
      connections: this.node.getConnections().length,
      reservations: relay?.reservations.size ?? 0,
      nodes: networkNodes({
        self: this.node.peerId.toString(),
        now,
        offers: this.#observer.book.all(),
        firstSeen: (p) => this.#observer.book.firstSeen(p),
        balances: this.#observer.ledger.balances(),
        reputation: () => 1,
        rttMs: () => undefined,
        path: (p) => (this.node.getConnections().some((c) => c.remotePeer.toString() === p) ? 'direct' : null),
      }),
      receipts: this.#observer.ledger.size,
    };
  }

  async stop(): Promise<void> {
    await Promise.resolve(this.node.stop()).catch(() => undefined);
  }
}
