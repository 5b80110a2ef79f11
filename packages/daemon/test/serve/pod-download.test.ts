/**
 * Model bytes within a pod of three daemons in this process (libp2p on loopback, the real weights
 * data plane): a 3-stage load on a pod that has nothing costs the hub each byte at most once and
 * the pod answers with the single-process text; the first daemon pulls a model from the (local test)
 * hub, the second gets the weights from the first (asked over /orchard/weights/1) instead of the
 * hub, and nodes placed in a pipeline without the model fetch their stages from peers (counted by
 * source, from each daemon's 'model fetched' log record) and serve.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomModel } from '@orchard/engine/testing';
import { startFakeHub, type FakeHub } from '../../../../test/harness/fake-hub.js';
import type { Daemon } from '../../src/daemon.js';
import { greedyText, startServingDaemon, waitFor } from './in-process-pod.js';

const REPO = 'test-org/pod-llama';
/** Only on the hub until a 3-stage load fetches it. */
const STAGED = 'test-org/pod-stages';
let stagedDir: string;
/** Each daemon's 'model fetched' log records, by daemon index. */
const fetched: Array<Array<{ repo: string; hubBytes: number; peerBytes: number; holders: string[] }>> = [];
let hub: FakeHub;
let srcDir: string;
const dirs: string[] = [];
const daemons: Daemon[] = [];
const savedEndpoint = process.env.HF_ENDPOINT;

async function startDaemon(bootstrap: string[]): Promise<Daemon> {
  const records: (typeof fetched)[number] = [];
  fetched.push(records);
  const log = pino({ level: 'info' }, { write: (line: string) => void (JSON.parse(line).msg === 'model fetched' && records.push(JSON.parse(line))) });
  const { daemon, dataDir } = await startServingDaemon({ tmpPrefix: 'orchard-serve-dl-', bootstrap, log });
  dirs.push(dataDir);
  daemons.push(daemon);
  return daemon;
}

const post = async (d: Daemon, path: string, body: unknown) => {
  const res = await fetch(`http://127.0.0.1:${d.apiPort}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as any };
};

beforeAll(async () => {
  srcDir = mkdtempSync(join(os.tmpdir(), 'orchard-serve-dl-src-'));
  writeRandomModel(srcDir, { numLayers: 4, hiddenSize: 128, intermediateSize: 256, seed: 13, maxPositionEmbeddings: 256 });
  stagedDir = mkdtempSync(join(os.tmpdir(), 'orchard-serve-dl-staged-'));
  writeRandomModel(stagedDir, { numLayers: 6, hiddenSize: 128, intermediateSize: 384, seed: 17, maxPositionEmbeddings: 256 });
  hub = await startFakeHub({ [REPO]: srcDir, [STAGED]: stagedDir });
  process.env.HF_ENDPOINT = hub.url;
  const a = await startDaemon([]);
  const boot = [String(a.node.getMultiaddrs()[0])];
  await startDaemon(boot);
  await startDaemon(boot);
  await waitFor('the pod to form', () => daemons.every((d) => d.cluster().nodes.length === 3), 30_000, 200);
}, 90_000);

afterAll(async () => {
  await Promise.all(daemons.map((d) => d.stop()));
  await hub?.close();
  if (savedEndpoint === undefined) delete process.env.HF_ENDPOINT;
  else process.env.HF_ENDPOINT = savedEndpoint;
  for (const d of [...dirs, srcDir, stagedDir]) rmSync(d, { recursive: true, force: true });
});

describe('model bytes in a pod', () => {
  it('a 3-stage load on a pod that has nothing: the hub serves each byte at most once, and the pod answers', async () => {
    const placed = await post(daemons[1], '/api/instances', { model: STAGED, strategy: 'pipeline', nodes: 3 });
    expect(placed.status, JSON.stringify(placed.json)).toBe(201);
    const want = await greedyText(stagedDir, 'In the beginning', 10);
    const res = await post(daemons[0], '/v1/completions', { model: STAGED, prompt: 'In the beginning', max_tokens: 10, temperature: 0 });
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.json.choices[0].text).toBe(want);
    for (const f of ['config.json', 'model.safetensors', 'tokenizer.json']) {
      expect(hub.servedByRepo.get(`${STAGED}/${f}`) ?? 0, f).toBeLessThanOrEqual(statSync(join(stagedDir, f)).size);
    }
    // Every node fetched its stage; together they read well under three copies of the weights.
    const records = fetched.map((r) => r.filter((x) => x.repo === STAGED));
    expect(records.map((r) => r.length)).toEqual([1, 1, 1]);
    const hubTotal = records.reduce((n, [r]) => n + r.hubBytes, 0);
    expect(hubTotal).toBe([...hub.servedByRepo].filter(([k]) => k.startsWith(`${STAGED}/`)).reduce((n, [, v]) => n + v, 0));
    // The small files and the chunks stages share went to the hub once and to the others from peers.
    expect(records.reduce((n, [r]) => n + r.peerBytes, 0)).toBeGreaterThan(0);
    const del = await fetch(`http://127.0.0.1:${daemons[1].apiPort}/api/instances/${placed.json.instance.id}`, { method: 'DELETE' });
    expect(del.status).toBeLessThan(300);
  }, 180_000);

  it('the second node gets the weights from the first, not from the hub', async () => {
    const weights = statSync(join(srcDir, 'model.safetensors')).size;
    const first = await post(daemons[0], '/api/models/pull', { repo: REPO });
    expect(first.status, JSON.stringify(first.json)).toBe(200);
    expect(first.json.sources['model.safetensors']).toBe('hub');
    expect(hub.servedByRepo.get(`${REPO}/model.safetensors`)).toBe(weights);
    const second = await post(daemons[1], '/api/models/pull', { repo: REPO });
    expect(second.status, JSON.stringify(second.json)).toBe(200);
    expect(second.json.sources['model.safetensors']).toBe('peer');
    expect(second.json.bySource[daemons[0].node.peerId.toString()]).toBe(second.json.peerBytes);
    expect(second.json.peerBytes).toBeGreaterThanOrEqual(weights);
    expect(second.json.peersHolding).toEqual([daemons[0].node.peerId.toString()]);
    expect(hub.servedByRepo.get(`${REPO}/model.safetensors`)).toBe(weights); // still one hub download
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
    const hubBefore = hub.servedByRepo.get(`${REPO}/model.safetensors`);
    const placed = await post(daemons[0], '/api/instances', { model: REPO, strategy: 'pipeline', nodes: 3 });
    expect(placed.status, JSON.stringify(placed.json)).toBe(201);
    expect(placed.json.instance.nodes).toHaveLength(3);
    const want = await greedyText(srcDir, 'Let there be', 12);
    const res = await post(daemons[2], '/v1/completions', { model: REPO, prompt: 'Let there be', max_tokens: 12, temperature: 0 });
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.json.choices[0].text).toBe(want);
    expect(hub.servedByRepo.get(`${REPO}/model.safetensors`)).toBe(hubBefore);
    // The nodes that had to fetch took their stage from peers only, counted by source.
    const seed = daemons[0].node.peerId.toString();
    const late = fetched.slice(2).map((r) => r.filter((x) => x.repo === REPO).at(-1)).filter((x): x is NonNullable<typeof x> => !!x && (x.peerBytes > 0 || x.hubBytes > 0));
    expect(late.length).toBeGreaterThan(0);
    for (const r of late) {
      expect(r.hubBytes).toBe(0);
      expect(r.holders).toContain(seed);
    }
  }, 120_000);
});
