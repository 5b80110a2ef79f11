/**
 * Model bytes within a pod: the first daemon pulls from the (local test) hub, the second gets the
 * weights from the first over /orchard/chunks/1 instead of the hub, a stage-only fetch reads about
 * its share, and a node placed in a pipeline without the model fetches it from its peers and serves.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomModel } from '@orchard/engine/testing';
import { startFakeHub, type FakeHub } from '../../../../test/harness/fake-hub.js';
import type { Orchard } from '../../src/orchard.js';
import { fetchModel } from '../../src/instances/fetch-model.js';
import { HubClient, ModelStore } from '../../src/store/index.js';
import { greedyText, startServingDaemon, waitFor } from './in-process-pod.js';

const REPO = 'test-org/pod-llama';
let hub: FakeHub;
let srcDir: string;
const dirs: string[] = [];
const daemons: Orchard[] = [];
const savedEndpoint = process.env.HF_ENDPOINT;

async function startDaemon(bootstrap: string[]): Promise<Orchard> {
  const { daemon, dataDir } = await startServingDaemon({ tmpPrefix: 'orchard-serve-dl-', bootstrap });
  dirs.push(dataDir);
  daemons.push(daemon);
  return daemon;
}

const post = async (d: Orchard, path: string, body: unknown) => {
  const res = await fetch(`http://127.0.0.1:${d.apiPort}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as any };
};

beforeAll(async () => {
  srcDir = mkdtempSync(join(os.tmpdir(), 'orchard-serve-dl-src-'));
  writeRandomModel(srcDir, { numLayers: 4, hiddenSize: 128, intermediateSize: 256, seed: 13, maxPositionEmbeddings: 256 });
  hub = await startFakeHub({ [REPO]: srcDir });
  process.env.HF_ENDPOINT = hub.url;
  const a = await startDaemon([]);
  const boot = [String(a.daemon.node.getMultiaddrs()[0])];
  await startDaemon(boot);
  await startDaemon(boot);
  await waitFor('the pod to form', () => daemons.every((d) => d.daemon.cluster().nodes.length === 3), 30_000, 200);
}, 90_000);

afterAll(async () => {
  await Promise.all(daemons.map((d) => d.stop()));
  await hub?.close();
  if (savedEndpoint === undefined) delete process.env.HF_ENDPOINT;
  else process.env.HF_ENDPOINT = savedEndpoint;
  for (const d of [...dirs, srcDir]) rmSync(d, { recursive: true, force: true });
});

describe('model bytes in a pod', () => {
  it('the second node gets the weights from the first, not from the hub', async () => {
    const weights = statSync(join(srcDir, 'model.safetensors')).size;
    const first = await post(daemons[0], '/api/models/pull', { repo: REPO });
    expect(first.status, JSON.stringify(first.json)).toBe(200);
    expect(first.json.sources['model.safetensors']).toBe('hub');
    expect(hub.servedBytes.get('model.safetensors')).toBe(weights);
    const second = await post(daemons[1], '/api/models/pull', { repo: REPO });
    expect(second.status, JSON.stringify(second.json)).toBe(200);
    expect(second.json.sources['model.safetensors']).toBe('peer');
    expect(second.json.peerBytes).toBe(weights);
    expect(second.json.peersHolding).toEqual([daemons[0].daemon.node.peerId.toString()]);
    expect(hub.servedBytes.get('model.safetensors')).toBe(weights); // still one hub download
  }, 60_000);

  it('a stage-only fetch reads about its share of the weights', async () => {
    const dir = mkdtempSync(join(os.tmpdir(), 'orchard-serve-dl-stage-'));
    dirs.push(dir);
    const before = hub.servedBytes.get('model.safetensors') ?? 0;
    const weights = statSync(join(srcDir, 'model.safetensors')).size;
    const r = await fetchModel(daemons[0].daemon.node, new ModelStore(dir, new HubClient()), REPO, [], { layers: [2, 4], embed: false, head: true });
    expect(r.sources['model.safetensors']).toBe('hub-range');
    const read = (hub.servedBytes.get('model.safetensors') ?? 0) - before;
    expect(read).toBeGreaterThan(0);
    expect(read).toBeLessThan(0.75 * weights);
  }, 60_000);

  it('a node without the model lists it (peers announce theirs) and serves a request naming it', async () => {
    const c = daemons[2];
    const deadline = Date.now() + 15_000;
    let ids: string[] = [];
    while (!ids.includes(REPO) && Date.now() < deadline) {
      ids = ((await (await fetch(`http://127.0.0.1:${c.apiPort}/v1/models`)).json()) as any).data.map((m: any) => m.id);
      if (!ids.includes(REPO)) await new Promise((r) => setTimeout(r, 300));
    }
    expect(ids).toContain(REPO);
    const want = await greedyText(srcDir, 'And the earth', 8);
    const res = await post(c, '/v1/completions', { model: REPO, prompt: 'And the earth', max_tokens: 8, temperature: 0 });
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.json.choices[0].text).toBe(want);
  }, 120_000);

  it('a node placed in a pipeline without the model fetches it from its peers and serves', async () => {
    const hubBefore = hub.servedBytes.get('model.safetensors');
    const placed = await post(daemons[0], '/api/instances', { model: REPO, strategy: 'pipeline', nodes: 3 });
    expect(placed.status, JSON.stringify(placed.json)).toBe(201);
    expect(placed.json.instance.nodes).toHaveLength(3);
    const want = await greedyText(srcDir, 'Let there be', 12);
    const res = await post(daemons[2], '/v1/completions', { model: REPO, prompt: 'Let there be', max_tokens: 12, temperature: 0 });
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.json.choices[0].text).toBe(want);
    expect(hub.servedBytes.get('model.safetensors')).toBe(hubBefore);
  }, 120_000);
});
