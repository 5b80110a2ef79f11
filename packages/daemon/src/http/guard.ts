/**
 * Keeps web pages from driving the API. A browser page can send requests to 127.0.0.1 (no CORS
 * check happens before a "simple" request is sent), and a page whose DNS name rebinds to 127.0.0.1
 * can even read the answers, since the browser then thinks both are one origin. So, on every route:
 *
 *   - `Host` must name this API: a loopback name or address, the configured API host, and, when the
 *     API listens on every address, this machine's addresses and host name (plus any names added
 *     with --api-allowed-host). A rebound page sends its own name: 403.
 *   - `Origin`, when sent, must be an http(s) origin on an allowed host; "null" and foreign sites
 *     get 403. `Sec-Fetch-Site: cross-site` (a fetch or form from another site) gets 403 too, except
 *     for a top-level navigation (following a link to the dashboard shows it to the user only).
 *   - Requests that change state (POST, PUT, PATCH, DELETE) must be JSON (415 otherwise, even with
 *     an empty body), which a page cannot send without a CORS preflight, which this API never
 *     grants; and one from another origin (an allowed host on another port, say) needs the token,
 *     so without a token it gets 403. The dashboard is served from the API's own origin.
 *
 * Clients that are not browsers (curl, SDKs, the CLI) send no Origin and pass as before.
 */
import os from 'node:os';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isLoopbackHost } from '../config/addresses.js';
import { sendError } from './errors.js';

export interface GuardOptions {
  /** The address the API listens on (`--api-host`). */
  apiHost: string;
  /** More host names clients may use (`--api-allowed-host`), e.g. a reverse proxy's. */
  allowedHosts?: readonly string[];
  /** Whether a token is configured (then the token hook decides about cross-origin requests). */
  hasToken: boolean;
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

function hasBody(req: FastifyRequest): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

export function guardRequests(app: FastifyInstance, o: GuardOptions): void {
  const allowed = hostAllowList(o);
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    const hostHeader = req.headers.host;
    if (hostHeader !== undefined) {
      const host = hostOfHeader(hostHeader);
      if (!host || !allowed(host)) {
        return sendError(reply, 403, `host ${JSON.stringify(hostHeader.slice(0, 100))} is not an address of this API (a page whose name resolves here is refused; add a name with --api-allowed-host)`, 'forbidden_host', 'host');
      }
    }
    const origin = req.headers.origin;
    let sameOrigin = origin === undefined;
    if (origin !== undefined) {
      let url: URL | null = null;
      try {
        url = new URL(origin);
      } catch {
        /* "null" (sandboxed frames, files) and garbage */
      }
      if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || !allowed(url.hostname)) {
        return sendError(reply, 403, `requests from origin ${JSON.stringify(origin.slice(0, 100))} are refused: this API serves its own dashboard only`, 'forbidden_origin', 'origin');
      }
      sameOrigin = hostHeader !== undefined && url.host.toLowerCase() === hostHeader.trim().toLowerCase();
    }
    const fetchSite = req.headers['sec-fetch-site'];
    if (fetchSite === 'cross-site' && !(req.method === 'GET' && req.headers['sec-fetch-mode'] === 'navigate')) {
      return sendError(reply, 403, 'requests from other sites are refused', 'forbidden_origin', 'origin');
    }
    if (!STATE_CHANGING.has(req.method)) return;
    if ((req.method !== 'DELETE' || hasBody(req)) && !isJson(req.headers['content-type'])) {
      return sendError(reply, 415, `${req.method} requests must send JSON (content-type: application/json), got ${JSON.stringify((req.headers['content-type'] ?? 'none').slice(0, 100))}`, 'unsupported_media_type', 'content-type');
    }
    if (!sameOrigin && !o.hasToken) {
      return sendError(reply, 403, `origin ${JSON.stringify(origin!.slice(0, 100))} may not change this pod (only the dashboard's own origin may, or a client with the API token)`, 'forbidden_origin', 'origin');
    }
  });
}
