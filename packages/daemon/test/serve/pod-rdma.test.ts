/**
 * Two daemons in this process whose runners use the test-only simulated RDMA verbs (ORCHARD_RDMA_SIM, set
 * in this worker's environment, which the runner processes inherit): a tensor-parallel instance across the
 * two serves the unsplit model's text over an RDMA link, and both daemons' /api/instances and
 * `orchard status` show the link's choice (one end from the local runner, the other from gossip).
 */
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Daemon } from '../../src/daemon.js';
import { RDMA_SIM_ENV } from '../../src/runner/rdma-select.js';
import { api, greedyText, runCli, startServingDaemon, waitFor } from './in-process-pod.js';

const MODEL = 'test/rand-rdma';
const dirs: string[] = [];
let daemons: Daemon[] = [];
let modelDir: string;
const savedSim = process.env[RDMA_SIM_ENV];

async function startDaemon(bootstrap: string[]): Promise<Daemon> {
  const s = await startServingDaemon({ tmpPrefix: 'orchard-pod-rdma-', bootstrap, model: { repo: MODEL, options: { numLayers: 2, hiddenSize: 64, seed: 9, maxPositionEmbeddings: 256 } } });
  dirs.push(s.dataDir);
  modelDir = s.modelDir!;
  return s.daemon;
}

beforeAll(async () => {
  process.env[RDMA_SIM_ENV] = '1';
  const a = await startDaemon([]);
  const b = await startDaemon([String(a.node.getMultiaddrs()[0])]);
  daemons = [a, b];
  await waitFor('both nodes with profiles in both states', () => daemons.every((d) => d.cluster().nodes.length === 2) || undefined, 30_000, 100);
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
      const links = await waitFor('both ends of the link reported', async () => ((await linksOn(d)).length === 2 ? linksOn(d) : undefined), 20_000, 100);
      expect(links).toEqual([
        { rank: 0, peer: 1, transport: 'rdma', reason: 'rdma_sim1' },
        { rank: 1, peer: 0, transport: 'rdma', reason: 'rdma_sim0' },
      ]);
    }
    const want = await greedyText(modelDir, 'In the beginning', 8);
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
