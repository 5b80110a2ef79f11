/**
 * This node's runner processes, kept in line with the instances of the cluster state: for every
 * instance with ranks here it brings the model onto the node (from peers), starts one runner per rank,
 * gossips the runners' data-plane endpoints until every rank is connected, and reports a runner that
 * dies or never gets ready. For instances it drives (rank 0) it owns the request queue (executor) and
 * publishes the instance's status. Instances that leave the state have their runners stopped.
 */
import os from 'node:os';
import type { Logger } from 'pino';
import { loadModelConfig, ModelFormatError, UnsupportedModelError } from '@orchard/engine';
import type { NodeBackend } from '../backend/node.js';
import type { ModelCatalog } from '../models/catalog.js';
import { ModelFilesError } from '../models/load-check.js';
import type { PlacedPlan } from '../state/placed-plan.js';
import type { ClusterState, InstanceEntry } from '../state/types.js';
import type { TensorSelection } from '../store/safetensors-range.js';
import type { DataPlaneSecurity } from '../runner/link-security.js';
import { RunnerProcess } from '../runner/runner-process.js';
import type { RunnerInit } from '../runner/protocol.js';
import type { TcpAddress } from '../runner/transport.js';
import type { Board } from './board.js';
import { InstanceExecutor } from './executor.js';
import type { ServeMessage } from './messages.js';

/** A runner that is not ready this long after it started (model fetched) is reported failed. */
export const READY_TIMEOUT_MS = 120_000;

export interface SupervisorDeps {
  selfId: string;
  log: Logger;
  catalog: ModelCatalog;
  board: Board;
  publish(m: ServeMessage): void;
  /** A runner of `instance` failed here (also published): the coordinator replaces it. */
  onFailed(instance: string, reason: string, phase: 'load' | 'serve'): void;
  runners: {
    backend: Pick<NodeBackend, 'kind' | 'allowSoftware' | 'threads'>;
    pollMs: number;
    rdmaSim: string | null;
    env?: NodeJS.ProcessEnv;
    /** Which data-plane links runners encrypt (runner/link-security.ts), asked when runners start. */
    security?: () => DataPlaneSecurity;
  };
  /** Requests waiting per instance before 429. */
  maxQueue: number;
  /** Continuous batching (--batch: sequences per instance; --prefix-cache, --speculate). */
  batch: NonNullable<RunnerInit['batch']>;
  /** This node's libp2p addresses (sent with instance status, so gossip-only peers can dial it). */
  addrs(): string[];
  /** Brings a model this node lacks from the pod's peers; `selection`: only these layers. */
  fetchModel?(repo: string, selection: TensorSelection | undefined): Promise<void>;
}

interface Local {
  entry: InstanceEntry;
  runners: Map<number, RunnerProcess>;
  endpoints: Map<number, TcpAddress[]>;
  connected: boolean;
  executor: InstanceExecutor | null;
  startedAt: number;
  /** Every rank here got ready once: a later failure happened while serving, not loading. */
  served: boolean;
  failed: boolean;
}

export function localAddresses(port: number): TcpAddress[] {
  const out: TcpAddress[] = [];
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) out.push({ host: a.address, port });
  }
  out.push({ host: '127.0.0.1', port });
  return out.slice(0, 16);
}

export class Supervisor {
  readonly #d: SupervisorDeps;
  readonly #local = new Map<string, Local>();
  /** Endpoints heard before this node started its own runners for the instance. */
  readonly #early = new Map<string, Map<number, TcpAddress[]>>();
  /** Instances that failed here: not started again (the coordinator places a new instance). */
  readonly #failed = new Map<string, string>();
  #closed = false;

  constructor(deps: SupervisorDeps) {
    this.#d = deps;
  }

  /** Starts runners for new instances with ranks here and stops those of removed ones. */
  reconcile(state: ClusterState): void {
    if (this.#closed) return;
    for (const entry of Object.values(state.instances)) {
      if (!this.#local.has(entry.id) && !this.#failed.has(entry.id) && entry.plan.ranks.includes(this.#d.selfId)) this.#start(entry);
    }
    for (const [id, local] of this.#local) {
      if (state.instances[id]) continue;
      this.#d.log.info({ instance: id }, 'instance removed: stopping its runners');
      for (const r of local.runners.values()) void r.stop(1000);
      this.#local.delete(id);
    }
  }

  /** Periodic gossip: endpoints until connected, status of driven instances, runner links; ready timeouts. */
  tick(now: number, o: { status: boolean; links: boolean }): void {
    for (const local of this.#local.values()) {
      if (!local.connected) this.#publishEndpoints(local);
      if (!local.failed && !this.#ready(local) && now - local.startedAt > READY_TIMEOUT_MS) this.#fail(local, `not ready after ${READY_TIMEOUT_MS / 1000} s`);
      if (o.status && local.executor && !local.failed) {
        const status = { ready: local.executor.runner.ready, ...local.executor.load };
        this.#d.board.setLocal(local.entry.id, status);
        this.#d.publish({ type: 'status', from: this.#d.selfId, instance: local.entry.id, ...status, addrs: this.#d.addrs().slice(0, 16) });
      }
      if (o.links) this.#publishLinks(local);
    }
  }

  onEndpoint(m: Extract<ServeMessage, { type: 'endpoint' }>): void {
    const local = this.#local.get(m.instance);
    const map = local?.endpoints ?? this.#early.get(m.instance) ?? new Map<number, TcpAddress[]>();
    map.set(m.rank, m.addresses);
    if (local) return this.#maybeConnect(local);
    this.#early.set(m.instance, map);
    if (this.#early.size > 256) this.#early.delete(this.#early.keys().next().value!);
  }

  /** The request queue of `id` when this node drives it and it has not failed. */
  executor(id: string): InstanceExecutor | null {
    const l = this.#local.get(id);
    return l?.executor && !l.failed ? l.executor : null;
  }

  /** Why `id` failed on this node, if it did. */
  failure(id: string): string | undefined {
    return this.#failed.get(id);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#local.values()].flatMap((l) => [...l.runners.values()].map((r) => r.stop(1000))));
    this.#local.clear();
  }

  #ready(l: Local): boolean {
    return [...l.runners.values()].every((r) => r.ready);
  }

  #start(entry: InstanceEntry): void {
    const local: Local = { entry, runners: new Map(), endpoints: this.#early.get(entry.id) ?? new Map(), connected: false, executor: null, startedAt: Date.now(), served: false, failed: false };
    this.#early.delete(entry.id);
    this.#local.set(entry.id, local);
    const dir = this.#d.catalog.dirOf(entry.model);
    // A pull that did not finish here is finished from the pod's peers like a model not here at all.
    const unfinished = dir ? this.#d.catalog.unlisted(entry.model) : null;
    const path = this.#d.catalog.pathOf(entry.model);
    // A stage's copy goes through the fetch too: it brings only the chunks this placement lacks.
    if (dir && path && !unfinished && !this.#d.catalog.stageCopy(entry.model)) return this.#spawnChecked(local, path);
    const fetch = this.#d.fetchModel;
    if (!fetch || !entry.model.includes('/')) return this.#fail(local, unfinished ?? `model ${entry.model} is not on node ${this.#d.selfId}`);
    const selection = this.#selection(entry.plan);
    this.#d.log.info({ instance: entry.id, model: entry.model, layers: selection?.layers ?? 'all' }, 'fetching the model for this node from the pod');
    fetch(entry.model, selection).then(
      () => {
        if (this.#local.get(entry.id) !== local || local.failed) return;
        const got = this.#d.catalog.pathOf(entry.model);
        if (!got) this.#fail(local, `model ${entry.model} still missing after the fetch`);
        else this.#spawnChecked(local, got);
      },
      (err: Error) => {
        if (this.#local.get(entry.id) === local) this.#fail(local, `cannot fetch ${entry.model}: ${err.message}`);
      },
    );
  }

  /** Spawns the runners unless the catalog knows the files will not load (or are incomplete): then the instance fails now. */
  #spawnChecked(local: Local, dir: string): void {
    const refused = this.#d.catalog.refusal(local.entry.model);
    // Said once already (the catalog's log line, or the runner's): this instance's end is only debug.
    if (refused) return this.#fail(local, refused instanceof ModelFilesError ? refused.reason : refused.message, 'debug');
    this.#spawn(local, dir);
  }

  /** The layers this node's ranks need, when they all belong to one stage (else: everything). */
  #selection(plan: PlacedPlan): TensorSelection | undefined {
    const stages = new Set(plan.ranks.flatMap((n, r) => (n === this.#d.selfId ? [Math.floor(r / plan.layout.tensor)] : [])));
    if (stages.size !== 1 || plan.layout.stages.length === 1) return undefined;
    const s = [...stages][0];
    // Only rank 0 holds the embedding (it embeds for its stage-0 tensor peers).
    return { layers: plan.layout.stages[s], embed: plan.ranks[0] === this.#d.selfId, head: s === plan.layout.stages.length - 1, tiedEmbeddings: plan.model.spec.tiedEmbeddings };
  }

  #spawn(local: Local, dir: string): void {
    const { entry } = local;
    const plan = entry.plan;
    local.startedAt = Date.now();
    const mine = plan.ranks.filter((n) => n === this.#d.selfId).length;
    const { backend, pollMs, rdmaSim, env } = this.#d.runners;
    const runnerBackend = { kind: backend.kind, threads: backend.threads ?? Math.max(1, Math.floor(os.availableParallelism() / mine)), allowSoftware: backend.allowSoftware };
    // The plan's sequences are what the planner reserved KV cache for: never batch more than that.
    const batch = { ...this.#d.batch, sequences: plan.sequences ?? this.#d.batch.sequences };
    plan.ranks.forEach((node, rank) => {
      if (node !== this.#d.selfId) return;
      const runner = new RunnerProcess(
        { modelDir: dir, layout: plan.layout, rank, groupId: entry.id, secret: plan.secret, listenHost: '0.0.0.0', maxSeqLen: plan.context, batch, stepMs: 30_000, backend: runnerBackend, pollMs, rdmaSim, security: this.#d.runners.security?.() },
        {
          onListening: (port) => {
            local.endpoints.set(rank, localAddresses(port));
            this.#publishEndpoints(local);
            this.#maybeConnect(local);
          },
          onReady: () => {
            this.#d.board.links.record(entry.id, rank, runner.links);
            this.#d.log.info({ instance: entry.id, rank, dataPlane: runner.dataPlane }, 'runner ready');
            if (this.#ready(local)) local.served = true;
            if (rank === 0 && local.executor) this.#d.board.setLocal(entry.id, { ready: true, ...local.executor.load });
            this.#publishLinks(local);
          },
          onDead: (message) => {
            if (this.#closed || this.#local.get(entry.id) !== local) return;
            // Files at fault fail the same way until they change: the catalog refuses the model meanwhile.
            if (runner.loadFailure?.files) this.#d.catalog.markFailed(entry.model, runner.loadFailure.message);
            this.#fail(local, message);
          },
        },
        env,
      );
      local.runners.set(rank, runner);
    });
    this.#d.log.info({ instance: entry.id, model: entry.model, ranks: [...local.runners.keys()], strategy: plan.strategy }, 'starting runners');
    // The driver's queue tokenizes here, built while the runners boot: a config or tokenizer that
    // cannot be read fails the instance at once with the reason (the runners check the same files).
    const driver = local.runners.get(0);
    if (!driver) return;
    try {
      local.executor = new InstanceExecutor(driver, dir, loadModelConfig(dir), plan.context, { maxQueue: this.#d.maxQueue, defaultMaxTokens: 256, concurrency: batch.sequences, model: entry.model });
    } catch (err) {
      if (err instanceof ModelFormatError || err instanceof UnsupportedModelError) this.#d.catalog.markFailed(entry.model, (err as Error).message);
      this.#fail(local, `${entry.model} could not be loaded on node ${this.#d.selfId}: ${(err as Error).message}`);
    }
  }

  #publishEndpoints(local: Local): void {
    for (const rank of local.runners.keys()) {
      const addresses = local.endpoints.get(rank);
      if (addresses) this.#d.publish({ type: 'endpoint', from: this.#d.selfId, instance: local.entry.id, rank, addresses });
    }
  }

  #publishLinks(local: Local): void {
    const m = this.#d.board.links.message(this.#d.selfId, local.entry.id, local.runners.keys());
    if (m) this.#d.publish(m);
  }

  #maybeConnect(local: Local): void {
    if (local.connected) return;
    const n = local.entry.plan.ranks.length;
    for (let r = 0; r < n; r++) if (!local.endpoints.has(r)) return;
    local.connected = true;
    const peers = Array.from({ length: n }, (_, r) => ({ addresses: local.endpoints.get(r)! }));
    for (const runner of local.runners.values()) runner.connect(peers);
  }

  #fail(local: Local, reason: string, level: 'warn' | 'debug' = 'warn'): void {
    if (local.failed) return;
    local.failed = true;
    this.#failed.set(local.entry.id, reason);
    if (this.#failed.size > 1024) this.#failed.delete(this.#failed.keys().next().value!);
    this.#d.log[level]({ instance: local.entry.id, reason }, 'instance failed on this node');
    for (const r of local.runners.values()) void r.stop(500);
    this.#d.onFailed(local.entry.id, reason.slice(0, 1000), local.served ? 'serve' : 'load');
  }
}
