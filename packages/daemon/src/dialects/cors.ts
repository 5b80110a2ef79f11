/**
 * Cross-origin requests. Browsers send `Origin` with cross-site requests; the API answers only the
 * origins it allows: the dashboard's own (same host and port as the API), localhost front ends
 * (http(s)://localhost, 127.x, [::1], any port), and those listed in --cors-origins ('*' for any).
 * A request from any other origin is refused with 403 before it runs (http/guard.ts, which uses
 * originAllowed) — a web page the user happens to visit cannot drive the pod. Preflights (OPTIONS)
 * are answered here, before the token check (they carry no token); the request that follows still
 * needs the token when the API has one.
 */
import type { FastifyInstance } from 'fastify';

const LOCAL_HOST = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\])$/;

/** Headers clients send that a preflight must allow (SDKs add their own x-stainless-* and version headers). */
const DEFAULT_ALLOWED_HEADERS = 'authorization, content-type, x-api-key, anthropic-version, anthropic-beta, openai-organization, openai-project';

export function originAllowed(origin: string, host: string | undefined, allowed: readonly string[]): boolean {
  if (allowed.includes('*') || allowed.includes(origin)) return true;
  let u: URL;
  try {
    u = new URL(origin);
  } catch {
    return false;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return false;
  if (host && u.host === host) return true;
  return LOCAL_HOST.test(u.hostname);
}

export function installCors(app: FastifyInstance, allowed: readonly string[]): void {
  app.addHook('onRequest', async (req, reply) => {
    const origin = req.headers.origin;
    if (!origin) return;
    // Origins not allowed were refused before this hook (http/guard.ts); nothing is granted to them.
    if (!originAllowed(origin, req.headers.host, allowed)) return;
    reply.header('access-control-allow-origin', origin);
    reply.header('vary', 'Origin');
    if (req.method === 'OPTIONS' && req.headers['access-control-request-method']) {
      const asked = req.headers['access-control-request-headers'];
      await reply
        .code(204)
        .header('access-control-allow-methods', 'GET, POST, DELETE, OPTIONS')
        .header('access-control-allow-headers', typeof asked === 'string' && asked ? asked : DEFAULT_ALLOWED_HEADERS)
        .header('access-control-max-age', '600')
        .send();
    }
  });
}
