/**
 * Serving on a daemon: the instance manager, the serve gossip topic, the forwarding protocol and
 * the OpenAI/instance routes. Passed to `Daemon.start` as its `routes` extension.
 */
import type { FastifyInstance } from 'fastify';
import type { Daemon } from '../daemon.js';
import { openAiRoutes } from '../openai/routes.js';
import { HubClient, ModelStore, type PullEvent } from '../store/index.js';
import { StoreError } from '../store/errors.js';
import { fetchModel } from '../store/peers/fetch-model.js';
import { startWeightsService } from '../store/peers/weights-service.js';
import { callRemote, serveInfer } from './forward.js';
import { sendError } from '../openai/errors.js';
import { z } from 'zod';
import { multiaddr } from '@multiformats/multiaddr';
import { peerIdFromString } from '@libp2p/peer-id';
import { InstanceManager } from './manager.js';
import { nodeBackend } from '../backend/node.js';
import { SERVE_TOPIC, decodeServe, encodeServe, type ServeMessage } from './messages.js';
import { ServeError, type ServeEvent, type ServeRequest } from './requests.js';
import type { TensorSelection } from '../store/safetensors-range.js';

export interface ServingOptions {
  /** Requests queued per instance before 429. @default ORCHARD_MAX_QUEUE or 64 */
  maxQueue?: number;
  /** How long a request waits for an instance to become ready, ms. @default 90000 */
  readyTimeoutMs?: number;
  /** Told about every pull on this node (the dashboard's download/load progress). */
  pullProgress?: { pullEvent(model: string, e: PullEvent): void; pullEnded(model: string, error?: string): void; badPeer?(model: string, peer: string): void };
}

export async function installServing(app: FastifyInstance, daemon: Daemon, o: ServingOptions = {}): Promise<InstanceManager> {
  const log = daemon.log.child({ part: 'serve' });
  const selfId = daemon.node.peerId.toString();
  const pubsub = daemon.node.services.pubsub;
  const envQueue = Number(process.env.ORCHARD_MAX_QUEUE);
  const store = new ModelStore(daemon.options.dataDir, new HubClient());
  const livePeers = () =>
    Object.values(daemon.replica.state.nodes)
      .filter((n) => n.status === 'live' && n.peerId !== selfId)
      .map((n) => n.peerId);
  const weights = await startWeightsService({ node: daemon.node, store, selfId, livePeers, coordinator: () => daemon.replica.coordinator() });
  const pulls = new Map<string, ReturnType<typeof fetchModel>>();
  /** One pull per model at a time on this node. */
  const pull = (repo: string, selection?: TensorSelection, fromPod = false) => {
    const running = pulls.get(repo);
    if (running) return running;
    const progress = o.pullProgress;
    const p = fetchModel(weights, store, repo, {
      selection,
      fromPod,
      onProgress: progress && ((e) => progress.pullEvent(repo, e)),
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
  const engineBackend = daemon.engineBackend ?? (await nodeBackend());
  const manager = new InstanceManager({
    selfId,
    log,
    dataDir: daemon.options.dataDir,
    state: () => daemon.replica.state,
    cluster: () => daemon.cluster(),
    isCoordinator: () => daemon.replica.isCoordinator,
    heardAt: (peer) => daemon.replica.heardAt(peer),
    // Heartbeats come every heartbeatMs: two and a half missed ones mark a node as not placeable.
    suspectAfterMs: Math.max(1500, daemon.options.heartbeatMs * 2.5),
    propose: (e) => daemon.replica.propose(e),
    publish: (m: ServeMessage) => {
      pubsub.publish(SERVE_TOPIC, encodeServe(m)).catch((err: Error) => log.debug({ err: err.message, type: m.type }, 'serve publish failed'));
    },
    addrs: () => daemon.node.getMultiaddrs().map(String),
    // Decided once at daemon start (backend/node.ts: ORCHARD_ENGINE_BACKEND, ORCHARD_ENGINE_THREADS, GPU probe).
    backend: engineBackend.kind,
    allowSoftwareGpu: engineBackend.allowSoftware,
    threads: engineBackend.threads,
    maxQueue: o.maxQueue ?? (Number.isInteger(envQueue) && envQueue >= 0 ? envQueue : 64),
    fetchModel: async (repo, selection) => {
      const r = await pull(repo, selection);
      log.info({ repo, hubBytes: r.hubBytes, peerBytes: r.peerBytes, holders: r.holders, sources: r.sources }, 'model fetched');
    },
  });
  pubsub.subscribe(SERVE_TOPIC);
  pubsub.addEventListener('message', (evt) => {
    const msg = evt.detail;
    if (msg.topic !== SERVE_TOPIC) return;
    const from = msg.type === 'signed' ? msg.from.toString() : undefined;
    if (!from) return;
    const decoded = decodeServe(msg.data, from);
    if (!decoded.ok) {
      log.debug({ peer: from, reason: decoded.reason }, 'dropped serve message');
      return;
    }
    try {
      manager.onMessage(decoded.message);
    } catch (err) {
      log.warn({ peer: from, err: (err as Error).message }, 'serve message handler failed');
    }
  });

  await serveInfer(daemon.node, async (instance, req, emit, signal) => {
    const exec = manager.executor(instance);
    if (!exec) throw new ServeError(503, 'instance_unavailable', `node ${selfId} does not drive instance ${instance} (any more)`);
    await exec.run(req, emit, signal);
  });

  const readyTimeoutMs = o.readyTimeoutMs ?? 90_000;
  const run = async (model: string, req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal) => {
    const entry = await manager.pick(model, readyTimeoutMs);
    const exec = manager.executor(entry.id);
    if (exec) return exec.run(req, emit, signal);
    const driver = entry.nodes[0];
    // Reached only through gossip so far (bootstrap pods): dial the addresses it announced.
    if (!daemon.node.getConnections().some((c) => c.remotePeer.toString() === driver)) {
      const addrs = manager.addrsOf(driver).flatMap((a) => {
        try {
          return [multiaddr(a)];
        } catch {
          return [];
        }
      });
      if (addrs.length) await daemon.node.peerStore.merge(peerIdFromString(driver), { multiaddrs: addrs }).catch(() => undefined);
    }
    return callRemote(daemon.node, driver, entry.id, req, emit, signal);
  };
  const models = () => [...new Set([...manager.catalog.list(), ...manager.remoteModels().keys(), ...Object.values(manager.instances()).map((e) => e.model)])].sort();

  await app.register(async (scope) => openAiRoutes(scope, { manager, run, models }));
  // A pull through the daemon asks the pod's peers for the bytes before the hub.
  const pullBody = z.object({ repo: z.string().min(3).max(200), fromPod: z.boolean().optional() });
  app.post('/api/models/pull', async (req, reply) => {
    const b = pullBody.safeParse(req.body ?? {});
    if (!b.success) return sendError(reply, 400, b.error.issues[0]?.message ?? 'bad body', 'invalid_value');
    try {
      const r = await pull(b.data.repo, undefined, b.data.fromPod);
      return { repo: b.data.repo, dir: r.dir, commit: r.commit, sources: r.sources, hubBytes: r.hubBytes, peerBytes: r.peerBytes, bySource: r.bySource, badPeers: r.badPeers, peersHolding: r.holders };
    } catch (err) {
      if (err instanceof StoreError) return sendError(reply, 502, err.message, 'pull_failed');
      throw err;
    }
  });
  app.addHook('onClose', async () => {
    await manager.close();
    await weights.close();
    await store.close();
  });
  manager.start();
  return manager;
}
