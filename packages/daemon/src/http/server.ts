/**
 * The daemon's HTTP API (fastify) and the only place routes are registered: one file per group.
 *
 *   cluster.ts    /healthz, /api/cluster, /api/status, /api/events, /api/capability/measure
 *   openai.ts     /v1/models, /v1/chat/completions, /v1/completions, /apply-template
 *   responses.ts  /v1/responses, /v1/models/{id}, /v1/embeddings
 *   anthropic.ts  /v1/messages, /v1/messages/count_tokens
 *   ollama.ts     /api/chat, /api/generate, /api/tags, /api/show, /api/ps, /api/version, /api/pull, /api/embed
 *   instances.ts  /api/plan, /api/instances
 *   models.ts     /api/models/pull
 *   dashboard.ts  the page at / and the views it reads (/api/dashboard/*)
 *   network.ts    /api/network, /api/network/lending (the wide-area network, when joined)
 *
 * Loopback by default; when a token is configured every route except the liveness probe and the
 * dashboard's static page needs `Authorization: Bearer <token>` (or `x-api-key: <token>`, as
 * Anthropic clients send it). Before that, on every route, guard.ts refuses what web pages could
 * send (a foreign Host, an origin the API does not allow, cross-site fetches, state-changing
 * requests that are not JSON); dialects/cors.ts answers the allowed origins' preflights. Every
 * error, Fastify's and Node's HTTP parser's included, has one shape per API: Anthropic's on its
 * routes, Ollama's on its routes, OpenAI's {"error":{"message","type","param","code"}} everywhere
 * else. A request must arrive whole within REQUEST_TIMEOUT_MS (a body shorter than its
 * Content-Length does not hold the connection).
 */
import { timingSafeEqual } from 'node:crypto';
import type { Socket } from 'node:net';
import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Serving } from '../serving/serving.js';
import { clusterRoutes, type PodSource } from './cluster.js';
import { dashboardRoutes, type DashboardSources } from './dashboard.js';
import { ErrorShapes, errorBody } from './errors.js';
import { guardRequests, type Refuse } from './guard.js';
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
  dashboard?: DashboardSources;
  /** The wide-area network this node joined, if any. */
  network?: NetworkService | null;
  token: string | null;
  /** Browser origins allowed besides the dashboard's own and localhost ('*': any). */
  corsOrigins?: string[];
  log: Logger;
  /** The address the API listens on: its name is an allowed Host. @default 127.0.0.1 */
  apiHost?: string;
  /** More Host names clients may use (--api-allowed-host). */
  allowedHosts?: readonly string[];
  /** Tests shorten these. */
  timeouts?: { requestMs?: number; headersMs?: number; checkEveryMs?: number };
}

/** A request (head and body) must arrive within this; a stalled or short body gets 408 and the connection closes. */
export const REQUEST_TIMEOUT_MS = 10_000;
const HEADERS_TIMEOUT_MS = 5000;

/** Fastify's own error codes as ours (the rest keep a lower-cased form of theirs). */
const FASTIFY_CODES: Record<string, string> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_BODY_TOO_LARGE: 'body_too_large',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'invalid_content_length',
  FST_ERR_CTP_INVALID_TYPE: 'invalid_content_type',
  FST_ERR_CTP_EMPTY_TYPE: 'invalid_content_type',
};

/** Errors of Node's HTTP parser (before any route): status and code. */
function clientErrorOf(err: NodeJS.ErrnoException): { status: number; message: string; code: string } {
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return { status: 408, message: `the request did not arrive whole within ${REQUEST_TIMEOUT_MS / 1000} s`, code: 'request_timeout' };
  if (err.code === 'HPE_HEADER_OVERFLOW') return { status: 431, message: 'the request headers are too large', code: 'headers_too_large' };
  if (err.code === 'HPE_CONTENT_LENGTH_MISMATCH' || err.code === 'HPE_UNEXPECTED_CONTENT_LENGTH') return { status: 400, message: 'invalid Content-Length (more than one, or not a length)', code: 'invalid_content_length' };
  return { status: 400, message: 'malformed HTTP request', code: 'malformed_request' };
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
  const t = deps.timeouts ?? {};
  // Which routes answer in a dialect's error shape (filled as the dialects register their routes).
  const shapes = new ErrorShapes();
  const app = Fastify({
    logger: false,
    bodyLimit: 1 << 20,
    forceCloseConnections: true,
    requestTimeout: t.requestMs ?? REQUEST_TIMEOUT_MS,
    // Node checks those timeouts every connectionsCheckingInterval (30 s by default): often enough that a stalled request is cut near its deadline.
    http: { headersTimeout: t.headersMs ?? HEADERS_TIMEOUT_MS, connectionsCheckingInterval: t.checkEveryMs ?? 1000 },
    // A URL that does not decode (FST_ERR_BAD_URL) and the like, before any route.
    frameworkErrors: (err, req, reply) => shapes.send(req, reply, 400, err.message, err.code === 'FST_ERR_BAD_URL' ? 'bad_url' : 'invalid_request'),
    clientErrorHandler: (err: NodeJS.ErrnoException, socket: Socket) => {
      if (err.code === 'ECONNRESET' || socket.destroyed) return;
      const e = clientErrorOf(err);
      const body = JSON.stringify(errorBody(e.status, e.message, e.code));
      if (socket.writable) {
        socket.write(`HTTP/1.1 ${e.status} ${e.status === 408 ? 'Request Timeout' : e.status === 431 ? 'Request Header Fields Too Large' : 'Bad Request'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      }
      socket.destroy();
    },
  });
  const { token } = deps;
  shapes.attach(app as unknown as FastifyInstance);
  const fail: Refuse = (req, reply, status, message, code, param) => shapes.send(req, reply, status, message, code, param);
  guardRequests(app, { apiHost: deps.apiHost ?? '127.0.0.1', allowedHosts: deps.allowedHosts, corsOrigins: deps.corsOrigins ?? [], refuse: fail });
  // After the guard (which refuses origins the API does not allow): headers and preflights for the allowed ones.
  installCors(app as unknown as FastifyInstance, deps.corsOrigins ?? []);
  if (token) {
    app.addHook('onRequest', async (req, reply) => {
      // The liveness probe and routes marked `config: { public: true }` (the dashboard's static page) need no token.
      if (req.url === '/healthz' || (req.routeOptions.config as { public?: boolean } | undefined)?.public === true) return;
      if (!tokenMatches(req.headers.authorization, token, req.headers['x-api-key'])) {
        reply.header('www-authenticate', 'Bearer');
        return fail(req, reply, 401, 'missing or wrong API token (Authorization: Bearer <token>)', 'invalid_api_key');
      }
    });
  }
  clusterRoutes(app, deps.pod);
  if (deps.serving) {
    const requestLog = deps.log.child({ part: 'http' });
    openAiRoutes(app, deps.serving, requestLog);
    responsesRoutes(app, deps.serving, requestLog);
    shapes.registering('anthropic', () => anthropicRoutes(app, deps.serving!, requestLog));
    shapes.registering('ollama', () => ollamaRoutes(app, deps.serving!, requestLog));
    instanceRoutes(app, deps.serving);
    modelRoutes(app, deps.serving);
    if (deps.dashboard) dashboardRoutes(app, deps.dashboard, deps.serving);
  }
  networkRoutes(app, deps.network ?? null);
  app.setNotFoundHandler(async (req, reply) => fail(req, reply, 404, `no route ${req.method} ${req.url.slice(0, 200)}`, 'not_found'));
  app.setErrorHandler(async (err: FastifyError, req, reply) => {
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
    if (status >= 500) {
      deps.log.error({ err }, 'api error');
      return fail(req, reply, 500, 'internal error', 'internal_error');
    }
    const code = (err.code && FASTIFY_CODES[err.code]) ?? (err.code ? err.code.replace(/^FST_ERR_/, '').toLowerCase() : 'invalid_request');
    return fail(req, reply, status, err.message, code);
  });
  return app as unknown as FastifyInstance;
}
