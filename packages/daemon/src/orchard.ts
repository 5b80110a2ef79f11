/**
 * One Orchard node, composed: the control plane (daemon.ts), serving on top of it (serving/), the
 * dashboard's progress gossip, and the HTTP API (http/) listening last. `orchard start` runs this;
 * tests start nodes through it too.
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { backendSettingOf, nodeBackend } from './backend/node.js';
import type { DaemonOptions } from './config/options.js';
import { Daemon, type DaemonTimings } from './daemon.js';
import { encodeProgress, PROGRESS_TOPIC, ProgressBoard } from './dashboard/progress.js';
import { buildApi } from './http/server.js';
import { startServing, type Serving } from './serving/serving.js';

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

export async function startOrchard(options: DaemonOptions, log: Logger, parts: OrchardParts = {}): Promise<Orchard> {
  const daemon = await Daemon.start(options, log, { timings: parts.timings });
  let serving: Serving | null = null;
  let progress: ReturnType<typeof startProgress> | null = null;
  let api: FastifyInstance | null = null;
  const stop = async () => {
    progress?.stop();
    await api?.close().catch(() => undefined);
    await serving?.close();
    await daemon.stop();
  };
  try {
    if (parts.dashboard !== false) progress = startProgress(daemon);
    if (parts.serving !== false) {
      const backend = daemon.engineBackend ?? (await nodeBackend(backendSettingOf(options)));
      serving = await startServing(daemon, backend, { pullProgress: progress?.board });
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
    api = buildApi({ pod, serving: serving ?? undefined, dashboard: progress ? { daemon, progress: progress.board } : undefined, token: options.apiToken, log });
    await api.listen({ host: options.apiHost, port: options.apiPort });
  } catch (err) {
    await stop();
    throw err;
  }
  const apiPort = (api.server.address() as { port: number }).port;
  log.info({ api: `http://${options.apiHost.includes(':') ? `[${options.apiHost}]` : options.apiHost}:${apiPort}` }, 'api listening');
  return { daemon, serving, api, apiPort, stop };
}
