/**
 * Two daemons in this process whose runners use the test-only simulated RDMA verbs (ORCHARD_RDMA_SIM, set
 * in this worker's environment, which the runner processes inherit): a tensor-parallel instance across the
 * two serves the unsplit model's text over an RDMA link, and both daemons' /api/instances and
 * `orchard status` show the link's choice (one end from the local runner, the other from gossip).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Orchard } from '../../src/orchard.js';
import { RDMA_SIM_ENV } from '../../src/runner/rdma-select.js';
import { api, greedyText, runCli, startServingPair, waitFor } from './in-process-pod.js';

const MODEL = 'test/rand-rdma';
let daemons: Orchard[] = [];
let modelDir: string;
let stopPair: () => Promise<void> = async () => {};
const savedSim = process.env[RDMA_SIM_ENV];

beforeAll(async () => {
  process.env[RDMA_SIM_ENV] = '1';
  ({ daemons, modelDir, stop: stopPair } = await startServingPair('orchard-pod-rdma-', { repo: MODEL, options: { numLayers: 2, hiddenSize: 64, seed: 9, maxPositionEmbeddings: 256 } }));
}, 60_000);

afterAll(async () => {
  await stopPair();
  if (savedSim === undefined) delete process.env[RDMA_SIM_ENV];
  else process.env[RDMA_SIM_ENV] = savedSim;
});

describe('a 2-daemon pod whose runners connect over (simulated) RDMA', () => {
  it('tensor parallel over 2 nodes: unsplit text; each link end in /api/instances of both daemons and in orchard status', async () => {
    const placed = await api(daemons[0]!, '/api/instances', { method: 'POST', body: JSON.stringify({ model: MODEL, strategy: 'tensor', nodes: 2 }) });
    const body = (await placed.json()) as any;
    expect(placed.status, JSON.stringify(body)).toBe(201);
    const id = body.instance.id as string;
    const linksOn = async (d: Orchard) => ((await (await api(d, '/api/instances')).json()) as any).instances.find((i: any) => i.id === id)?.links ?? [];
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
