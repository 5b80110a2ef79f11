/**
 * One Orchard node, composed: the control plane (daemon.ts), serving on top of it (serving/), the
 * dashboard's progress gossip, and the HTTP API (http/) listening last. `orchard start` runs this;
 * tests start nodes through it too. The composition root: what is decided once (the compute backend,
 * the memory kept outside plans) is decided here, and each part gets only the ports it reads.
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { backendSettingOf, nodeBackend } from './backend/node.js';
import type { DaemonOptions } from './config/options.js';
import { Daemon, type DaemonCompute, type DaemonTimings } from './daemon.js';
import { encodeProgress, PROGRESS_TOPIC, ProgressBoard } from './dashboard/progress.js';
import { buildApi } from './http/server.js';
import { startServing, type Serving } from './serving/serving.js';
import { loadOrCreatePeerKey } from './identity/peer-key.js';
import { podPort } from './network/pod-port.js';
import { NetworkService } from './network/service.js';
import { reservedBytes } from './serving/reserved-memory.js';

export interface OrchardParts {
  timings?: Partial<DaemonTimings>;
  /** Serve models (placement, runners, OpenAI API). @default true */
  serving?: boolean;
  /** Serve the dashboard and gossip download progress for it. @default true */
  dashboard?: boolean;
}

export interface Orchard {
  readonly daemon: Daemon;
  readonly serving: Serving | null;
  /** The wide-area network this node joined (`--network`), if any. */
  readonly network: NetworkService | null;
  readonly api: FastifyInstance;
  readonly apiPort: number;
  stop(): Promise<void>;
}

/** Download and load progress of every node, gossiped on its own topic (see dashboard/progress.ts). */
function startProgress(daemon: Daemon): { board: ProgressBoard; stop(): void } {
  const log = daemon.log.child({ part: 'dashboard' });
  const pubsub = daemon.node.services.pubsub;
  const board = new ProgressBoard({
    self: daemon.node.peerId.toString(),
    publish: (p) => void pubsub.publish(PROGRESS_TOPIC, encodeProgress(p)).catch((err: Error) => log.debug({ err: err.message }, 'progress publish failed')),
  });
  pubsub.subscribe(PROGRESS_TOPIC);
  pubsub.addEventListener('message', (evt) => {
    const msg = evt.detail;
    if (msg.topic !== PROGRESS_TOPIC || msg.type !== 'signed') return;
    if (!board.receive(msg.data, msg.from.toString())) log.debug({ peer: msg.from.toString() }, 'dropped progress message');
  });
  const beat = setInterval(() => board.heartbeat(), 3000);
  return { board, stop: () => clearInterval(beat) };
}

/** The runners' backend and the memory each instance keeps outside its plan: picked once, logged once. */
async function decideCompute(options: DaemonOptions, log: Logger): Promise<DaemonCompute> {
  const backend = await nodeBackend(backendSettingOf(options));
  if (backend.gpu) log.info({ ...backend.gpu }, 'runners use the GPU');
  else log.info({ backend: backend.kind, ...(backend.note ? { note: backend.note } : {}) }, 'runners use the CPU');
  const reserved = await reservedBytes(options);
  if (reserved > 0) log.info({ reservedBytes: reserved }, 'memory kept per instance outside the plan (draft model, prefix cache)');
  return { backend, reservedBytes: reserved };
}

export async function startOrchard(options: DaemonOptions, log: Logger, parts: OrchardParts = {}): Promise<Orchard> {
  const compute = await decideCompute(options, log);
  const daemon = await Daemon.start(options, log, { timings: parts.timings, compute });
  // The control plane as serving reads it: the node, the replicated state and its changes.
  const control = { node: daemon.node, replica: daemon.replica, cluster: () => daemon.cluster(), onChange: (l: (what: string) => void) => daemon.onChange(l) };
  let serving: Serving | null = null;
  let network: NetworkService | null = null;
  let progress: ReturnType<typeof startProgress> | null = null;
  let api: FastifyInstance | null = null;
  const stop = async () => {
    progress?.stop();
    await api?.close().catch(() => undefined);
    serving?.router.attachNetwork(null);
    await network?.stop();
    await serving?.close();
    await daemon.stop();
  };
  try {
    if (parts.dashboard !== false) progress = startProgress(daemon);
    if (parts.serving !== false) {
      serving = await startServing({ control, options, log, backend: compute.backend, hooks: { pullProgress: progress?.board } });
      if (options.network) {
        const n = options.network;
        network = await NetworkService.start({
          // The same key as the pod's node (written by Daemon.start): offers and receipts are signed by this node's peer id.
          key: (await loadOrCreatePeerKey(options.dataDir)).key,
          dataDir: options.dataDir,
          log: log.child({ part: 'network' }),
          pod: podPort({ name: options.name, context: options.context, state: () => daemon.replica.state, isCoordinator: () => daemon.replica.isCoordinator }, serving),
          settings: { name: n.name, listen: n.listen, announce: n.announce, bootstrap: n.bootstrap, privateAddresses: n.privateAddresses, region: n.region, route: n.route, priceCap: n.maxPrice, trusted: n.trusted },
        });
        const joined = network;
        serving.router.attachNetwork({ models: () => joined.offeredModels(), run: (m, r, e, s) => joined.run(m, r, e, s), localStarted: () => joined.localStarted() });
      }
    }
    const pod = {
      cluster: () => daemon.cluster(),
      status: () => daemon.status(),
      remeasureCapability: async () => {
        await daemon.remeasureCapability();
        return { capability: daemon.capability };
      },
      onChange: (l: (what: string) => void) => daemon.onChange(l),
    };
    api = buildApi({
      pod,
      serving: serving ?? undefined,
      network,
      dashboard: progress ? { selfId: daemon.node.peerId.toString(), log, cluster: () => daemon.cluster(), state: () => daemon.replica.state, progress: progress.board } : undefined,
      token: options.apiToken,
      corsOrigins: options.corsOrigins,
      log,
      apiHost: options.apiHost,
      allowedHosts: options.apiAllowedHosts,
    });
    await api.listen({ host: options.apiHost, port: options.apiPort });
  } catch (err) {
    await stop();
    throw err;
  }
  const apiPort = (api.server.address() as { port: number }).port;
  log.info({ api: `http://${options.apiHost.includes(':') ? `[${options.apiHost}]` : options.apiHost}:${apiPort}` }, 'api listening');
  return { daemon, serving, network, api, apiPort, stop };
}
