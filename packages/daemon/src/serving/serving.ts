/**
 * Serving on one daemon, wired: the serve gossip topic feeds the board (statuses, catalog, links,
 * failures) and the supervisor (endpoints); the coordinator's decisions run here when this node
 * coordinates; the router takes requests from the HTTP rooms and from peers (`/orchard/infer/1`).
 * Nothing here decides anything: see coordinator.ts, supervisor.ts, router.ts, board.ts.
 */
import { randomBytes } from 'node:crypto';
import { multiaddr } from '@multiformats/multiaddr';
import { peerIdFromString } from '@libp2p/peer-id';
import type { Cluster } from '@orchard/partitioner';
import type { Logger } from 'pino';
import type { NodeBackend } from '../backend/node.js';
import type { DaemonOptions } from '../config/options.js';
import type { OrchardNode } from '../node/create-node.js';
import type { ClusterView } from '../state/cluster-view.js';
import type { Replica } from '../state/replication.js';
import { Embedder } from './embedder.js';
import { BUNDLED_DEMO_DIR, ModelCatalog } from '../models/catalog.js';
import type { ModelDescription } from '../models/description.js';
import { fetchModel } from '../store/peers/fetch-model.js';
import { startWeightsService } from '../store/peers/weights-service.js';
import type { PlacementRequest } from '../state/placed-plan.js';
import { HubClient, ModelStore, type PullEvent } from '../store/index.js';
import type { TensorSelection } from '../store/safetensors-range.js';
import { Board } from './board.js';
import { decide, emptyMemory, type Command, type Memory } from './coordinator.js';
import { callRemote, serveInfer } from './forward.js';
import { SERVE_TOPIC, decodeServe, encodeServe, type ServeMessage } from './messages.js';
import { PlacementError, withoutSilentNodes } from './placement.js';
import { ServeError } from '../requests/errors.js';
import { Router } from './router.js';
import { Supervisor } from './supervisor.js';
import { directCidrsOf, encryptionPolicy, type DataPlaneSecurity } from '../runner/link-security.js';
import { anyOf, until } from './wait.js';

const TICK_MS = 500;

export interface ServingHooks {
  /** Told about every pull on this node (the dashboard's download/load progress). */
  pullProgress?: { pullEvent(model: string, e: PullEvent): void; pullEnded(model: string, error?: string): void; badPeer?(model: string, peer: string): void };
}

/** The control plane as serving sees it: the libp2p node, the replicated state, its changes. */
export interface ServingControl {
  readonly node: OrchardNode;
  /** The cluster state (read), and the coordinator's proposals when this node coordinates. */
  readonly replica: Pick<Replica, 'state' | 'isCoordinator' | 'coordinator' | 'heardAt' | 'propose'>;
  /** The planner's cluster with names and pod mode (state/cluster-view.ts). */
  cluster(): ClusterView;
  /** Every change of the cluster state; returns the unsubscribe. */
  onChange(listener: (what: string) => void): () => void;
}

/** The settings serving reads (config/options.ts resolves them). */
export type ServingOptions = Pick<
  DaemonOptions,
  | 'dataDir' | 'demoModelDir' | 'hfEndpoint' | 'hfToken' | 'heartbeatMs' | 'keepAliveMs' | 'context' | 'batch' | 'maxQueue'
  | 'prefixCacheBytes' | 'speculate' | 'draftModel' | 'dataPlaneEncryption' | 'dataPlaneCipher' | 'dataPlanePollMs' | 'rdmaSim'
>;

/** What the composition root (orchard.ts) hands serving: each part once, decided there. */
export interface ServingDeps {
  control: ServingControl;
  options: ServingOptions;
  log: Logger;
  /** What this node's runners compute on (backend/node.ts), picked once at start. */
  backend: NodeBackend;
  hooks?: ServingHooks;
}

export interface Serving {
  readonly router: Router;
  readonly board: Board;
  readonly catalog: ModelCatalog;
  readonly supervisor: Supervisor;
  /** Embeddings, run whole on this node where the model's files are. */
  readonly embedder: Embedder;
  /** The hub this node pulls from (HF_ENDPOINT, the token): for describing a model before its pull. */
  readonly hub: HubClient;
  /** How long a request waits for an instance to become ready, ms. */
  readonly readyTimeoutMs: number;
  /**
   * Pulls `repo` into this node's store, peers first (one pull per model at a time); `fromPod`: peers
   * only; `onProgress` hears this pull's files.
   */
  pull(repo: string, selection?: TensorSelection, o?: { fromPod?: boolean; onProgress?: (e: PullEvent) => void }): ReturnType<typeof fetchModel>;
  /**
   * How long `model` stays loaded once idle, as its last request asked (Ollama's keep_alive): ms, 0 to
   * unload it as soon as it is idle, null for never, undefined for the daemon's --keep-alive. Heeded
   * where this node coordinates the pod.
   */
  keepAlive(model: string, ms: number | null | undefined): void;
  /** Asks the coordinator to remove an instance and waits (10 s) until it is gone; false when unknown. */
  remove(id: string): Promise<boolean>;
  close(): Promise<void>;
}

export async function startServing(deps: ServingDeps): Promise<Serving> {
  const { control, options: o, backend, hooks = {} } = deps;
  const log = deps.log.child({ part: 'serve' });
  const selfId = control.node.peerId.toString();
  const pubsub = control.node.services.pubsub;
  const state = () => control.replica.state;
  const publish = (m: ServeMessage) => {
    pubsub.publish(SERVE_TOPIC, encodeServe(m)).catch((err: Error) => log.debug({ err: err.message, type: m.type }, 'serve publish failed'));
  };
  const catalog = new ModelCatalog(o.dataDir, o.demoModelDir ?? BUNDLED_DEMO_DIR, { onRefused: (model, reason) => log.warn({ model, reason }, 'model cannot be loaded: refused until its files change') });
  const store = new ModelStore(o.dataDir, new HubClient({ endpoint: o.hfEndpoint, token: o.hfToken ?? undefined }));
  const board = new Board({ instances: () => state().instances });
  const livePeers = () => Object.values(state().nodes).filter((n) => n.status === 'live' && n.peerId !== selfId).map((n) => n.peerId);

  const security = (): DataPlaneSecurity => ({ encryption: o.dataPlaneEncryption, cipher: o.dataPlaneCipher, directCidrs: directCidrsOf(state().nodes[selfId]?.profile?.interfaces) });
  const weights = await startWeightsService({ node: control.node, store, selfId, livePeers, coordinator: () => control.replica.coordinator(), encryption: () => encryptionPolicy(security()) });
  const pulls = new Map<string, ReturnType<typeof fetchModel>>();
  /** Per-call progress listeners (an Ollama /api/pull stream), besides the dashboard's hook. */
  const pullListeners = new Map<string, Set<(e: PullEvent) => void>>();
  const pull = (repo: string, selection?: TensorSelection, hub = true) => {
    const running = pulls.get(repo);
    if (running) return running;
    const progress = hooks.pullProgress;
    const onProgress = (e: PullEvent) => {
      progress?.pullEvent(repo, e);
      for (const l of pullListeners.get(repo) ?? []) l(e);
    };
    const p = fetchModel(weights, store, repo, {
      selection,
      fromPod: !hub,
      onProgress,
      onBadPeer: (peer, file, chunk, why) => {
        log.warn({ repo, peer, file, chunk, why }, 'a peer served bytes that do not match the pod digest; dropped for this pull');
        progress?.badPeer?.(repo, peer);
      },
      onLedgerUnreachable: (err) => log.warn({ repo, err: err.message }, 'cannot ask the pod hub ledger; fetching unclaimed chunks from the hub'),
    }).finally(() => pulls.delete(repo));
    if (progress) p.then(() => progress.pullEnded(repo), (err: Error) => progress.pullEnded(repo, err.message));
    pulls.set(repo, p);
    return p;
  };

  // Pulls a crash or a kill cut short go on where their chunk logs stopped, asked for as before.
  void store.interrupted().then((cut) => {
    for (const m of cut) {
      if (m.resume?.quant) {
        log.warn({ repo: m.repo, pending: m.pending }, `an interrupted pull was not resumed: run \`orchard pull ${m.repo}:${m.resume.quant}\``);
        continue;
      }
      log.info({ repo: m.repo, pending: m.pending }, 'resuming an interrupted pull');
      pull(m.repo, undefined, !m.resume?.fromPod).then(
        (r) => log.info({ repo: m.repo, hubBytes: r.hubBytes, peerBytes: r.peerBytes }, 'interrupted pull finished'),
        (err: Error) => log.warn({ repo: m.repo, err: err.message }, 'interrupted pull failed again'),
      );
    }
  });

  // ---- the coordinator's decisions, when this node coordinates
  // Heartbeats come every heartbeatMs: two and a half missed ones mark a node as not placeable.
  const suspectAfterMs = Math.max(1500, o.heartbeatMs * 2.5);
  const placeableCluster = (): Cluster => withoutSilentNodes(control.cluster(), { selfId, heardAt: (p) => control.replica.heardAt(p), now: Date.now(), suspectAfterMs });
  let memory: Memory = emptyMemory;
  /** Per-model keep-alive asked by the latest request (serving.keepAlive). */
  const keepAlives = new Map<string, number | null>();
  const fresh = {
    instanceId: (model: string) => `${model.replace(/[^\w.-]/g, '_').slice(0, 100)}-${randomBytes(4).toString('hex')}`,
    secret: () => randomBytes(32).toString('hex'),
  };
  /** Runs one coordinator step and logs its events (throws PlacementError for a place that cannot be done). */
  const coordinate = (command: Command) => {
    if (!control.replica.isCoordinator) return;
    const view = {
      state: state(),
      cluster: placeableCluster(),
      now: Date.now(),
      ready: (id: string) => board.isReady(id),
      status: (id: string) => board.status(id),
      filesAt: (model: string) => Math.max(board.filesAt(model), catalog.filesAt(model) ?? 0),
      silenceMs: suspectAfterMs + 500,
      keepAliveMs: o.keepAliveMs,
      keepAliveOf: (model: string) => (keepAlives.has(model) ? keepAlives.get(model)! : undefined),
    };
    const step = decide(view, memory, command, fresh);
    memory = step.memory;
    for (const e of step.events) control.replica.propose(e);
    for (const note of step.notes) log.info({ command: command.type }, note);
  };

  const supervisor = new Supervisor({
    selfId,
    log,
    catalog,
    board,
    publish,
    onFailed: (instance, reason, phase) => {
      board.fail(instance, { reason, from: selfId, phase });
      publish({ type: 'failed', from: selfId, instance, reason, phase });
      coordinate({ type: 'failed', id: instance, reason: `${reason} (on ${selfId})`, phase });
    },
    runners: {
      backend,
      pollMs: o.dataPlanePollMs,
      rdmaSim: o.rdmaSim,
      security,
    },
    maxQueue: o.maxQueue,
    batch: { sequences: o.batch, prefixCacheBytes: o.prefixCacheBytes, speculate: o.speculate, ...(o.draftModel ? { draftModel: o.draftModel } : {}) },
    addrs: () => control.node.getMultiaddrs().map(String),
    // Runners never reach for the hub themselves: a model comes from the pod's peers, or is pulled on purpose.
    fetchModel: async (repo, selection) => {
      const r = await pull(repo, selection, false);
      log.info({ repo, hubBytes: r.hubBytes, peerBytes: r.peerBytes, holders: r.holders, sources: r.sources }, 'model fetched');
    },
  });

  const requestPlacement = (model: string, description: ModelDescription, requested: PlacementRequest, p: { exclusive: boolean; explicit: boolean }) => {
    if (control.replica.isCoordinator) coordinate({ type: 'place', model, description, requested, ...p });
    else publish({ type: 'place', from: selfId, model, description, requested, ...p });
  };

  const router = new Router({
    state,
    changes: anyOf((l) => control.onChange(l), (l) => board.onChange(l)),
    board,
    executor: (id) => supervisor.executor(id),
    catalog,
    placeableCluster,
    defaultContext: o.context,
    defaultSequences: o.batch,
    requestPlacement,
    forward: async (driver, instance, req, emit, signal) => {
      // Reached only through gossip so far (bootstrap pods): dial the addresses it announced.
      if (!control.node.getConnections().some((c) => c.remotePeer.toString() === driver)) {
        const addrs = board.addrsOf(driver).flatMap((a) => {
          try {
            return [multiaddr(a)];
          } catch {
            return [];
          }
        });
        if (addrs.length) await control.node.peerStore.merge(peerIdFromString(driver), { multiaddrs: addrs }).catch(() => undefined);
      }
      return callRemote(control.node, driver, instance, req, emit, signal);
    },
  });

  // ---- gossip in
  const onMessage = (m: ServeMessage) => {
    switch (m.type) {
      case 'endpoint':
        return supervisor.onEndpoint(m);
      case 'failed':
        board.accept(m);
        return coordinate({ type: 'failed', id: m.instance, reason: `${m.reason} (on ${m.from})`, phase: m.phase });
      case 'place':
        try {
          return coordinate({ type: 'place', model: m.model, description: m.description, requested: m.requested, exclusive: m.exclusive, explicit: m.explicit });
        } catch (err) {
          if (err instanceof PlacementError) return log.warn({ model: m.model, from: m.from, err: err.message }, 'placement asked for by a peer failed');
          throw err;
        }
      case 'remove':
        return coordinate({ type: 'remove', id: m.instance });
      default:
        return board.accept(m);
    }
  };
  pubsub.subscribe(SERVE_TOPIC);
  pubsub.addEventListener('message', (evt) => {
    const msg = evt.detail;
    if (msg.topic !== SERVE_TOPIC || msg.type !== 'signed') return;
    const decoded = decodeServe(msg.data, msg.from.toString());
    if (!decoded.ok) return log.debug({ peer: msg.from.toString(), reason: decoded.reason }, 'dropped serve message');
    try {
      onMessage(decoded.message);
    } catch (err) {
      log.warn({ peer: msg.from.toString(), err: (err as Error).message }, 'serve message handler failed');
    }
  });
  await serveInfer(control.node, async (instance, req, emit, signal) => {
    const exec = supervisor.executor(instance);
    if (!exec) throw new ServeError(503, 'instance_unavailable', `node ${selfId} does not drive instance ${instance} (any more)`);
    await exec.run(req, emit, signal);
  });

  // ---- the clock: reconcile runners with the state, repeat gossip, let the coordinator act
  const announceCatalog = () => {
    for (const id of catalog.list().slice(0, 32)) {
      catalog.describe(id).then(
        (description) => publish({ type: 'catalog', from: selfId, id, description, filesAt: catalog.filesAt(id) ?? undefined }),
        (err: Error) => log.debug({ model: id, err: err.message }, 'model not announced'),
      );
    }
  };
  const offState = control.onChange(() => supervisor.reconcile(state()));
  let ticks = 0;
  const timer = setInterval(() => {
    try {
      ticks++;
      supervisor.reconcile(state());
      supervisor.tick(Date.now(), { status: ticks % 2 === 0, links: ticks % 10 === 6 });
      if (ticks % 10 === 1) announceCatalog();
      if (ticks % 10 === 6) board.retain();
      coordinate({ type: 'tick' });
    } catch (err) {
      log.error({ err }, 'serving tick failed');
    }
  }, TICK_MS);

  const embedder = new Embedder({ catalog, backend, maxSeqLen: o.context ?? 8192, keepAliveMs: o.keepAliveMs, log });

  return {
    router,
    board,
    catalog,
    supervisor,
    embedder,
    hub: store.hub,
    readyTimeoutMs: 90_000,
    pull: (repo, selection, po) => {
      const onProgress = po?.onProgress;
      if (!onProgress) return pull(repo, selection, !po?.fromPod);
      const set = pullListeners.get(repo) ?? new Set();
      pullListeners.set(repo, set.add(onProgress));
      return pull(repo, selection, !po?.fromPod).finally(() => set.delete(onProgress));
    },
    keepAlive(model, ms) {
      if (ms === undefined) keepAlives.delete(model);
      else keepAlives.set(model, ms);
    },
    async remove(id) {
      if (!state().instances[id]) return false;
      if (control.replica.isCoordinator) coordinate({ type: 'remove', id });
      else publish({ type: 'remove', from: selfId, instance: id });
      await until(
        (l) => control.onChange(l),
        () => (state().instances[id] ? undefined : true),
        { timeoutMs: 10_000, timeout: () => new ServeError(503, 'remove_timeout', `instance ${id} was not removed within 10 s`) },
      );
      return true;
    },
    async close() {
      clearInterval(timer);
      offState();
      embedder.close();
      await supervisor.close();
      await weights.close();
      await store.close();
    },
  };
}
