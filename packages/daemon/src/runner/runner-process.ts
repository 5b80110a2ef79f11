/**
 * The daemon's handle on one runner process: spawns it (node + tsx, IPC channel), relays its
 * lifecycle and runs requests on it as token streams. A runner that exits or reports itself dead
 * fails its pending requests at once with the reason.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { TokenLogprob } from '@orchard/engine';
import type { FromRunner, RunnerInit, RunnerLink, ToRunner } from './protocol.js';
import type { GenerateOutcome, GenerateRequest } from './requests.js';
import { dataPlaneProcessEnv, type TcpPeer } from './transport.js';
import { withTimeout } from './with-timeout.js';

const RUNNER_MAIN = join(dirname(fileURLToPath(import.meta.url)), 'runner-main.ts');

export function tsxLoader(): string {
  const pkg = createRequire(import.meta.url).resolve('tsx/package.json');
  return pathToFileURL(join(dirname(pkg), 'dist/loader.mjs')).href;
}

/** The runner refused a request for what it asked (e.g. a JSON schema it cannot compile), not for a fault of its own. */
export class InvalidRequestError extends Error {
  override name = 'InvalidRequestError';
}

export interface RunnerEvents {
  onListening?: (port: number) => void;
  onReady?: () => void;
  onDead?: (message: string) => void;
}

/** The runner could not load its model; `files`: the model's files are at fault, not this machine. */
export class RunnerLoadError extends Error {
  override name = 'RunnerLoadError';
  constructor(
    message: string,
    readonly files: boolean,
  ) {
    super(message);
  }
}

interface Pending {
  onToken: (id: number, logprob?: TokenLogprob) => void;
  resolve: (o: GenerateOutcome) => void;
  reject: (e: Error) => void;
}

export class RunnerProcess {
  readonly child: ChildProcess;
  readonly init: RunnerInit;
  #pending = new Map<number, Pending>();
  #nextId = 1;
  #dead: string | null = null;
  #loadFailure: RunnerLoadError | null = null;
  #ready = false;
  #port: Promise<number>;
  #backend: string | null = null;
  #links: RunnerLink[] = [];
  #dataPlane: string | null = null;
  #readyP: Promise<void>;

  // The environment is handed on to the runner process, not read: its settings travel in `init`
  // (config/options.ts); the variables pass through for what the child's own libraries read
  // (PATH, HOME, the GPU drivers' and Node's variables). An allowed process.env use (test/config/env-readers.test.ts).
  constructor(init: RunnerInit, events: RunnerEvents = {}, env: NodeJS.ProcessEnv = process.env) {
    this.init = init;
    this.child = spawn(process.execPath, ['--import', tsxLoader(), RUNNER_MAIN], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env: dataPlaneProcessEnv(env) });
    let portResolve!: (p: number) => void;
    let readyResolve!: () => void;
    let readyReject!: (e: Error) => void;
    this.#port = new Promise((res) => (portResolve = res));
    this.#readyP = new Promise((res, rej) => {
      readyResolve = res;
      readyReject = rej;
    });
    this.#readyP.catch(() => undefined);
    const fail = (message: string, loadFailure?: RunnerLoadError) => {
      if (this.#dead) return;
      this.#dead = message;
      this.#loadFailure = loadFailure ?? null;
      readyReject(loadFailure ?? new Error(message));
      for (const p of this.#pending.values()) p.reject(new Error(message));
      this.#pending.clear();
      events.onDead?.(message);
    };
    this.child.on('message', (raw) => {
      const m = raw as FromRunner;
      switch (m.type) {
        case 'listening':
          portResolve(m.port);
          events.onListening?.(m.port);
          return;
        case 'loaded':
          this.#backend = m.backend ?? null;
          return;
        case 'ready':
          this.#links = m.links ?? [];
          this.#dataPlane = m.dataPlane ?? null;
          this.#ready = true;
          readyResolve();
          events.onReady?.();
          return;
        case 'token':
          this.#pending.get(m.id)?.onToken(m.token, m.logprob);
          return;
        case 'tokens':
          for (const t of m.tokens) this.#pending.get(t.id)?.onToken(t.token, t.logprob);
          return;
        case 'done': {
          const p = this.#pending.get(m.id);
          this.#pending.delete(m.id);
          p?.resolve(m.outcome);
          return;
        }
        case 'failed': {
          const p = this.#pending.get(m.id);
          this.#pending.delete(m.id);
          p?.reject(m.invalid ? new InvalidRequestError(m.message) : new Error(m.message));
          return;
        }
        case 'dead':
          fail(m.message);
          return;
        case 'load-failed':
          fail(m.message, new RunnerLoadError(m.message, m.files));
          return;
      }
    });
    this.child.on('exit', (code, signal) => fail(`runner rank ${init.rank} exited (${signal ?? `code ${code}`})`));
    this.child.on('error', (err) => fail(`runner rank ${init.rank} failed to start: ${err.message}`));
    this.#send({ type: 'init', init });
  }

  get ready(): boolean {
    return this.#ready && !this.#dead;
  }

  /** What the rank computes on, once loaded (see FromRunner 'loaded'). */
  get backend(): string | null {
    return this.#backend;
  }

  /** This rank's links to its peers (RDMA or TCP, with the reason), once ready. */
  get links(): RunnerLink[] {
    return this.#links;
  }

  /** One line about the data plane, once ready (e.g. "all links TCP (no RDMA devices)"). */
  get dataPlane(): string | null {
    return this.#dataPlane;
  }

  get dead(): string | null {
    return this.#dead;
  }

  /** Why the runner could not load its model, when that is how it ended. */
  get loadFailure(): RunnerLoadError | null {
    return this.#loadFailure;
  }

  /** The bound data-plane port (rejects never; await with a timeout). */
  port(): Promise<number> {
    return this.#port;
  }

  whenReady(): Promise<void> {
    return this.#readyP;
  }

  #send(m: ToRunner): void {
    if (this.child.connected) this.child.send(m);
  }

  connect(peers: TcpPeer[]): void {
    this.#send({ type: 'peers', peers });
  }

  /** Runs one request on the driver rank; `onToken` sees ids as they are sampled. */
  generate(req: GenerateRequest, onToken: (id: number, logprob?: TokenLogprob) => void, signal?: AbortSignal): Promise<GenerateOutcome> {
    if (this.#dead) return Promise.reject(new Error(this.#dead));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { onToken, resolve, reject });
      const abort = () => this.#send({ type: 'cancel', id });
      if (signal) {
        if (signal.aborted) abort();
        else signal.addEventListener('abort', abort, { once: true });
      }
      this.#send({ type: 'generate', id, req });
    });
  }

  /** Asks the runner to stop; kills it if it has not exited after `graceMs`. */
  async stop(graceMs = 2000): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((res) => this.child.once('exit', () => res()));
    this.#send({ type: 'shutdown' });
    const t = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(t);
  }
}

/**
 * Starts all ranks of an instance on this machine (loopback data plane): for the benchmark and
 * tests. Resolves once every rank is ready; rank 0's handle drives requests.
 */
export async function startLocalInstance(base: Omit<RunnerInit, 'rank'>, env?: NodeJS.ProcessEnv): Promise<RunnerProcess[]> {
  const size = base.layout.stages.length * base.layout.tensor;
  const runners = Array.from({ length: size }, (_, rank) => new RunnerProcess({ ...base, rank }, {}, env));
  try {
    const ports = await Promise.all(runners.map((r) => withTimeout(r.port(), 60_000, 'runner did not bind its port')));
    const peers = ports.map((port) => ({ addresses: [{ host: '127.0.0.1', port }] }));
    for (const r of runners) r.connect(peers);
    await Promise.all(runners.map((r) => withTimeout(r.whenReady(), 120_000, 'runner did not become ready')));
    return runners;
  } catch (err) {
    await Promise.all(runners.map((r) => r.stop(500)));
    throw err;
  }
}
