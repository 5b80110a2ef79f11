/**
 * The daemon's HTTP API (fastify). Loopback by default; when a token is configured every route
 * except the liveness probe needs `Authorization: Bearer <token>`. Later work (OpenAI endpoints,
 * dashboard) adds routes to `app` before `listen`.
 */
import { timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { installCors } from '../dialects/cors.js';

export interface ApiSources {
  /** GET /api/cluster: the planner's cluster JSON plus names and mode. */
  cluster(): unknown;
  /** GET /api/status: everything `orchard status` shows. */
  status(): unknown;
  /** POST /api/capability/measure: re-run the micro-benchmark. */
  remeasureCapability(): Promise<unknown>;
  /** Subscribe to state changes (server-sent events); returns an unsubscribe function. */
  onChange(listener: (what: string) => void): () => void;
}

export interface ApiOptions {
  host: string;
  port: number;
  token: string | null;
  logger: Logger;
  /** Extra origins allowed to call the API from a browser ('*': any); see dialects/cors.ts. */
  corsOrigins?: string[];
}

function tokenMatches(header: string | undefined, token: string, apiKey?: string | string[]): boolean {
  // `Authorization: Bearer <token>`, or `x-api-key: <token>` as Anthropic clients send it.
  const given = /^Bearer\s+(.+)$/i.exec(header ?? '')?.[1] ?? (typeof apiKey === 'string' ? apiKey : undefined);
  if (!given) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

export function buildApi(sources: ApiSources, options: Pick<ApiOptions, 'token' | 'logger' | 'corsOrigins'>): FastifyInstance {
  // No fastify request logging (one line per request drowns the daemon log); errors are logged below.
  // forceCloseConnections: open SSE streams must not keep the daemon from stopping.
  const app = Fastify({ logger: false, bodyLimit: 1 << 20, forceCloseConnections: true });
  const { token } = options;
  // Before the token check: preflights carry no token, and a foreign origin is refused outright.
  installCors(app as unknown as FastifyInstance, options.corsOrigins ?? []);
  if (token) {
    app.addHook('onRequest', async (req, reply) => {
      // The liveness probe and routes marked `config: { public: true }` (the dashboard's static page) need no token.
      if (req.url === '/healthz' || (req.routeOptions.config as { public?: boolean } | undefined)?.public === true) return;
      if (!tokenMatches(req.headers.authorization, token, req.headers['x-api-key'])) {
        await reply.code(401).header('www-authenticate', 'Bearer').send({ error: { message: 'missing or wrong API token (Authorization: Bearer <token>)', type: 'unauthorized' } });
      }
    });
  }
  app.get('/healthz', async () => ({ ok: true }));
  app.get('/api/cluster', async () => sources.cluster());
  app.get('/api/status', async () => sources.status());
  app.post('/api/capability/measure', async () => sources.remeasureCapability());
  app.get('/api/events', (req, reply) => {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.write(`event: cluster\ndata: ${JSON.stringify(sources.cluster())}\n\n`);
    const off = sources.onChange((what) => res.write(`event: cluster\ndata: ${JSON.stringify({ change: what, ...(sources.cluster() as object) })}\n\n`));
    const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
    req.raw.on('close', () => {
      clearInterval(keepAlive);
      off();
    });
  });
  app.setNotFoundHandler(async (req, reply) => reply.code(404).send({ error: { message: `no route ${req.method} ${req.url}`, type: 'not_found' } }));
  app.setErrorHandler(async (err, _req, reply) => {
    const status = (err as { statusCode?: number }).statusCode ?? 500;
    if (status >= 500) options.logger.error({ err }, 'api error');
    await reply.code(status).send({ error: { message: status >= 500 ? 'internal error' : (err as Error).message, type: status >= 500 ? 'internal' : 'invalid_request' } });
  });
  return app as unknown as FastifyInstance;
}
