/**
 * Orchard daemons as separate processes inside the hosts of a namespace net (netns.ts).
 *
 * Each daemon is `node --import tsx packages/daemon/src/cli/main.ts start ...` (one process, so a
 * SIGKILL really kills the daemon), with its own data dir and its log in `<dataDir>/daemon.log`.
 * The API stays on the namespace's 127.0.0.1:52415 (the default), so tests reach it with curl run
 * inside the namespace. Processes die with the net (`TestNet.destroy()`).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestHost } from './netns.js';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = join(REPO_ROOT, 'packages/daemon/src/cli/main.ts');

export interface TestDaemon {
  host: TestHost;
  dataDir: string;
  logFile: string;
  child: ChildProcess;
  apiPort: number;
  /** GET a JSON API path from inside the namespace; throws if the daemon does not answer. */
  get<T = any>(path: string): T;
  /** Like get, but undefined when the daemon does not answer (yet). */
  tryGet<T = any>(path: string): T | undefined;
  log(): string;
  kill(signal?: NodeJS.Signals): void;
  exited(): boolean;
}

export interface StartDaemonOptions {
  args?: string[];
  dataDir?: string;
  apiPort?: number;
  env?: Record<string, string>;
}

export function startDaemon(host: TestHost, options: StartDaemonOptions = {}): TestDaemon {
  const dataDir = options.dataDir ?? mkdtempSync(join(os.tmpdir(), `orchard-${host.ns}-`));
  const apiPort = options.apiPort ?? 52415;
  const logFile = join(dataDir, 'daemon.log');
  const out = openSync(logFile, 'a');
  const child = host.spawn(
    process.execPath,
    ['--import', 'tsx', CLI, 'start', '--data-dir', dataDir, '--api-port', String(apiPort), ...(options.args ?? [])],
    { cwd: REPO_ROOT, stdio: ['ignore', out, out], env: { ...process.env, ORCHARD_LOG_LEVEL: 'debug', ...options.env } },
  );
  const get = (path: string) => JSON.parse(host.exec('curl', ['-sf', '-m', '3', `http://127.0.0.1:${apiPort}${path}`]));
  return {
    host,
    dataDir,
    logFile,
    child,
    apiPort,
    get,
    tryGet(path) {
      try {
        return get(path);
      } catch {
        return undefined;
      }
    },
    log: () => readFileSync(logFile, 'utf8'),
    kill(signal = 'SIGKILL') {
      child.kill(signal);
    },
    exited: () => child.exitCode !== null || child.signalCode !== null,
  };
}

export interface LoopbackDaemon {
  child: ChildProcess;
  apiPort: number;
  /** http://127.0.0.1:<apiPort> */
  base: string;
  logFile: string;
}

/**
 * `orchard start` as a process on this machine's loopback (no namespace, no mDNS), on a free API port,
 * its output in <dataDir>/daemon.log; resolves once /healthz answers. The caller kills it.
 */
export async function startLoopbackDaemon(dataDir: string, options: { args?: string[]; env?: Record<string, string> } = {}): Promise<LoopbackDaemon> {
  const apiPort = await freePort();
  const logFile = join(dataDir, 'daemon.log');
  const out = openSync(logFile, 'a');
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', CLI, 'start', '--data-dir', dataDir, '--api-port', String(apiPort), '--listen', '/ip4/127.0.0.1/tcp/0', '--no-mdns', ...(options.args ?? [])],
    { cwd: REPO_ROOT, stdio: ['ignore', out, out], env: { ...process.env, ...options.env } },
  );
  const base = `http://127.0.0.1:${apiPort}`;
  await waitFor('the daemon to answer /healthz', async () => (await fetch(`${base}/healthz`).catch(() => null))?.ok, 60_000);
  return { child, apiPort, base, logFile };
}

/** The 'model fetched' log records of a daemon for `repo` (pino JSON lines). */
export function fetchedRecords(d: TestDaemon, repo: string): Array<{ hubBytes: number; peerBytes: number; holders: string[] }> {
  return d
    .log()
    .split('\n')
    .flatMap((l) => {
      try {
        const r = JSON.parse(l);
        return r.msg === 'model fetched' && r.repo === repo ? [r] : [];
      } catch {
        return [];
      }
    });
}

/** `orchard run` on a model directory in this process: the single-process greedy reference text. */
export function orchardRunOn(dir: string, prompt: string, maxTokens: number): string {
  const out = execFileSync(process.execPath, ['--import', 'tsx', CLI, 'run', '--model', dir, '--prompt', prompt, '--temperature', '0', '--max-tokens', String(maxTokens), '--backend', 'wasm', '--threads', '1'], { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return out.endsWith('\n') ? out.slice(0, -1) : out;
}

/** Polls `check` until it returns a truthy value or the deadline passes; the error names `what`. */
export async function waitFor<T>(
  what: string,
  check: () => T | undefined | false | null | Promise<T | undefined | false | null>,
  timeoutMs: number,
  intervalMs = 500,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** A TCP port on 127.0.0.1 that was free a moment ago (for a daemon process's --api-port). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}
