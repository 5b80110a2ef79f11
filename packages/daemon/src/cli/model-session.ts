/**
 * What `orchard run MODEL` and `orchard chat MODEL` do before the first question: find a daemon (or
 * start one for this session), turn the name into a model the pod can serve — the bundled demo, a short
 * name from the catalog, a local directory, a model in the store, or a hub id pulled now with progress
 * (asking first on a terminal) — and place it on the pod.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync, symlinkSync, readlinkSync, utimesSync } from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { fileURLToPath } from 'node:url';
import { paint } from '../colors.js';
import { cliSettings } from '../config/cli.js';
import { expandShortName } from './catalog.js';
import { CliError } from './errors.js';
import { call, type ClientOptions } from './commands/serve-client.js';
import { pullWithProgress, splitModelRef } from './commands/pull.js';
import { defaultDataDir } from './commands/service.js';
import { ggufIn, ggufModelsIn } from '../models/catalog.js';

const BIN = fileURLToPath(new URL('../../bin/orchard.js', import.meta.url));

export interface SessionOptions extends ClientOptions {
  dataDir?: string;
  /** Pull without asking. */
  yes?: boolean;
  /** Tokens per sequence the instance holds (`--context`); default: the daemon's. */
  context?: number;
}

export interface Session {
  model: string;
  /** Stops the daemon this session started (nothing when one was already running). */
  close(): Promise<void>;
}

async function statusOf(o: ClientOptions): Promise<{ dataDir?: string } | null> {
  try {
    const s = (await (await call(o, 'GET', '/api/status', undefined, 2000)).json()) as { self?: { dataDir?: string } };
    return s.self ?? {};
  } catch (err) {
    if (err instanceof CliError && err.exitCode === 3 && /cannot reach/.test(err.message)) return null;
    throw err;
  }
}

/** A running daemon at `o.url`, or one started now in the background (stopped by `stop`). */
export async function ensureDaemon(o: SessionOptions): Promise<{ dataDir: string; stop(): Promise<void> }> {
  const running = await statusOf(o);
  if (running) return { dataDir: running.dataDir ?? resolve(o.dataDir ?? defaultDataDir()), stop: async () => {} };
  const url = new URL(o.url);
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) throw new CliError(`no daemon answers at ${o.url}; start one there with \`orchard start\``, 3);
  const dataDir = resolve(o.dataDir ?? defaultDataDir());
  const port = url.port || '80';
  process.stderr.write(paint.dim(`no daemon at ${o.url}: starting one for this session (data ${dataDir}, log ${join(dataDir, 'logs', 'orchard.log')})\n`));
  const child: ChildProcess = spawn(process.execPath, [BIN, 'start', '--data-dir', dataDir, '--api-host', url.hostname.replace(/^\[|\]$/g, ''), '--api-port', port, '--log-format', 'none'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr = (stderr + String(d)).slice(-2000)));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const deadline = Date.now() + 120_000;
  // Ready when it answers and knows its own profile (before that, placing a model fails).
  const ready = async () => {
    if (!(await statusOf(o).catch(() => null))) return false;
    const cluster = (await (await call(o, 'GET', '/api/cluster', undefined, 2000)).json().catch(() => ({}))) as { nodes?: unknown[] };
    return (cluster.nodes?.length ?? 0) > 0;
  };
  for (;;) {
    if (child.exitCode !== null) throw new CliError(`the daemon this session started exited (${child.exitCode}): ${stderr.trim().split('\n').pop() ?? ''}`, 1);
    if (await ready().catch(() => false)) break;
    if (Date.now() > deadline) {
      child.kill('SIGTERM');
      throw new CliError(`the daemon this session started did not answer at ${o.url} within 120 s`, 1);
    }
    await new Promise((r) => setTimeout(r, 300));
  }
  return {
    dataDir,
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const a = (await rl.question(`${question} [Y/n] `)).trim().toLowerCase();
    return a === '' || a === 'y' || a === 'yes';
  } finally {
    rl.close();
  }
}

/** A local model directory served as `local/NAME`: a link in the store, so every part of the daemon finds it. */
function linkLocalDir(dir: string, dataDir: string): string {
  const name = basename(dir).replace(/[^\w.-]/g, '_') || 'model';
  const link = join(dataDir, 'models', 'local', name);
  mkdirSync(join(dataDir, 'models', 'local'), { recursive: true });
  if (existsSync(link)) {
    if (resolve(readlinkSync(link)) !== dir) throw new CliError(`${link} already names another model directory (${readlinkSync(link)}); remove it or rename ${dir}`, 2);
  } else symlinkSync(dir, link, 'dir');
  return `local/${name}`;
}

/**
 * A local .gguf file served as `local/NAME`: a directory in the store holding a link to the file (the
 * catalog serves a directory's .gguf like a GGUF repo pulled from the hub).
 */
function linkLocalGguf(file: string, dataDir: string): string {
  const name = basename(file).replace(/\.gguf$/i, '').replace(/[^\w.-]/g, '_') || 'model';
  const dir = join(dataDir, 'models', 'local', name);
  const link = join(dir, basename(file));
  mkdirSync(dir, { recursive: true });
  const others = readdirSync(dir).filter((f) => f !== basename(file));
  if (others.length > 0) throw new CliError(`${dir} already holds another model (${others.join(', ')}); remove it or rename ${file}`, 2);
  if (existsSync(link)) {
    if (resolve(readlinkSync(link)) !== file) throw new CliError(`${link} already names another file (${readlinkSync(link)}); remove it or rename ${file}`, 2);
  } else symlinkSync(file, link, 'file');
  return `local/${name}`;
}

/**
 * Whether the store already holds `repo`'s file of quantisation `quant` (named as the hub names it,
 * e.g. model-Q4_K_M.gguf); when it does, that file is made the newest, which the catalog serves (the
 * last quantisation asked for wins over others pulled into the same directory).
 */
export function useLocalQuant(dataDir: string, repo: string, quant: string): boolean {
  const dir = join(dataDir, 'models', ...repo.split('/'));
  const q = quant.toLowerCase();
  // The quantisation in the file's name, or in its folder's (Q4_K_M/NAME-Q4_K_M-00001-of-00003.gguf).
  const file = ggufModelsIn(dir).find((p) =>
    relative(dir, p)
      .toLowerCase()
      .replace(/\.gguf$/, '')
      .split(/[-./]/)
      .includes(q),
  );
  if (!file) return false;
  const served = ggufIn(dir);
  if (served && served !== file) {
    const at = new Date(Math.max(Date.now(), statSync(served).mtimeMs + 1000));
    utimesSync(file, at, at);
  }
  return true;
}

/** `ref` with a short name expanded; one that cannot name a model is refused before anything starts. */
export function checkModelRef(ref: string): string {
  if (ref === 'orchard-demo' || existsSync(resolve(ref.replace(/^~(?=\/)/, cliSettings().home)))) return ref;
  const full = expandShortName(ref);
  if (!/^[\w.-]+\/[\w.-]+$/.test(splitModelRef(full).repo)) throw new CliError(`"${ref}" is not a model: give a directory, ORG/NAME[:QUANT] from the hub, a name from \`orchard models --available\`, or orchard-demo`, 2);
  return full;
}

/** The model id the pod serves for `ref`, pulling it first when it is a hub id not here yet. */
export async function resolveModel(ref: string, o: SessionOptions, dataDir: string): Promise<string> {
  const served = async () => ((await (await call(o, 'GET', '/v1/models')).json()) as { data: { id: string }[] }).data.map((m) => m.id);
  if (ref === 'orchard-demo') return ref;
  const path = resolve(ref.replace(/^~(?=\/)/, cliSettings().home));
  if (existsSync(path) && statSync(path).isDirectory()) {
    if (!existsSync(join(path, 'config.json'))) throw new CliError(`${path} is not a model directory (no config.json)`, 2);
    return linkLocalDir(path, dataDir);
  }
  if (existsSync(path) && path.toLowerCase().endsWith('.gguf')) return linkLocalGguf(path, dataDir);
  const full = checkModelRef(ref);
  const { repo, quant } = splitModelRef(full);
  // A GGUF repo serves its newest pulled file: a named quantisation not here yet is pulled first.
  if ((await served()).includes(repo) && (!quant || useLocalQuant(dataDir, repo, quant))) return repo;
  if (process.stdin.isTTY && process.stderr.isTTY && !o.yes) {
    if (!(await confirm(`${repo} is not on this machine. Pull it from ${cliSettings().hub.endpoint}?`))) throw new CliError('not pulled', 1);
  }
  await pullWithProgress(full, { dataDir });
  return repo;
}

/** Daemon, model and placement for one run/chat session. */
export async function openSession(ref: string, o: SessionOptions): Promise<Session> {
  checkModelRef(ref);
  const daemon = await ensureDaemon(o);
  try {
    const model = await resolveModel(ref, o, daemon.dataDir);
    process.stderr.write(paint.dim(`placing ${model} on the pod…\n`));
    const res = await call(o, 'POST', '/api/instances', { model, wait: true, ...(o.context ? { context: o.context } : {}) }, 600_000);
    const { instance } = (await res.json()) as { instance: { strategy: string; nodes: string[]; context?: number } };
    const n = new Set(instance.nodes).size;
    process.stderr.write(paint.dim(`${model} is ready (${instance.strategy} on ${n} node${n === 1 ? '' : 's'}${instance.context ? `, context ${instance.context} tokens` : ''})\n`));
    return { model, close: () => daemon.stop() };
  } catch (err) {
    await daemon.stop();
    throw err;
  }
}
