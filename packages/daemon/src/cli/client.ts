/** Talks to the local daemon's HTTP API for `orchard status` / `orchard cluster`. */
import { cliSettings } from '../config/cli.js';
import { CliError } from './errors.js';

export async function getJson(base: string, path: string, opts: { token?: string; timeoutMs?: number } = {}): Promise<unknown> {
  let url: URL;
  try {
    url = new URL(path, base);
  } catch {
    throw new CliError(`--url ${base} is not a URL`, 2);
  }
  const token = opts.token ?? cliSettings().apiToken;
  let res: Response;
  try {
    res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(opts.timeoutMs ?? 5000) });
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    if (e.name === 'TimeoutError') throw new CliError(`no answer from the daemon at ${base} within ${opts.timeoutMs ?? 5000} ms`, 3);
    throw new CliError(`cannot reach the daemon at ${base} (${e.cause?.code ?? e.message}); start it with \`orchard start\``, 3);
  }
  if (res.status === 401) throw new CliError(`the daemon at ${base} needs an API token: pass --token or set ORCHARD_API_TOKEN`, 3);
  if (!res.ok) throw new CliError(`daemon at ${base} answered ${res.status} for ${url.pathname}`, 3);
  return res.json();
}
