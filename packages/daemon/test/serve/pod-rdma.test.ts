/**
 * Two daemons in this process whose runners use the test-only simulated RDMA verbs (ORCHARD_RDMA_SIM, set
 * in this worker's environment, which the runner processes inherit): a tensor-parallel instance across the
 * two serves the unsplit model's text over an RDMA link, and both daemons' /api/instances and
 * `orchard status` show the link's choice (one end from the local runner, the other from gossip).
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { spawn } from 'node:child_process';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel, loadTokenizer } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { Daemon } from '../../src/daemon.js';
import { resolveOptions } from '../../src/config/options.js';
import { installServing } from '../../src/instances/install.js';
import { RDMA_SIM_ENV } from '../../src/runner/rdma-select.js';

const MODEL = 'test/rand-rdma';
const dirs: string[] = [];
let daemons: Daemon[] = [];
let modelDir: string;
const savedSim = process.env[RDMA_SIM_ENV];

async function startDaemon(bootstrap: string[]): Promise<Daemon> {
  const dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-pod-rdma-'));
  dirs.push(dataDir);
  const mdir = join(dataDir, 'models', ...MODEL.split('/'));
  mkdirSync(mdir, { recursive: true });
  writeRandomModel(mdir, { numLayers: 2, hiddenSize: 64, seed: 9, maxPositionEmbeddings: 256 });
  modelDir = mdir;
  const options = resolveOptions({ dataDir, listen: ['/ip4/127.0.0.1/tcp/0'], bootstrap, apiPort: 0, mdns: false, goneAfter: 3, heartbeatMs: 300 } as never);
  return Daemon.start(options, pino({ level: 'silent' }), { routes: async (app, d) => void (await installServing(app, d)) });
}

async function waitFor<T>(what: string, f: () => Promise<T | undefined> | T | undefined, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const api = (d: Daemon, path: string, init?: RequestInit) =>
  fetch(`http://127.0.0.1:${d.apiPort}${path}`, { ...init, headers: init?.body ? { 'content-type': 'application/json' } : {} });

const CLI = join(dirname(fileURLToPath(import.meta.url)), '../../src/cli/main.ts');
function runCli(args: string[]): Promise<{ stdout: string; stderr: string; code: number | null }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ stdout, stderr, code }));
  });
}

beforeAll(async () => {
  process.env[RDMA_SIM_ENV] = '1';
  const a = await startDaemon([]);
  const b = await startDaemon([String(a.node.getMultiaddrs()[0])]);
  daemons = [a, b];
  await waitFor('both nodes with profiles in both states', () => daemons.every((d) => d.cluster().nodes.length === 2) || undefined, 30_000);
}, 60_000);

afterAll(async () => {
  await Promise.all(daemons.map((d) => d.stop()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  if (savedSim === undefined) delete process.env[RDMA_SIM_ENV];
  else process.env[RDMA_SIM_ENV] = savedSim;
});

describe('a 2-daemon pod whose runners connect over (simulated) RDMA', () => {
  it('tensor parallel over 2 nodes: unsplit text; each link end in /api/instances of both daemons and in orchard status', async () => {
    const placed = await api(daemons[0]!, '/api/instances', { method: 'POST', body: JSON.stringify({ model: MODEL, strategy: 'tensor', nodes: 2 }) });
    const body = (await placed.json()) as any;
    expect(placed.status, JSON.stringify(body)).toBe(201);
    const id = body.instance.id as string;
    const linksOn = async (d: Daemon) => ((await (await api(d, '/api/instances')).json()) as any).instances.find((i: any) => i.id === id)?.links ?? [];
    for (const d of daemons) {
      const links = await waitFor('both ends of the link reported', async () => ((await linksOn(d)).length === 2 ? linksOn(d) : undefined), 20_000);
      expect(links).toEqual([
        { rank: 0, peer: 1, transport: 'rdma', reason: 'rdma_sim1' },
        { rank: 1, peer: 0, transport: 'rdma', reason: 'rdma_sim0' },
      ]);
    }
    const tok = loadTokenizer(modelDir);
    const want = (await generate(loadInProcessModel(modelDir), tok.encode('In the beginning'), { maxTokens: 8, tokenizer: tok })).text;
    const res = await api(daemons[1]!, '/v1/completions', { method: 'POST', body: JSON.stringify({ model: MODEL, prompt: 'In the beginning', max_tokens: 8, temperature: 0 }) });
    const out = (await res.json()) as any;
    expect(res.status, JSON.stringify(out)).toBe(200);
    expect(out.choices[0].text).toBe(want);

    const url = `http://127.0.0.1:${daemons[1]!.apiPort}`;
    const text = await runCli(['status', '--url', url]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(`  ${id} (${MODEL}, 2 ranks)\n    0 <-> 1  RDMA (rank 0 on rdma_sim1, rank 1 on rdma_sim0)`);
    expect(text.stdout).toMatch(/RDMA (unavailable|ready|not ready)/); // each node's readiness line
    const json = JSON.parse((await runCli(['status', '--json', '--url', url])).stdout);
    expect(json.dataPlane).toEqual([{ instance: id, model: MODEL, ranks: 2, links: expect.any(Array) }]);
    expect(json.nodes[0].profile.rdma).toMatchObject({ available: expect.any(Boolean), summary: expect.any(String) });
    expect(json.self).toBeDefined(); // existing fields unchanged
  }, 90_000);
});
