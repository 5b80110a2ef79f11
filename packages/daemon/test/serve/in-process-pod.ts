/**
 * Daemons inside the test process for the serving tests: loopback only, no mDNS (later ones bootstrap
 * to the first), fast heartbeats, the serving routes installed — plus the API, CLI and greedy-text
 * helpers those tests share. (Daemons as separate processes in network namespaces: test/harness.)
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { spawn } from 'node:child_process';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { generate, loadInProcessModel, loadTokenizer } from '@orchard/engine';
import { writeRandomModel, type RandomModelOptions } from '@orchard/engine/testing';
import { startOrchard, type Orchard } from '../../src/orchard.js';
import { resolveOptions } from '../../src/config/options.js';

import { waitFor } from '../../../../test/harness/daemons.js';

export { waitFor };

export interface ServingModel {
  repo: string;
  options: RandomModelOptions;
  write?: (modelDir: string, options: RandomModelOptions) => void;
}

export interface ServingDaemonOptions {
  /** Prefix of the temporary data dir (the caller removes `dataDir`). */
  tmpPrefix: string;
  bootstrap: string[];
  /** A random model written into this daemon's store as `repo` (by `write`, e.g. as a GGUF; default writeRandomModel). */
  model?: ServingModel;
  /** The daemon's logger (default: silent, or SERVE_TEST_LOG's level). */
  log?: pino.Logger;
  /** More `orchard start` flags (camelCase, as resolveOptions takes them), e.g. `{ speculate: 'draft' }`. */
  flags?: Record<string, unknown>;
}

export async function startServingDaemon(o: ServingDaemonOptions): Promise<{ daemon: Orchard; dataDir: string; modelDir?: string }> {
  const dataDir = mkdtempSync(join(os.tmpdir(), o.tmpPrefix));
  let modelDir: string | undefined;
  if (o.model) {
    modelDir = join(dataDir, 'models', ...o.model.repo.split('/'));
    mkdirSync(modelDir, { recursive: true });
    (o.model.write ?? writeRandomModel)(modelDir, o.model.options);
  }
  const options = resolveOptions({ dataDir, listen: ['/ip4/127.0.0.1/tcp/0'], bootstrap: o.bootstrap, apiPort: 0, mdns: false, goneAfter: 3, heartbeatMs: 300, ...o.flags } as never);
  const daemon = await startOrchard(options, o.log ?? pino({ level: process.env.SERVE_TEST_LOG ?? 'silent' }), { dashboard: false });
  return { daemon, dataDir, modelDir };
}

/**
 * Two serving daemons holding the same random model (the second bootstraps to the first), started once
 * both see both nodes with profiles. `stop()` stops them and removes their data dirs.
 */
export async function startServingPair(tmpPrefix: string, model: ServingModel): Promise<{ daemons: Orchard[]; modelDir: string; stop: () => Promise<void> }> {
  const a = await startServingDaemon({ tmpPrefix, bootstrap: [], model });
  const b = await startServingDaemon({ tmpPrefix, bootstrap: [String(a.daemon.daemon.node.getMultiaddrs()[0])], model });
  const daemons = [a.daemon, b.daemon];
  const stop = async () => {
    await Promise.all(daemons.map((d) => d.stop()));
    for (const s of [a, b]) rmSync(s.dataDir, { recursive: true, force: true });
  };
  try {
    await waitFor('both nodes with profiles in both states', () => daemons.every((d) => d.daemon.cluster().nodes.length === 2) || undefined, 30_000, 100);
  } catch (err) {
    await stop();
    throw err;
  }
  return { daemons, modelDir: b.modelDir!, stop };
}

export const api = (d: Orchard, path: string, init?: RequestInit) =>
  fetch(`http://127.0.0.1:${d.apiPort}${path}`, { ...init, headers: init?.body ? { 'content-type': 'application/json' } : {} });

const CLI = join(dirname(fileURLToPath(import.meta.url)), '../../src/cli/main.ts');

/** `orchard <args>` as a child process, optionally fed `stdin`. */
export function runCli(args: string[], stdin?: string): Promise<{ stdout: string; stderr: string; code: number | null }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], { stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    if (stdin !== undefined) child.stdin!.end(stdin);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ stdout, stderr, code }));
  });
}

/** The unsplit model's greedy continuation of `prompt`, computed in this process. */
export async function greedyText(modelDir: string, prompt: string, maxTokens: number): Promise<string> {
  const tok = loadTokenizer(modelDir);
  return (await generate(loadInProcessModel(modelDir), tok.encode(prompt), { maxTokens, tokenizer: tok })).text;
}
