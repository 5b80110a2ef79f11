/** HTTP calls of the serving commands (`orchard chat/load/unload/models`) against a daemon. */
import { cliSettings } from '../../config/cli.js';
import { CliError } from '../errors.js';

export interface ClientOptions {
  url: string;
  token?: string;
}

function headers(o: ClientOptions, json: boolean): Record<string, string> {
  const token = o.token ?? cliSettings().apiToken;
  return { ...(json ? { 'content-type': 'application/json' } : {}), ...(token ? { authorization: `Bearer ${token}` } : {}) };
}

/** fetch with one-line errors: unreachable daemon, missing token, and the API's own error message. */
export async function call(o: ClientOptions, method: string, path: string, body?: unknown, timeoutMs = 180_000): Promise<Response> {
  let url: URL;
  try {
    url = new URL(path, o.url);
  } catch {
    throw new CliError(`--url ${o.url} is not a URL`, 2);
  }
  let res: Response;
  try {
    res = await fetch(url, { method, headers: headers(o, body !== undefined), body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    if (e.name === 'TimeoutError') throw new CliError(`no answer from the daemon at ${o.url} within ${timeoutMs / 1000} s`, 3);
    throw new CliError(`cannot reach the daemon at ${o.url} (${e.cause?.code ?? e.message}); start it with \`orchard start\``, 3);
  }
  if (res.status === 401) throw new CliError(`the daemon at ${o.url} needs an API token: pass --token or set ORCHARD_API_TOKEN`, 3);
  if (!res.ok) {
    const text = await res.text();
    let message = text;
    try {
      message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? text;
    } catch {
      /* not JSON */
    }
    throw new CliError(`${method} ${url.pathname}: ${res.status} ${message}`, res.status === 404 ? 4 : 1);
  }
  return res;
}

/** Reads an SSE body and yields each `data:` payload. */
export async function* sseData(res: Response): AsyncGenerator<string> {
  const dec = new TextDecoder();
  let buf = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += dec.decode(chunk, { stream: true });
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of event.split('\n')) if (line.startsWith('data: ')) yield line.slice(6);
    }
  }
}
