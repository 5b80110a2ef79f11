/**
 * The link-probe port. In an open pod it listens on every address, as anyone on the LAN may join
 * (and probe). In a private pod it listens only where pod members reach this node: the addresses
 * of this node's interfaces that share a subnet with a live member's (exactly the addresses members
 * probe, see paths.ts), plus 127.0.0.1, which holds the port number before any member is known. Like
 * the data plane it serves only clients that prove the pod's secret (the cluster key's probe
 * secret). A Wi-Fi or other network with no member on it never sees the port.
 */
import { startProbeServer, type ProbeServer } from '@orchard/transport';
import type { NodeProfile } from '../profile/types.js';
import { linkPaths } from './paths.js';

export interface ProbeListenersOptions {
  /** Port for every address; 0 picks one (then kept for every address). */
  port: number;
  secret: Uint8Array | string;
  /** Largest bulk transfer a prober may send, bytes. */
  maxBulkBytes: number;
  /** Private pod: listen only on pod-facing addresses. */
  podOnly: boolean;
  /** A pod-facing address could not be bound (another program holds the port there). */
  onBindError?: (address: string, err: Error) => void;
}

/** This node's addresses that live pod members share a subnet with (what they probe). */
export function podFacingAddresses(self: NodeProfile, members: readonly NodeProfile[]): string[] {
  const out = new Set<string>();
  for (const m of members) if (m.peerId !== self.peerId) for (const p of linkPaths(self, m)) out.add(p.localAddress);
  return [...out].sort();
}

/** Simultaneous probe connections per address: probes run one at a time per prober, so this bounds a flood, not the pod. */
const MAX_CONNECTIONS = 16;

export class ProbeListeners {
  readonly #o: ProbeListenersOptions;
  readonly #servers = new Map<string, ProbeServer>();
  #port = 0;
  #updating: Promise<void> = Promise.resolve();

  private constructor(o: ProbeListenersOptions) {
    this.#o = o;
  }

  static async start(o: ProbeListenersOptions): Promise<ProbeListeners> {
    const l = new ProbeListeners(o);
    const first = await l.#listen(o.podOnly ? '127.0.0.1' : '0.0.0.0', o.port);
    l.#port = first.port;
    return l;
  }

  get port(): number {
    return this.#port;
  }

  /** Where the port is open now. */
  get addresses(): string[] {
    return [...this.#servers.keys()].sort();
  }

  /**
   * Private pod: open the port on `addresses` (besides 127.0.0.1) and close it elsewhere. Calls run
   * one after another; an address that cannot be bound is reported and tried again next time.
   */
  update(addresses: readonly string[]): Promise<void> {
    if (!this.#o.podOnly) return Promise.resolve();
    const want = new Set(['127.0.0.1', ...addresses]);
    this.#updating = this.#updating.then(async () => {
      for (const [address, server] of this.#servers) {
        if (want.has(address)) continue;
        this.#servers.delete(address);
        await server.close();
      }
      for (const address of want) {
        if (this.#servers.has(address)) continue;
        await this.#listen(address, this.#port).catch((err: Error) => this.#o.onBindError?.(address, err));
      }
    });
    return this.#updating;
  }

  async close(): Promise<void> {
    await this.#updating;
    const servers = [...this.#servers.values()];
    this.#servers.clear();
    await Promise.all(servers.map((s) => s.close()));
  }

  async #listen(host: string, port: number): Promise<ProbeServer> {
    const server = await startProbeServer({ host, port, secret: this.#o.secret, maxBulkBytes: this.#o.maxBulkBytes, maxConnections: MAX_CONNECTIONS });
    this.#servers.set(host, server);
    return server;
  }
}
