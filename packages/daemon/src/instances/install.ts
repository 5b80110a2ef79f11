/**
 * Serving on a daemon: the instance manager, the serve gossip topic, the forwarding protocol and
 * the OpenAI/instance routes. Passed to `Daemon.start` as its `routes` extension.
 */
import type { FastifyInstance } from 'fastify';
import type { Daemon } from '../daemon.js';
import { openAiRoutes } from '../openai/routes.js';
import { callRemote, serveInfer } from './forward.js';
import { InstanceManager } from './manager.js';
import { SERVE_TOPIC, decodeServe, encodeServe, type ServeMessage } from './messages.js';
import { ServeError, type ServeEvent, type ServeRequest } from './requests.js';

export interface ServingOptions {
  /** Requests queued per instance before 429. @default ORCHARD_MAX_QUEUE or 64 */
  maxQueue?: number;
  /** How long a request waits for an instance to become ready, ms. @default 90000 */
  readyTimeoutMs?: number;
}

export async function installServing(app: FastifyInstance, daemon: Daemon, o: ServingOptions = {}): Promise<InstanceManager> {
  const log = daemon.log.child({ part: 'serve' });
  const selfId = daemon.node.peerId.toString();
  const pubsub = daemon.node.services.pubsub;
  const envQueue = Number(process.env.ORCHARD_MAX_QUEUE);
  const manager = new InstanceManager({
    selfId,
    log,
    dataDir: daemon.options.dataDir,
    state: () => daemon.replica.state,
    cluster: () => daemon.cluster(),
    isCoordinator: () => daemon.replica.isCoordinator,
    propose: (e) => daemon.replica.propose(e),
    publish: (m: ServeMessage) => {
      pubsub.publish(SERVE_TOPIC, encodeServe(m)).catch((err: Error) => log.debug({ err: err.message, type: m.type }, 'serve publish failed'));
    },
    maxQueue: o.maxQueue ?? (Number.isInteger(envQueue) && envQueue >= 0 ? envQueue : 64),
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
    return callRemote(daemon.node, entry.nodes[0], entry.id, req, emit, signal);
  };
  const models = () => [...new Set([...manager.catalog.list(), ...Object.values(manager.instances()).map((e) => e.model)])].sort();

  await app.register(async (scope) => openAiRoutes(scope, { manager, run, models }));
  app.addHook('onClose', async () => manager.close());
  manager.start();
  return manager;
}
