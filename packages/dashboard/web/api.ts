/**
 * Talking to the daemon that served this page: same origin, `Authorization: Bearer` when the user
 * gave a token (kept in localStorage), 401 turns into a request for the token.
 */
import { readSse, type SseEvent } from './sse.js';

const TOKEN_KEY = 'orchard.apiToken';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

const authListeners = new Set<() => void>();
export function onUnauthorized(l: () => void): () => void {
  authListeners.add(l);
  return () => authListeners.delete(l);
}

export function getToken(): string | null {
  try {
    return localStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function setToken(token: string | null): void {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

async function errorOf(res: Response): Promise<ApiError> {
  let message = `${res.status} ${res.statusText}`;
  let code: string | null = null;
  try {
    const j = await res.json();
    if (j?.error?.message) message = j.error.message;
    code = j?.error?.code ?? j?.error?.type ?? null;
  } catch {
    /* not JSON: keep the status line */
  }
  return new ApiError(res.status, message, code);
}

export async function request(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const token = getToken();
  if (token) headers.set('authorization', `Bearer ${token}`);
  if (init.body && !headers.has('content-type')) headers.set('content-type', 'application/json');
  let res: Response;
  try {
    res = await fetch(path, { ...init, headers });
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    throw new ApiError(0, `cannot reach the daemon (${(err as Error).message})`);
  }
  if (res.status === 401) {
    for (const l of authListeners) l();
    throw await errorOf(res);
  }
  if (!res.ok) throw await errorOf(res);
  return res;
}

export async function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
  return (await request(path, { signal })).json() as Promise<T>;
}

export async function sendJson<T>(method: string, path: string, body?: unknown): Promise<T | null> {
  const res = await request(path, { method, body: body === undefined ? undefined : JSON.stringify(body) });
  return res.status === 204 ? null : ((await res.json()) as T);
}

/** Streams an SSE endpoint until `signal` aborts or the server ends it. */
export async function streamSse(path: string, init: RequestInit, onEvent: (e: SseEvent) => void): Promise<void> {
  const res = await request(path, init);
  if (!res.body) throw new ApiError(0, 'the daemon sent no stream');
  await readSse(res.body, onEvent);
}
