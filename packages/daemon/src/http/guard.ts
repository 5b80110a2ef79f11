/**
 * Keeps web pages from driving the API. A browser page can send requests to 127.0.0.1 (no CORS
 * check happens before a "simple" request is sent), and a page whose DNS name rebinds to 127.0.0.1
 * can even read the answers, since the browser then thinks both are one origin. So, on every route:
 *
 *   - `Host` must name this API: a loopback name or address, the configured API host, and, when the
 *     API listens on every address, this machine's addresses and host name (plus any names added
 *     with --api-allowed-hosts). A rebound page sends its own name: 403.
 *   - `Origin`, when sent, must be one the API allows (dialects/cors.ts: the dashboard's own, local
 *     front ends such as Open WebUI on localhost, --cors-origins); "null" and other sites get 403.
 *     Without an Origin, `Sec-Fetch-Site: cross-site` (an image, script or form load from another
 *     site) gets 403 too, except for a top-level navigation (following a link to the dashboard
 *     shows it to the user only).
 *   - Requests that change state (POST, PUT, PATCH, and DELETE with a body) must be JSON (415
 *     otherwise, even with an empty body): a page cannot send JSON without a CORS preflight, which
 *     only the allowed origins get. So a page from elsewhere can neither read nor change anything.
 *
 * Clients that are not browsers (curl, SDKs, the CLI) send no Origin and pass as before.
 */
import os from 'node:os';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isLoopbackHost } from '../config/addresses.js';
import { originAllowed } from '../dialects/cors.js';

/** Answers a refused request in the error shape of the API its route belongs to. */
export type Refuse = (req: FastifyRequest, reply: FastifyReply, status: number, message: string, code: string, param?: string | null) => FastifyReply;

export interface GuardOptions {
  /** The address the API listens on (`--api-host`). */
  apiHost: string;
  /** More host names clients may use (`--api-allowed-hosts`), e.g. a reverse proxy's. */
  allowedHosts?: readonly string[];
  /** Browser origins allowed besides the dashboard's own and localhost (`--cors-origins`, '*': any). */
  corsOrigins: readonly string[];
  refuse: Refuse;
}

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const WILDCARDS = new Set(['0.0.0.0', '::', '[::]', '']);

/** "Example.COM." -> "example.com"; "[::1]" -> "::1". */
function normalizeHost(name: string): string {
  let h = name.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  return h.endsWith('.') ? h.slice(0, -1) : h;
}

/** The host name of a Host header value ("a.b:52415", "[::1]:52415", "[::1]"), or null if malformed. */
export function hostOfHeader(value: string): string | null {
  const v = value.trim();
  const m = /^\[([0-9a-f:.]+)\](?::(\d{1,5}))?$/i.exec(v) ?? /^([^:[\]\s/@]+)(?::(\d{1,5}))?$/.exec(v);
  return m ? normalizeHost(m[1]) : null;
}

/** Names of this machine, for an API that listens on every address: its addresses and host names. */
function machineNames(): Set<string> {
  const names = new Set<string>();
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) names.add(normalizeHost(a.address.split('%')[0]));
  const host = normalizeHost(os.hostname());
  names.add(host);
  if (!host.includes('.')) names.add(`${host}.local`);
  return names;
}

/** Which Host names this API answers to; interface addresses are re-read every few seconds. */
export function hostAllowList(o: Pick<GuardOptions, 'apiHost' | 'allowedHosts'>): (host: string) => boolean {
  const fixed = new Set((o.allowedHosts ?? []).map(normalizeHost));
  const api = normalizeHost(o.apiHost);
  const wildcard = WILDCARDS.has(api);
  if (!wildcard) fixed.add(api);
  let machine = new Set<string>();
  let readAt = -Infinity;
  return (host) => {
    const h = normalizeHost(host);
    if (isLoopbackHost(h) || fixed.has(h)) return true;
    if (!wildcard) return false;
    if (Date.now() - readAt > 5000) {
      machine = machineNames();
      readAt = Date.now();
    }
    return machine.has(h);
  };
}

function isJson(contentType: string | undefined): boolean {
  return (contentType ?? '').split(';')[0].trim().toLowerCase() === 'application/json';
}

/** A request with a body (a DELETE without one needs no content type). */
function hasBody(req: FastifyRequest): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

export function guardRequests(app: FastifyInstance, o: GuardOptions): void {
  const allowed = hostAllowList(o);
  const refuse = o.refuse;
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    const hostHeader = req.headers.host;
    if (hostHeader !== undefined) {
      const host = hostOfHeader(hostHeader);
      if (!host || !allowed(host)) {
        return refuse(req, reply, 403, `host ${JSON.stringify(hostHeader.slice(0, 100))} is not an address of this API (a page whose name resolves here is refused; add a name with --api-allowed-hosts)`, 'forbidden_host', 'host');
      }
    }
    const origin = req.headers.origin;
    if (origin !== undefined) {
      if (!originAllowed(origin, hostHeader, o.corsOrigins)) {
        return refuse(req, reply, 403, `cross-origin requests from ${origin.slice(0, 100)} are not allowed (allow it with --cors-origins or ORCHARD_CORS_ORIGINS)`, 'forbidden_origin', 'origin');
      }
    } else if (req.headers['sec-fetch-site'] === 'cross-site' && !(req.method === 'GET' && req.headers['sec-fetch-mode'] === 'navigate')) {
      return refuse(req, reply, 403, 'requests from other sites are refused', 'forbidden_origin', 'origin');
    }
    if (!STATE_CHANGING.has(req.method) || (req.method === 'DELETE' && !hasBody(req))) return;
    if (!isJson(req.headers['content-type'])) {
      const got = (req.headers['content-type'] ?? 'none').slice(0, 100);
      return refuse(req, reply, 415, `${req.method} requests must send JSON (content-type: application/json), got ${JSON.stringify(got)}${/urlencoded/.test(got) ? " (with curl: -H 'content-type: application/json')" : ''}`, 'unsupported_media_type', 'content-type');
    }
  });
}
