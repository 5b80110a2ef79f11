/**
 * Serving on one daemon: starts and stops this node's runners to match the instances in the
 * replicated state, wires their data planes (endpoint gossip), publishes the status of instances it
 * drives, routes requests to a ready instance, and — on the coordinator — places models, removes
 * instances whose nodes died or whose runners failed, and places them again on the survivors.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { Logger } from 'pino';
import { loadModelConfig } from '@orchard/engine';
import { modelFromConfig, type Cluster } from '@orchard/partitioner';
import type { ClusterEvent } from '../state/events.js';
import type { ClusterState, InstanceEntry } from '../state/types.js';
import { place, PlacementError, shouldUpgrade, type InstancePlan, type ModelShape, type PlacementRequest } from '../placement/place.js';
import { RunnerProcess } from '../runner/runner-process.js';
import { DataPlaneLinks, type InstanceLink } from '../runner/link-report.js';
import type { DataPlaneSecurity } from '../runner/link-security.js';
import type { TcpAddress } from '../runner/transport.js';
import type { TensorSelection } from '../store/safetensors-range.js';
import { InstanceExecutor } from './executor.js';
import type { ServeMessage } from './messages.js';
import { ModelCatalog, UnknownModelError } from './models.js';
import { ServeError } from './requests.js';

/** What an instance entry's `plan` holds (the replicated state keeps it opaque). */
export interface PlacedPlan extends InstancePlan {
  secret: string;
  requested: PlacementRequest;
  shape: ModelShape;
  /** The model's config.json, so any coordinator can plan it again without the files. */
  config: unknown;
  /** A better plan placed while this instance ran: it takes new requests once ready, then this one retires. */
  supersedes?: string;
}

export interface ManagerDeps {
  selfId: string;
  log: Logger;
  dataDir: string;
  state(): ClusterState;
  cluster(): Cluster;
  isCoordinator(): boolean;
  propose(event: ClusterEvent): boolean;
  publish(m: ServeMessage): void;
  /** This node's libp2p addresses (sent with instance status). */
  addrs?: () => string[];
  /** Requests waiting per instance before 429. @default 64 */
  maxQueue?: number;
  maxSeqLen?: number;
  runnerEnv?: NodeJS.ProcessEnv;
  /** Matrix kernels for runners. @default wasm, threads = available cores / ranks on this node */
  backend?: 'reference' | 'wasm' | 'gpu';
  /** gpu: runners may use a software adapter (lavapipe). */
  allowSoftwareGpu?: boolean;
  threads?: number;
  /** When this node last heard from a peer (heartbeats); lets placement skip a node that just went silent. */
  heardAt?: (peerId: string) => number | undefined;
  /**
   * A node silent for longer than this is not placed on, even while the shared state still lists it
   * as live (that takes the longer gone-after timeout). @default 2500
   */
  suspectAfterMs?: number;
  /** Brings a model this node lacks into its store (peers first); `selection`: only these layers. */
  fetchModel?: (repo: string, selection: TensorSelection | undefined) => Promise<void>;
  /** Which data-plane links runners encrypt (runner/link-security.ts), asked when runners start. */
  dataPlaneSecurity?: () => DataPlaneSecurity;
}

interface LocalInstance {
  entry: InstanceEntry;
  plan: PlacedPlan;
  runners: Map<number, RunnerProcess>;
  endpoints: Map<number, TcpAddress[]>;
  connected: boolean;
  executor: InstanceExecutor | null;
  startedAt: number;
  failed: boolean;
}

interface InstanceStatus {
  ready: boolean;
  active: number;
  queued: number;
  capacity: number;
  at: number;
  /** Measured decode speed of the last request, when one produced 2+ tokens. */
  decodeTokensPerSecond?: number | null;
}

const STATUS_FRESH_MS = 3500;
/**
 * A superseded instance retires on a status showing it idle that was heard this long after its
 * successor became ready: nodes learn of the successor's readiness from statuses sent every second,
 * and until then may still route requests to the old instance.
 */
const RETIRE_SETTLE_MS = 3000;
/** A superseded instance is removed this long after its successor was placed even when never seen idle. */
const RETIRE_AFTER_MS = 600_000;
const READY_TIMEOUT_MS = 120_000;

export function localAddresses(port: number): TcpAddress[] {
  const out: TcpAddress[] = [];
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) out.push({ host: a.address, port });
  }
  out.push({ host: '127.0.0.1', port });
  return out.slice(0, 16);
}

export class InstanceManager {
  readonly catalog: ModelCatalog;
  readonly #d: ManagerDeps;
  readonly #local = new Map<string, LocalInstance>();
  /** Endpoints heard before this node started its own runners for the instance. */
  readonly #early = new Map<string, Map<number, TcpAddress[]>>();
  readonly #status = new Map<string, InstanceStatus>();
  readonly #failed = new Map<string, string>();
  readonly #addrs = new Map<string, string[]>();
  /** Models other nodes hold: what planning needs, who holds them, when last heard. */
  readonly #remote = new Map<string, { shape: ModelShape; config: Record<string, unknown>; holders: Map<string, number> }>();
  /** Coordinator: when it first saw each successor instance ready (its predecessor retires after that). */
  readonly #successorReadyAt = new Map<string, number>();
  /** Coordinator: instances already replaced (so a late failure report does not replace twice). */
  readonly #replaced = new Set<string>();
  /** Each data-plane link's transport (RDMA or TCP, with the reason), from this node's runners and gossip. */
  readonly #links = new DataPlaneLinks();
  #timer: NodeJS.Timeout | null = null;
  #ticks = 0;
  #closed = false;

  constructor(deps: ManagerDeps) {
    this.#d = deps;
    this.catalog = new ModelCatalog(deps.dataDir);
  }

  start(): void {
    this.#timer = setInterval(() => {
      try {
        this.tick();
      } catch (err) {
        this.#d.log.error({ err }, 'serving tick failed');
      }
    }, 500);
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    await Promise.all([...this.#local.values()].flatMap((l) => [...l.runners.values()].map((r) => r.stop(1000))));
    this.#local.clear();
  }

  // ---------------------------------------------------------------- messages

  onMessage(m: ServeMessage): void {
    switch (m.type) {
      case 'endpoint': {
        const local = this.#local.get(m.instance);
        const map = local?.endpoints ?? this.#early.get(m.instance) ?? new Map<number, TcpAddress[]>();
        map.set(m.rank, m.addresses);
        if (local) this.#maybeConnect(local);
        else {
          this.#early.set(m.instance, map);
          if (this.#early.size > 256) this.#early.delete(this.#early.keys().next().value!);
        }
        return;
      }
      case 'status':
        if (m.addrs?.length) this.#addrs.set(m.from, m.addrs);
        if (this.#d.state().instances[m.instance]?.nodes[0] === m.from) this.#status.set(m.instance, { ready: m.ready, active: m.active, queued: m.queued, capacity: m.capacity, decodeTokensPerSecond: m.decodeTokensPerSecond ?? null, at: Date.now() });
        return;
      case 'failed':
        if (this.#d.isCoordinator()) this.#replace(m.instance, `a runner failed on ${m.from}: ${m.reason}`);
        return;
      case 'place':
        if (this.#d.isCoordinator()) this.#placeAsCoordinator(m.model, { strategy: m.strategy, nodes: m.nodes }, m.exclusive, m.shape, m.config);
        return;
      case 'remove':
        if (this.#d.isCoordinator()) this.#removeAsCoordinator(m.instance);
        return;
      case 'links':
        this.#links.accept(m, (this.#d.state().instances[m.instance]?.plan as PlacedPlan | undefined)?.ranks);
        return;
      case 'catalog':
        for (const x of m.models) {
          const r = this.#remote.get(x.id) ?? { shape: x.shape, config: x.config, holders: new Map<string, number>() };
          r.shape = x.shape;
          r.config = x.config;
          r.holders.set(m.from, Date.now());
          this.#remote.set(x.id, r);
        }
        return;
    }
  }

  // ---------------------------------------------------------------- periodic work

  tick(): void {
    if (this.#closed) return;
    this.#ticks++;
    const state = this.#d.state();
    // Runners follow the replicated instances.
    for (const entry of Object.values(state.instances)) {
      const plan = entry.plan as PlacedPlan;
      if (!this.#local.has(entry.id) && plan?.ranks?.includes(this.#d.selfId) && !this.#failed.has(entry.id)) this.#startLocal(entry, plan);
    }
    for (const [id, local] of this.#local) {
      if (!state.instances[id]) {
        this.#d.log.info({ instance: id }, 'instance removed: stopping its runners');
        for (const r of local.runners.values()) void r.stop(1000);
        this.#local.delete(id);
        continue;
      }
      // Endpoints are gossiped until every rank is connected (a message may be missed).
      if (!local.connected) this.#publishEndpoints(local);
      if (!local.failed && !this.#localReady(local) && Date.now() - local.startedAt > READY_TIMEOUT_MS) this.#reportFailed(local, `not ready after ${READY_TIMEOUT_MS / 1000} s`);
      if (local.executor && this.#ticks % 2 === 0) {
        const load = local.executor.load;
        const ready = local.executor.runner.ready;
        this.#d.publish({ type: 'status', from: this.#d.selfId, instance: id, ready, ...load, addrs: this.#d.addrs?.().slice(0, 16) });
        this.#status.set(id, { ready, ...load, at: Date.now() });
      }
    }
    if (this.#d.isCoordinator()) {
      const live = new Set(Object.values(state.nodes).filter((n) => n.status === 'live').map((n) => n.peerId));
      for (const entry of Object.values(state.instances)) {
        const gone = entry.nodes.filter((n) => !live.has(n));
        if (gone.length) this.#replace(entry.id, `node(s) ${gone.join(', ')} left`);
      }
      if (this.#ticks % 10 === 0) this.#upgrade();
    }
    if (this.#ticks % 10 === 1) this.#publishCatalog();
    if (this.#ticks % 10 === 6) {
      this.#links.retain((id) => !!state.instances[id]);
      for (const local of this.#local.values()) this.#publishLinks(local);
    }
  }

  #publishLinks(local: LocalInstance): void {
    const m = this.#links.message(this.#d.selfId, local.entry.id, local.runners.keys());
    if (m) this.#d.publish(m);
  }

  #publishCatalog(): void {
    const models = this.catalog
      .list()
      .slice(0, 32)
      .flatMap((id) => {
        try {
          const info = this.catalog.info(id);
          return JSON.stringify(info.rawConfig).length < 16_000 ? [{ id, shape: info.shape, config: info.rawConfig }] : [];
        } catch {
          return [];
        }
      });
    if (models.length) this.#d.publish({ type: 'catalog', from: this.#d.selfId, models });
  }

  /** Models some live peer announced recently (with the peers holding them). */
  remoteModels(): Map<string, string[]> {
    const live = new Set(Object.values(this.#d.state().nodes).filter((n) => n.status === 'live').map((n) => n.peerId));
    const out = new Map<string, string[]>();
    for (const [id, r] of this.#remote) {
      const holders = [...r.holders].filter(([p, at]) => live.has(p) && Date.now() - at < 20_000).map(([p]) => p);
      if (holders.length) out.set(id, holders);
    }
    return out;
  }

  /**
   * Coordinator: when the pod changed (a node joined), an auto-placed instance whose model now has a
   * clearly faster plan gets a successor; new requests go to the successor once it serves, and the old
   * instance is removed when it has no request running or queued (running streams are not broken).
   */
  #upgrade(): void {
    const all = Object.values(this.#d.state().instances);
    for (const e of all) {
      const p = e.plan as PlacedPlan;
      if (p.requested?.strategy !== 'auto' || !this.isReady(e.id) || all.some((o) => (o.plan as PlacedPlan).supersedes === e.id)) continue;
      if (all.some((o) => o.model === e.model && o.id !== e.id && (o.plan as PlacedPlan).supersedes)) continue; // one upgrade at a time
      let next: InstancePlan;
      try {
        next = place(p.shape, modelFromConfig(p.config, { name: e.model }), this.#placeableCluster(), { strategy: 'auto' });
      } catch {
        continue;
      }
      if (!shouldUpgrade(p, next)) continue;
      this.#d.log.info({ instance: e.id, from: p.predicted?.decodeTokensPerSecond, to: next.predicted?.decodeTokensPerSecond, ranks: next.ranks }, 'a faster plan exists: placing a successor');
      this.#propose(e.model, next, p.requested, p.shape, p.config, e.id);
    }
    for (const id of this.#successorReadyAt.keys()) if (!this.#d.state().instances[id]) this.#successorReadyAt.delete(id);
    for (const e of all) {
      const old = (e.plan as PlacedPlan).supersedes;
      if (!old || !this.#d.state().instances[old] || !this.isReady(e.id)) continue;
      let readyAt = this.#successorReadyAt.get(e.id);
      if (readyAt === undefined) this.#successorReadyAt.set(e.id, (readyAt = Date.now()));
      // Idle only by a status the old instance's driver sent a while after the successor was ready, so
      // it counts every request routed to the old one before all nodes saw the successor ready. No
      // status is not idle: a coordinator that just joined (or took over) has not heard one yet, and
      // removing the instance then killed a stream running on it.
      const s = this.#status.get(old);
      const idle = !!s && s.at > readyAt + RETIRE_SETTLE_MS && s.active === 0 && s.queued === 0;
      if (idle || Date.now() - e.placedAt > RETIRE_AFTER_MS) {
        this.#d.log.info({ instance: old, successor: e.id }, 'retiring the superseded instance');
        this.#removeAsCoordinator(old);
      }
    }
  }

  #localReady(l: LocalInstance): boolean {
    return [...l.runners.values()].every((r) => r.ready);
  }

  /** The layers this node's ranks need, when they all belong to one stage (else: everything). */
  #selection(plan: PlacedPlan): TensorSelection | undefined {
    const stages = new Set(plan.ranks.flatMap((n, r) => (n === this.#d.selfId ? [Math.floor(r / plan.layout.tensor)] : [])));
    if (stages.size !== 1 || plan.layout.stages.length === 1) return undefined;
    const s = [...stages][0];
    const tied = (plan.config as { tie_word_embeddings?: unknown })?.tie_word_embeddings === true;
    // Only rank 0 holds the embedding (it embeds for its stage-0 tensor peers).
    return { layers: plan.layout.stages[s], embed: plan.ranks[0] === this.#d.selfId, head: s === plan.layout.stages.length - 1, tiedEmbeddings: tied };
  }

  #startLocal(entry: InstanceEntry, plan: PlacedPlan): void {
    const dir = this.catalog.dirOf(entry.model);
    const local: LocalInstance = { entry, plan, runners: new Map(), endpoints: this.#early.get(entry.id) ?? new Map(), connected: false, executor: null, startedAt: Date.now(), failed: false };
    this.#early.delete(entry.id);
    this.#local.set(entry.id, local);
    if (dir) return this.#spawnRunners(local, dir);
    const fetch = this.#d.fetchModel;
    if (!fetch || !entry.model.includes('/')) {
      this.#reportFailed(local, `model ${entry.model} is not on node ${this.#d.selfId}`);
      return;
    }
    const selection = this.#selection(plan);
    this.#d.log.info({ instance: entry.id, model: entry.model, layers: selection?.layers ?? 'all' }, 'fetching the model for this node (peers first)');
    fetch(entry.model, selection).then(
      () => {
        const got = this.catalog.dirOf(entry.model);
        if (this.#local.get(entry.id) !== local || local.failed) return;
        if (!got) this.#reportFailed(local, `model ${entry.model} still missing after the fetch`);
        else this.#spawnRunners(local, got);
      },
      (err: Error) => {
        if (this.#local.get(entry.id) === local) this.#reportFailed(local, `cannot fetch ${entry.model}: ${err.message}`);
      },
    );
  }

  #spawnRunners(local: LocalInstance, dir: string): void {
    const { entry, plan } = local;
    local.startedAt = Date.now();
    const maxSeqLen = this.#d.maxSeqLen;
    const mine = plan.ranks.filter((n) => n === this.#d.selfId).length;
    const kind = this.#d.backend ?? 'wasm';
    const backend = { kind, threads: this.#d.threads ?? Math.max(1, Math.floor(os.availableParallelism() / mine)), allowSoftware: this.#d.allowSoftwareGpu };
    plan.ranks.forEach((node, rank) => {
      if (node !== this.#d.selfId) return;
      const runner = new RunnerProcess(
        { modelDir: dir, layout: plan.layout, rank, groupId: entry.id, secret: plan.secret, listenHost: '0.0.0.0', maxSeqLen, stepMs: 30_000, backend, security: this.#d.dataPlaneSecurity?.() },
        {
          onListening: (port) => {
            local.endpoints.set(rank, localAddresses(port));
            this.#publishEndpoints(local);
            this.#maybeConnect(local);
          },
          onReady: () => {
            this.#links.record(entry.id, rank, runner.links);
            this.#d.log.info({ instance: entry.id, rank, dataPlane: runner.dataPlane }, 'runner ready');
            this.#publishLinks(local);
          },
          onDead: (message) => {
            if (!this.#closed && this.#local.get(entry.id) === local) this.#reportFailed(local, message);
          },
        },
        this.#d.runnerEnv,
      );
      local.runners.set(rank, runner);
      if (rank === 0) {
        const config = loadModelConfig(dir);
        const seq = Math.min(maxSeqLen ?? 4096, config.maxPositionEmbeddings, 4096);
        local.executor = new InstanceExecutor(runner, dir, config, seq, { maxQueue: this.#d.maxQueue ?? 64, defaultMaxTokens: 256, concurrency: plan.layout.stages.length });
      }
    });
    this.#d.log.info({ instance: entry.id, model: entry.model, ranks: [...local.runners.keys()], strategy: plan.strategy }, 'starting runners');
  }

  #publishEndpoints(local: LocalInstance): void {
    for (const rank of local.runners.keys()) {
      const addresses = local.endpoints.get(rank);
      if (addresses) this.#d.publish({ type: 'endpoint', from: this.#d.selfId, instance: local.entry.id, rank, addresses });
    }
  }

  #maybeConnect(local: LocalInstance): void {
    if (local.connected) return;
    const n = local.plan.ranks.length;
    for (let r = 0; r < n; r++) if (!local.endpoints.has(r)) return;
    local.connected = true;
    const peers = Array.from({ length: n }, (_, r) => ({ addresses: local.endpoints.get(r)! }));
    for (const runner of local.runners.values()) runner.connect(peers);
  }

  #reportFailed(local: LocalInstance, reason: string): void {
    if (local.failed) return;
    local.failed = true;
    this.#failed.set(local.entry.id, reason);
    this.#d.log.warn({ instance: local.entry.id, reason }, 'instance failed on this node');
    for (const r of local.runners.values()) void r.stop(500);
    const msg: ServeMessage = { type: 'failed', from: this.#d.selfId, instance: local.entry.id, reason: reason.slice(0, 1000) };
    if (this.#d.isCoordinator()) this.onMessage(msg);
    else this.#d.publish(msg);
  }

  // ---------------------------------------------------------------- coordinator

  /** Plans `model` on the current cluster (any node can; the coordinator's decision is the one logged). */
  planFor(model: string, req: PlacementRequest, shape?: ModelShape, config?: unknown): { plan: InstancePlan; shape: ModelShape; config: unknown } {
    let s = shape;
    let c = config;
    if (!s || !c) {
      const remote = this.#remote.get(model);
      if (!this.catalog.has(model) && remote && this.remoteModels().has(model)) {
        s = remote.shape;
        c = remote.config;
      } else {
        const info = this.catalog.info(model);
        s = info.shape;
        c = info.rawConfig;
      }
    }
    const spec = modelFromConfig(c, { name: model });
    return { plan: place(s, spec, this.#placeableCluster(), req), shape: s, config: c };
  }

  get #suspectAfterMs(): number {
    return this.#d.suspectAfterMs ?? 2500;
  }

  /**
   * The cluster as placement should see it: without nodes that stopped answering heartbeats. A node
   * killed a moment ago stays "live" in the shared state until the gone-after timeout; placing a
   * replacement instance on it would fail again.
   */
  #placeableCluster(): Cluster {
    const cluster = this.#d.cluster();
    const heardAt = this.#d.heardAt;
    if (!heardAt) return cluster;
    const now = Date.now();
    const silent = new Set(
      cluster.nodes.filter((n) => n.id !== this.#d.selfId && now - (heardAt(n.id) ?? -Infinity) > this.#suspectAfterMs).map((n) => n.id),
    );
    if (silent.size === 0) return cluster;
    return {
      ...cluster,
      nodes: cluster.nodes.filter((n) => !silent.has(n.id)),
      links: cluster.links.filter((l) => !silent.has(l.a) && !silent.has(l.b)),
    };
  }

  #findExisting(model: string, req: PlacementRequest, exclusive: boolean): InstanceEntry | undefined {
    return Object.values(this.#d.state().instances).find((e) => {
      if (e.model !== model) return false;
      if (!exclusive) return true;
      const r = (e.plan as PlacedPlan).requested;
      return r.strategy === req.strategy && (r.nodes ?? 2) === (req.nodes ?? 2);
    });
  }

  #placeAsCoordinator(model: string, req: PlacementRequest, exclusive: boolean, shape?: ModelShape, config?: unknown): InstanceEntry {
    const existing = this.#findExisting(model, req, exclusive);
    if (existing) return existing;
    const planned = this.planFor(model, req, shape, config);
    return this.#propose(model, planned.plan, req, planned.shape, planned.config);
  }

  #propose(model: string, placed: InstancePlan, req: PlacementRequest, shape: ModelShape, config: unknown, supersedes?: string): InstanceEntry {
    const id = `${model.replace(/[^\w.-]/g, '_').slice(0, 100)}-${randomBytes(4).toString('hex')}`;
    const plan: PlacedPlan = { ...placed, secret: randomBytes(32).toString('hex'), requested: req, shape, config, ...(supersedes ? { supersedes } : {}) };
    const entry: InstanceEntry = { id, model, placedAt: Date.now(), nodes: plan.ranks, plan };
    this.#d.propose({ type: 'instance-placed', instance: { ...entry, nodes: [...entry.nodes] } });
    this.#d.log.info({ instance: id, model, strategy: plan.strategy, ranks: plan.ranks, stages: plan.layout.stages, tensor: plan.layout.tensor }, 'instance placed');
    return entry;
  }

  #removeAsCoordinator(id: string): void {
    if (this.#d.state().instances[id]) this.#d.propose({ type: 'instance-removed', id, at: Date.now() });
  }

  /** Removes a broken instance and places its model again on the live nodes (forced layout if it still fits, else auto). */
  #replace(id: string, reason: string): void {
    const entry = this.#d.state().instances[id];
    if (!entry || this.#replaced.has(id)) return;
    this.#replaced.add(id);
    this.#d.log.warn({ instance: id, reason }, 'replacing instance');
    this.#removeAsCoordinator(id);
    const old = entry.plan as PlacedPlan;
    // Wait until a node that just died has been silent long enough to be left out of the plan
    // (#placeableCluster); it still counts as live in the shared state until gone-after.
    setTimeout(() => {
      if (this.#closed || !this.#d.isCoordinator()) return;
      const attempts: PlacementRequest[] = [old.requested, { strategy: 'auto' }];
      for (const req of attempts) {
        try {
          this.#placeAsCoordinator(entry.model, req, req.strategy !== 'auto', old.shape, old.config);
          return;
        } catch (err) {
          this.#d.log.warn({ model: entry.model, strategy: req.strategy, err: (err as Error).message }, 're-placement failed');
        }
      }
    }, this.#d.heardAt ? this.#suspectAfterMs + 500 : 1000);
  }

  // ---------------------------------------------------------------- API side

  /** Places `model` (or finds an instance of it) through the coordinator; returns the instance id once placed. */
  async ensurePlaced(model: string, req: PlacementRequest, exclusive: boolean, timeoutMs = 30_000): Promise<InstanceEntry> {
    const existing = this.#findExisting(model, req, exclusive);
    if (existing) return existing;
    // Just after start-up the shared state may not hold any profile yet: give it a moment.
    const settle = Date.now() + Math.min(timeoutMs, 10_000);
    while (this.#d.cluster().nodes.length === 0 && Date.now() < settle) await sleep(200);
    let planned;
    try {
      planned = this.planFor(model, req);
    } catch (err) {
      if (err instanceof UnknownModelError) throw new ServeError(404, 'model_not_found', err.message);
      if (err instanceof PlacementError) throw new ServeError(503, 'placement_failed', `cannot place ${model}: ${err.message}`);
      throw err;
    }
    const deadline = Date.now() + timeoutMs;
    let lastAsk = 0;
    while (Date.now() < deadline) {
      const found = this.#findExisting(model, req, exclusive);
      if (found) return found;
      if (Date.now() - lastAsk > 2000) {
        lastAsk = Date.now();
        if (this.#d.isCoordinator()) this.#placeAsCoordinator(model, req, exclusive, planned.shape, planned.config);
        else this.#d.publish({ type: 'place', from: this.#d.selfId, model, strategy: req.strategy, nodes: req.nodes, exclusive, shape: planned.shape, config: planned.config as Record<string, unknown> });
      }
      await sleep(100);
    }
    throw new ServeError(503, 'placement_timeout', `the coordinator did not place ${model} within ${timeoutMs / 1000} s`);
  }

  async remove(id: string): Promise<boolean> {
    if (!this.#d.state().instances[id]) return false;
    if (this.#d.isCoordinator()) this.#removeAsCoordinator(id);
    else this.#d.publish({ type: 'remove', from: this.#d.selfId, instance: id });
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && this.#d.state().instances[id]) await sleep(100);
    if (this.#d.state().instances[id]) throw new ServeError(503, 'remove_timeout', `instance ${id} was not removed within 10 s`);
    return true;
  }

  isReady(id: string): boolean {
    const local = this.#local.get(id);
    if (local?.executor) return local.executor.runner.ready;
    const s = this.#status.get(id);
    return !!s && s.ready && Date.now() - s.at < STATUS_FRESH_MS;
  }

  statusOf(id: string): InstanceStatus & { failed: string | null } {
    const local = this.#local.get(id)?.executor?.load;
    const s = this.#status.get(id);
    return { active: 0, queued: 0, capacity: 0, at: 0, ...(s ?? {}), ...(local ?? {}), ready: this.isReady(id), failed: this.#failed.get(id) ?? null };
  }

  /** A ready instance of `model`, least loaded first; waits up to `timeoutMs` for one to become ready. */
  async pick(model: string, timeoutMs: number): Promise<InstanceEntry> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const all = Object.values(this.#d.state().instances);
      // An instance whose successor serves takes no new requests (it finishes what it has, then retires).
      const ready = all.filter((e) => e.model === model && this.isReady(e.id) && !all.some((o) => (o.plan as PlacedPlan).supersedes === e.id && this.isReady(o.id)));
      if (ready.length) {
        const load = (e: InstanceEntry) => {
          const s = this.#status.get(e.id);
          return s ? (s.active + s.queued) / Math.max(1, s.capacity + 1) : 0;
        };
        return ready.sort((a, b) => load(a) - load(b) || (a.id < b.id ? -1 : 1))[0];
      }
      if (Date.now() > deadline) throw new ServeError(503, 'model_not_ready', `no instance of ${model} became ready within ${Math.round(timeoutMs / 1000)} s`);
      if (!Object.values(this.#d.state().instances).some((e) => e.model === model)) await this.ensurePlaced(model, { strategy: 'auto' }, false, Math.max(1000, deadline - Date.now()));
      await sleep(100);
    }
  }

  /** Each known link end of `id`'s data plane: RDMA with its device, or TCP with the reason. */
  linksOf(id: string): InstanceLink[] {
    return this.#links.of(id);
  }

  /** libp2p addresses a driving node announced. */
  addrsOf(peer: string): string[] {
    return this.#addrs.get(peer) ?? [];
  }

  instances(): ClusterState['instances'] {
    return this.#d.state().instances;
  }

  /** The executor when this node drives `id`. */
  executor(id: string): InstanceExecutor | null {
    const l = this.#local.get(id);
    return l?.executor && !l.failed ? l.executor : null;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
