/**
 * The daemon's HTTP API (fastify) and the only place routes are registered: one file per group.
 *
 *   cluster.ts    /healthz, /api/cluster, /api/status, /api/events, /api/capability/measure
 *   openai.ts     /v1/models, /v1/chat/completions, /v1/completions
 *   responses.ts  /v1/responses, /v1/models/{id}, /v1/embeddings (501)
 *   anthropic.ts  /v1/messages, /v1/messages/count_tokens
 *   ollama.ts     /api/chat, /api/generate, /api/tags, /api/show, /api/ps, /api/version, /api/pull, /api/embed
 *   instances.ts  /api/plan, /api/instances
 *   models.ts     /api/models/pull
 *   dashboard.ts  the page at / and the views it reads (/api/dashboard/*)
 *   network.ts    /api/network, /api/network/lending (the wide-area network, when joined)
 *
 * Loopback by default; when a token is configured every route except the liveness probe and the
 * dashboard's static page needs `Authorization: Bearer <token>` (or `x-api-key: <token>`, as
 * Anthropic clients send it). Cross-origin requests: dialects/cors.ts, before the token check.
 */
import { timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Daemon } from '../daemon.js';
import type { Serving } from '../serving/serving.js';
import type { ProgressBoard } from '../dashboard/progress.js';
import { clusterRoutes, type PodSource } from './cluster.js';
import { dashboardRoutes } from './dashboard.js';
import { instanceRoutes } from './instances.js';
import { modelRoutes } from './models.js';
import { networkRoutes } from './network.js';
import type { NetworkService } from '../network/service.js';
import { openAiRoutes } from './openai.js';
import { anthropicRoutes } from './anthropic.js';
import { ollamaRoutes } from './ollama.js';
import { responsesRoutes } from './responses.js';
import { installCors } from '../dialects/cors.js';

export interface ApiDeps {
  /** The pod as the control plane sees it. */
  pod: PodSource;
  /** The serving side; absent on a control-plane-only daemon. */
  serving?: Serving;
  /** The dashboard's sources; absent: no dashboard. */
  dashboard?: { daemon: Daemon; progress: ProgressBoard };
  /** The wide-area network this node joined, if any. */
  network?: NetworkService | null;
  token: string | null;
  /** Browser origins allowed besides the dashboard's own and localhost ('*': any). */
  corsOrigins?: string[];
  log: Logger;
}

function tokenMatches(header: string | undefined, token: string, apiKey?: string | string[]): boolean {
  const given = /^Bearer\s+(.+)$/i.exec(header ?? '')?.[1] ?? (typeof apiKey === 'string' ? apiKey : undefined);
  if (!given) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

export function buildApi(deps: ApiDeps): FastifyInstance {
  // No fastify request logging (one line per request drowns the daemon log); errors are logged below.
  // forceCloseConnections: open SSE streams must not keep the daemon from stopping.
  const app = Fastify({ logger: false, bodyLimit: 1 << 20, forceCloseConnections: true });
  const { token } = deps;
  // Before the token check: preflights carry no token, and a foreign origin is refused outright.
  installCors(app as unknown as FastifyInstance, deps.corsOrigins ?? []);
  if (token) {
    app.addHook('onRequest', async (req, reply) => {
      // The liveness probe and routes marked `config: { public: true }` (the dashboard's static page) need no token.
      if (req.url === '/healthz' || (req.routeOptions.config as { public?: boolean } | undefined)?.public === true) return;
      if (!tokenMatches(req.headers.authorization, token, req.headers['x-api-key'])) {
        await reply.code(401).header('www-authenticate', 'Bearer').send({ error: { message: 'missing or wrong API token (Authorization: Bearer <token>)', type: 'unauthorized' } });
      }
    });
  }
  clusterRoutes(app, deps.pod);
  if (deps.serving) {
    openAiRoutes(app, deps.serving, deps.log.child({ part: 'http' }));
    responsesRoutes(app, deps.serving);
    anthropicRoutes(app, deps.serving);
    ollamaRoutes(app, deps.serving);
    instanceRoutes(app, deps.serving);
    modelRoutes(app, deps.serving);
    if (deps.dashboard) dashboardRoutes(app, deps.dashboard.daemon, deps.serving, deps.dashboard.progress);
  }
  networkRoutes(app, deps.network ?? null);
  app.setNotFoundHandler(async (req, reply) => reply.code(404).send({ error: { message: `no route ${req.method} ${req.url}`, type: 'not_found' } }));
  app.setErrorHandler(async (err, _req, reply) => {
    const status = (err as { statusCode?: number }).statusCode ?? 500;
    if (status >= 500) deps.log.error({ err }, 'api error');
    await reply.code(status).send({ error: { message: status >= 500 ? 'internal error' : (err as Error).message, type: status >= 500 ? 'internal' : 'invalid_request' } });
  });
  return app as unknown as FastifyInstance;
}
