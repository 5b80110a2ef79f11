/**
 * One Orchard daemon's control plane: identity, libp2p node, replicated cluster state, profile
 * refresh, link measurements and capability benchmark, started and stopped as one unit. Serving
 * (serving/) and the HTTP API (http/) are composed on top of it in orchard.ts.
 */
import './polyfills.js';
import { multiaddr } from '@multiformats/multiaddr';
import { probeLink } from '@orchard/transport';
import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { measureCapability } from './capability/cache.js';
import type { DaemonOptions } from './config/options.js';
import { prepareDataDir } from './config/data-dir.js';
import { decodeControl, encodeControl } from './control/codec.js';
import { CONTROL_TOPIC, type ControlMessage } from './control/messages.js';
import { clusterKeyFingerprint, readClusterKey } from './identity/cluster-key.js';
import { duplicateIdentityMessage, foreignAddresses, type DuplicateIdentity } from './identity/duplicate.js';
import { loadOrCreatePeerKey } from './identity/peer-key.js';
import { measurePeer, pathSignature, type LinkProber } from './links/measurer.js';
import { ProbeListeners, podFacingAddresses } from './links/probe-listeners.js';
import type { LinkMeasurement } from './links/types.js';
import { createNode, type OrchardNode } from './node/create-node.js';
import { AutoDialer } from './node/discovery.js';
import { ProfileCollector } from './profile/collect.js';
import type { NodeBackend } from './backend/node.js';
import { matchThunderboltPeers } from './profile/thunderbolt-match.js';
import type { Capability, NodeProfile } from './profile/types.js';
import { clusterView, type PodMode } from './state/cluster-view.js';
import { partitionReport } from './state/partition.js';
import { Replica } from './state/replication.js';

export interface DaemonTimings {
  profileRefreshMs: number;
  /** Re-measure a pair whose paths did not change after this long. */
  linkRefreshMs: number;
  linkCheckMs: number;
}

/**
 * What this node computes on and keeps aside, decided once by the composition root (orchard.ts),
 * which hands the same figures to serving; the daemon only says them in its profile.
 */
export interface DaemonCompute {
  /** The runners' backend (backend/node.ts); its GPU, if any, goes into the profile. */
  backend: NodeBackend;
  /** Memory kept per instance outside the planner's plan (serving/reserved-memory.ts). */
  reservedBytes: number;
}

export interface DaemonExtensions {
  timings?: Partial<DaemonTimings>;
  /** Absent: a control plane without runners (no GPU, nothing reserved in its profile). */
  compute?: DaemonCompute;
}

const DEFAULT_TIMINGS: DaemonTimings = { profileRefreshMs: 10_000, linkRefreshMs: 300_000, linkCheckMs: 2000 };

/** A path whose probe failed is measured again after this long (not after the refresh interval). */
const PROBE_RETRY_MS = 5000;

/** The probe server only serves holders of the cluster secret; an open pod uses the empty secret. */
function probeSecret(clusterKey: Uint8Array | null): Uint8Array | string {
  return clusterKey ? createHash('sha256').update('orchard-link-probe\0').update(clusterKey).digest() : '';
}

export class Daemon {
  readonly options: DaemonOptions;
  readonly log: Logger;
  readonly node: OrchardNode;
  readonly replica: Replica;
  readonly mode: PodMode;
  readonly peerKeyPath: string;
  readonly clusterKeyId: string | null;
  #probe: ProbeListeners;
  #dialer: AutoDialer;
  #profiles = new ProfileCollector();
  #capability: Capability | null;
  /** What this node's runners compute on (and the GPU profile when that is a GPU). */
  #backend: NodeBackend | null = null;
  #profile: NodeProfile | null = null;
  #timers: NodeJS.Timeout[] = [];
  #listeners = new Set<(what: string) => void>();
  #measured = new Map<string, { signature: string; at: number }>();
  #links = new Map<string, LinkMeasurement[]>();
  #linkFailures = new Map<string, string>();
  #measuring = false;
  #duplicate: DuplicateIdentity | null = null;
  #duplicatePeers = new Set<string>();
  #rtt = new Map<string, number>();
  /** Memory kept outside the planner's plan per instance, said in the profile. */
  #reservedBytes = 0;
  #dropped = new Map<string, { lastWarnAt: number; suppressed: number }>();
  #controlStats = { accepted: 0, dropped: 0 };
  #stopped = false;
  #clusterKey: Uint8Array | null;
  #timings: DaemonTimings;
  #startedAt = Date.now();

  private constructor(init: {
    options: DaemonOptions;
    log: Logger;
    node: OrchardNode;
    probe: ProbeListeners;
    capability: Capability | null;
    clusterKey: Uint8Array | null;
    peerKeyPath: string;
    timings: DaemonTimings;
  }) {
    this.options = init.options;
    this.log = init.log;
    this.node = init.node;
    this.#probe = init.probe;
    this.#capability = init.capability;
    this.#clusterKey = init.clusterKey;
    this.#timings = init.timings;
    this.peerKeyPath = init.peerKeyPath;
    this.mode = init.clusterKey ? 'private' : 'open';
    this.clusterKeyId = init.clusterKey ? clusterKeyFingerprint(init.clusterKey) : null;
    const selfId = this.node.peerId.toString();
    this.replica = new Replica({
      selfId,
      name: init.options.name,
      bootId: randomBytes(8).toString('hex'),
      now: Date.now,
      send: (m) => this.#publish(m),
      goneAfterMs: init.options.goneAfterSec * 1000,
      settleMs: Math.max(1500, init.options.heartbeatMs * 1.5),
      onEvent: (event) => {
        if (event.type === 'node-joined' || event.type === 'node-left') {
          const p = event.peerId;
          this.log.info({ peer: p, name: this.replica.state.nodes[p]?.name, ...(event.type === 'node-left' ? { reason: event.reason } : {}) }, event.type === 'node-joined' ? 'node joined' : 'node gone');
        }
        this.#notify(event.type);
      },
      onSnapshot: (_s, from) => {
        this.log.debug({ from }, 'adopted cluster snapshot');
        this.#notify('snapshot');
      },
      onMerge: (result, from, kind) => {
        if (kind === 'join') this.log.info({ from }, 'took over the cluster state of the pod this node joined');
        else this.log.warn({ from, retiring: result.superseded }, 'a partition healed: merged the other side\'s cluster state into this one (duplicate instances retire once idle)');
        this.#notify('merge');
      },
      onDropped: (from, reason) => this.#dropMessage(from, reason),
      onDuplicate: (peerId, bootIds) => {
        if (peerId === selfId) this.#reportDuplicate([]);
        else {
          this.#duplicatePeers.add(peerId);
          this.log.error({ peer: peerId, bootIds }, `peer ${peerId} runs on two machines at once (a copied data dir); on one of them stop orchard, delete its peer.key and restart`);
          this.#notify('duplicate-peer');
        }
      },
    });
    this.#dialer = new AutoDialer(this.node, this.log.child({ part: 'dial' }), {
      privatePod: this.mode === 'private',
      heardAt: (peer) => this.replica.heardAt(peer),
      silentAfterMs: init.options.goneAfterSec * 1000,
    });
  }

  static async start(options: DaemonOptions, log: Logger, extensions: DaemonExtensions = {}): Promise<Daemon> {
    const timings = extensions.timings ?? {};
    prepareDataDir(options.dataDir);
    const { key, path: peerKeyPath, created } = await loadOrCreatePeerKey(options.dataDir);
    const clusterKey = options.clusterKeyFile ? readClusterKey(options.clusterKeyFile) : null;
    const { capability, cached } = await measureCapability(options.dataDir, { force: options.rebench });
    log.info({ ...capability, cached }, cached ? 'capability (cached)' : 'capability measured');
    // Peers probe us with 4 MiB; capping bulk transfers bounds what any client on the LAN can make us receive.
    // In a private pod the port opens only on the addresses members reach us by (links/probe-listeners.ts).
    const probe = await ProbeListeners.start({
      port: options.probePort,
      secret: probeSecret(clusterKey),
      maxBulkBytes: 16 * 2 ** 20,
      podOnly: clusterKey !== null,
      onBindError: (address, err) => log.warn({ address, err: err.message }, 'link-probe port not opened on this address'),
    });
    let node: OrchardNode;
    try {
      node = await createNode({ privateKey: key, listen: options.listen, bootstrap: options.bootstrap, clusterKey, mdns: options.mdns });
    } catch (err) {
      await probe.close();
      throw err;
    }
    const daemon = new Daemon({ options, log, node, probe, capability, clusterKey, peerKeyPath, timings: { ...DEFAULT_TIMINGS, ...timings } });
    daemon.#backend = extensions.compute?.backend ?? null;
    daemon.#reservedBytes = extensions.compute?.reservedBytes ?? 0;
    try {
      await daemon.#run(created);
    } catch (err) {
      await daemon.stop();
      throw err;
    }
    return daemon;
  }

  async #run(newIdentity: boolean): Promise<void> {
    const o = this.options;
    const pubsub = this.node.services.pubsub;
    pubsub.subscribe(CONTROL_TOPIC);
    pubsub.addEventListener('message', (evt) => {
      const msg = evt.detail;
      if (msg.topic !== CONTROL_TOPIC) return;
      const from = msg.type === 'signed' ? msg.from.toString() : undefined;
      if (!from) return this.#dropMessage('unknown', 'unsigned message');
      const decoded = decodeControl(msg.data, from);
      if (!decoded.ok) return this.#dropMessage(from, decoded.reason);
      this.#controlStats.accepted++;
      try {
        this.replica.handle(decoded.message);
      } catch (err) {
        this.#dropMessage(from, `handler failed: ${(err as Error).message}`);
      }
    });
    const mdnsService = (this.node.services as Record<string, unknown>).mdns as EventTarget | undefined;
    mdnsService?.addEventListener('peer', (evt) => this.#checkDuplicate((evt as CustomEvent).detail));
    await this.node.start();
    this.log.info(
      {
        peerId: this.node.peerId.toString(),
        identity: newIdentity ? 'new' : 'loaded',
        addresses: this.node.getMultiaddrs().map(String),
        mode: this.mode,
        ...(this.clusterKeyId ? { clusterKeyId: this.clusterKeyId } : {}),
        probePort: this.#probe.port,
      },
      'orchard daemon started',
    );
    await this.#refreshProfile();
    const every = (ms: number, f: () => unknown) => this.#timers.push(setInterval(() => void Promise.resolve().then(f).catch((err) => this.log.error({ err }, 'periodic task failed')), ms));
    every(o.heartbeatMs, () => this.replica.tick());
    every(this.#timings.profileRefreshMs, () => this.#refreshProfile());
    every(this.#timings.linkCheckMs, () => this.#measureLinks());
    every(5000, () => this.#redialBootstrap());
    every(5000, () => this.#pingPeers());
    this.replica.tick();
  }

  /** Listens to every change of the cluster state (and identity warnings); returns the unsubscribe. */
  onChange(listener: (what: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #publish(message: ControlMessage): void {
    if (this.#stopped && message.type !== 'goodbye') return;
    let bytes: Uint8Array;
    try {
      bytes = encodeControl(message);
    } catch (err) {
      this.log.error({ err: (err as Error).message }, 'control message not sent');
      return;
    }
    this.node.services.pubsub.publish(CONTROL_TOPIC, bytes).catch((err) => this.log.debug({ err: (err as Error).message, type: message.type }, 'publish failed'));
  }

  /** Malformed input is dropped and logged with its sender: every drop at debug, a warning per sender at most every 10 s. */
  #dropMessage(from: string, reason: string): void {
    this.#controlStats.dropped++;
    const entry = this.#dropped.get(from) ?? { lastWarnAt: 0, suppressed: 0 };
    this.log.debug({ peer: from, reason }, 'dropped control message');
    if (Date.now() - entry.lastWarnAt > 10_000) {
      this.log.warn({ peer: from, reason, ...(entry.suppressed ? { alsoDroppedSinceLastWarning: entry.suppressed } : {}) }, 'dropped control message');
      this.#dropped.set(from, { lastWarnAt: Date.now(), suppressed: 0 });
    } else {
      entry.suppressed++;
      this.#dropped.set(from, entry);
    }
  }

  #checkDuplicate(peer: { id: { toString(): string }; multiaddrs: { toString(): string }[] }): void {
    const self = this.node.peerId.toString();
    if (peer.id.toString() !== self) return;
    const foreign = foreignAddresses(peer.multiaddrs.map(String), this.node.getMultiaddrs().map(String));
    if (foreign.length > 0) this.#reportDuplicate(foreign);
  }

  /** Our identity is used by another daemon too: say so once (and again if we learn its addresses). */
  #reportDuplicate(addresses: string[]): void {
    const self = this.node.peerId.toString();
    const known = this.#duplicate?.addresses ?? [];
    if (this.#duplicate && addresses.every((a) => known.includes(a))) return;
    const all = [...new Set([...known, ...addresses])];
    this.#duplicate = { peerId: self, addresses: all, detectedAt: Date.now(), message: duplicateIdentityMessage(self, all, this.peerKeyPath) };
    this.log.error({ peer: self, addresses: all }, this.#duplicate.message);
    this.#notify('duplicate-identity');
  }

  async #redialBootstrap(): Promise<void> {
    for (const addr of this.options.bootstrap) {
      try {
        const ma = multiaddr(addr);
        const id = ma.getComponents().findLast((c) => c.name === 'p2p')?.value;
        if (!id || this.node.getConnections().some((c) => c.remotePeer.toString() === id)) continue;
        await this.node.dial(ma, { signal: AbortSignal.timeout(3000) });
      } catch (err) {
        this.log.debug({ addr, err: (err as Error).message }, 'bootstrap dial failed');
      }
    }
  }

  /** Control-plane round trip per connected peer (libp2p ping), shown in status. */
  async #pingPeers(): Promise<void> {
    const peers = new Map(this.node.getConnections().map((c) => [c.remotePeer.toString(), c.remotePeer]));
    await Promise.all(
      [...peers].map(async ([id, peer]) => {
        try {
          this.#rtt.set(id, await this.node.services.ping.ping(peer, { signal: AbortSignal.timeout(2000) }));
        } catch {
          this.#rtt.delete(id);
        }
      }),
    );
  }

  async #refreshProfile(): Promise<void> {
    const profile = await this.#profiles.collect({
      peerId: this.node.peerId.toString(),
      name: this.options.name,
      dataDir: this.options.dataDir,
      probePort: this.#probe.port,
      capability: this.#capability,
      gpu: this.#backend?.gpu ?? null,
      reservedBytes: this.#reservedBytes,
    });
    this.#profile = profile;
    this.replica.setProfile(profile);
  }

  /** This node's last capability benchmark. */
  get capability(): Capability | null {
    return this.#capability;
  }

  /** This node's runner backend, as handed to start (DaemonCompute). */
  get engineBackend(): NodeBackend | null {
    return this.#backend;
  }

  async remeasureCapability(): Promise<void> {
    const { capability } = await measureCapability(this.options.dataDir, { force: true });
    this.#capability = capability;
    this.log.info(capability, 'capability re-measured');
    await this.#refreshProfile();
  }

  /** Probe each live peer with a larger id whose paths changed or whose figures are old. */
  async #measureLinks(): Promise<void> {
    if (this.#measuring || !this.#profile) return;
    this.#measuring = true;
    try {
      const self = this.#profile;
      const state = this.replica.state;
      const members = Object.values(state.nodes).flatMap((n) => (n.status === 'live' && n.profile ? [n.profile] : []));
      await this.#probe.update(podFacingAddresses(self, members));
      const prober: LinkProber = (path, port) =>
        probeLink({ host: path.remoteAddress, port, secret: probeSecret(this.#clusterKey), pings: 20, bulkBytes: 4 * 2 ** 20, timeoutMs: 5000 });
      let changed = false;
      for (const n of Object.values(state.nodes)) {
        if (this.#stopped) return;
        if (n.status !== 'live' || !n.profile || n.peerId <= self.peerId) {
          if (n.status !== 'live' && this.#links.delete(n.peerId)) this.#measured.delete(n.peerId);
          continue;
        }
        const signature = pathSignature(self, n.profile);
        const prev = this.#measured.get(n.peerId);
        if (prev && prev.signature === signature && Date.now() - prev.at < this.#timings.linkRefreshMs) continue;
        const result = await measurePeer(self, n.profile, prober);
        // A failed probe is tried again soon (the peer may not have opened its port to us yet).
        this.#measured.set(n.peerId, { signature, at: result.failures.length ? Date.now() - this.#timings.linkRefreshMs + PROBE_RETRY_MS : Date.now() });
        this.#links.set(n.peerId, result.measurements);
        for (const f of result.failures) {
          if (this.#linkFailures.get(`${f.peerId}|${f.address}`) !== f.error) this.log.warn(f, 'link probe failed');
          this.#linkFailures.set(`${f.peerId}|${f.address}`, f.error);
        }
        for (const m of result.measurements) this.log.info({ peer: m.b, kind: m.kind, via: `${m.aInterface}->${m.address}`, latencyUs: Math.round(m.latencyUs), bandwidthGbps: +m.bandwidthGbps.toFixed(2) }, 'link measured');
        changed = true;
      }
      if (changed) this.replica.setLinks([...this.#links.values()].flat());
    } finally {
      this.#measuring = false;
    }
  }

  #notify(what: string): void {
    for (const l of this.#listeners) {
      try {
        l(what);
      } catch {
        /* a broken listener must not stop the others */
      }
    }
  }

  cluster() {
    return clusterView(this.replica.state, { mode: this.mode, coordinator: this.replica.isCoordinator ? this.replica.selfId : (this.replica.position.leader || null) });
  }

  status() {
    const state = this.replica.state;
    const self = this.node.peerId.toString();
    const peers = Object.values(state.nodes)
      .filter((n) => n.profile && n.peerId !== self)
      .map((n) => ({ peerId: n.peerId, thunderbolt: n.profile!.thunderbolt }));
    return {
      self: { peerId: self, name: this.options.name, addresses: this.node.getMultiaddrs().map(String), probePort: this.#probe.port, probeAddresses: this.#probe.addresses, uptimeSec: Math.round((Date.now() - this.#startedAt) / 1000), logFile: this.options.logFile, dataDir: this.options.dataDir },
      mode: this.mode,
      clusterKeyId: this.clusterKeyId,
      coordinator: this.cluster().coordinator,
      log: this.replica.position,
      connections: this.node.getConnections().map((c) => ({ peer: c.remotePeer.toString(), address: c.remoteAddr.toString(), pingMs: this.#rtt.get(c.remotePeer.toString()) ?? null })),
      nodes: Object.values(state.nodes),
      links: Object.values(state.links),
      thunderboltCables: this.#profile ? matchThunderboltPeers(this.#profile.thunderbolt, peers) : [],
      // The data-plane secret of each instance stays inside the pod (runners); the API does not show it,
      // nor the planner's per-layer description of the model (the dimensions are enough to read a plan).
      instances: Object.values(state.instances).map((i) => {
        const { secret: _secret, model, ...plan } = i.plan;
        return { ...i, plan: { ...plan, model: { dims: model.dims, maxContext: model.maxContext } } };
      }),
      failedModels: Object.values(state.failedModels),
      notInCluster: this.#dialer.refused().filter((r) => r.reason === 'not-in-cluster'),
      unreachable: this.#dialer.refused().filter((r) => r.reason === 'unreachable'),
      /** Members this node cannot reach and whether the pod looks split (state/partition.ts). */
      partition: partitionReport({ state, selfId: self, lost: this.#dialer.refused().filter((r) => r.since !== undefined), heals: this.replica.heals(), now: Date.now() }),
      duplicateIdentity: this.#duplicate,
      /** Other peer ids seen running on two machines at once. */
      duplicatePeers: [...this.#duplicatePeers],
      controlMessages: { ...this.#controlStats },
    };
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.replica.stop(); // goodbye first, while the node can still send it
    this.#stopped = true;
    for (const t of this.#timers) clearInterval(t);
    this.#dialer.stop();
    await new Promise((r) => setTimeout(r, 100));
    await this.#probe.close().catch(() => undefined);
    await Promise.resolve(this.node.stop()).catch(() => {});
  }
}
