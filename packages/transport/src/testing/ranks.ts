/**
 * Runs ranks as separate Node processes (through tsx) driven over JSON lines on stdin/stdout:
 * the parent sends `{id, cmd, ...}`, the worker (rank-worker.ts) answers `{id, ok, ...}` or
 * `{id, error}`. Used by the multi-process tests, the namespace test and the benchmark.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createInterface } from 'node:readline';
import { dataPlaneProcessEnv } from '../process-env.js';

export interface RankProcess {
  readonly index: number;
  readonly child: ChildProcess;
  /** Sends a command and waits for its answer (rejects on `{error}`, exit, or timeout). */
  request<T = Record<string, unknown>>(cmd: string, args?: Record<string, unknown>, timeoutMs?: number): Promise<T>;
  /** Everything the worker wrote to stderr so far (for failure messages). */
  stderr(): string;
  kill(signal?: NodeJS.Signals): void;
}

export interface SpawnRanksOptions {
  /** How to start process `i` (e.g. inside a network namespace); default: a plain spawn. */
  spawner?: (i: number, command: string, args: string[]) => ChildProcess;
  env?: NodeJS.ProcessEnv;
}

const workerPath = fileURLToPath(new URL('./rank-worker.ts', import.meta.url));

/** The tsx loader, resolved from this package (hoisted from the workspace root). */
function tsxLoader(): string {
  const require = createRequire(import.meta.url);
  return pathToFileURL(require.resolve('tsx')).href;
}

export function workerCommand(): { command: string; args: string[] } {
  return { command: process.execPath, args: ['--import', tsxLoader(), workerPath] };
}

export async function spawnRanks(count: number, options: SpawnRanksOptions = {}): Promise<RankProcess[]> {
  const { command, args } = workerCommand();
  const procs: RankProcess[] = [];
  for (let i = 0; i < count; i++) {
    const child = options.spawner
      ? options.spawner(i, command, args)
      : spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], env: dataPlaneProcessEnv({ ...process.env, ...options.env }) });
    // Writing to a rank that was just killed fails with EPIPE; the request then fails on exit.
    child.stdin?.on('error', () => {});
    let err = '';
    child.stderr?.on('data', (d) => {
      err = (err + d).slice(-8000);
    });
    const waiting = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
    let nextId = 1;
    let exited: string | null = null;
    const failAll = (why: string) => {
      exited = why;
      for (const w of waiting.values()) {
        clearTimeout(w.timer);
        w.reject(new Error(`rank process ${i} ${why}; stderr: ${err.trim().slice(-2000)}`));
      }
      waiting.clear();
    };
    child.once('exit', (code, sig) => failAll(`exited (${sig ?? code})`));
    child.once('error', (e) => failAll(`failed to start: ${e.message}`));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      let msg: any;
      try {
        msg = JSON.parse(line);
      } catch {
        return; // stray output
      }
      const w = waiting.get(msg.id);
      if (!w) return;
      waiting.delete(msg.id);
      clearTimeout(w.timer);
      if (msg.error) w.reject(Object.assign(new Error(msg.error), { remote: msg }));
      else w.resolve(msg);
    });
    procs.push({
      index: i,
      child,
      stderr: () => err,
      kill: (signal = 'SIGKILL') => child.kill(signal),
      request(cmd, a = {}, timeoutMs = 60_000) {
        if (exited) return Promise.reject(new Error(`rank process ${i} ${exited}`));
        const id = nextId++;
        return new Promise((resolve, reject) => {
          const timer = setTimeout(() => {
            waiting.delete(id);
            reject(new Error(`rank process ${i}: no answer to ${cmd} within ${timeoutMs} ms; stderr: ${err.trim().slice(-2000)}`));
          }, timeoutMs);
          waiting.set(id, { resolve, reject, timer });
          child.stdin!.write(`${JSON.stringify({ id, cmd, ...a })}\n`);
        });
      },
    });
  }
  return procs;
}

/** Kills every process that is still running. */
export function killRanks(procs: RankProcess[]): void {
  for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
}
