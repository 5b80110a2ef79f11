/**
 * Model bytes within a pod of three daemons in this process (libp2p on loopback, joined by bootstrap
 * so two of them know each other only through gossip; the real weights data plane): three nodes
 * pulling one model at once cost the hub each byte at most once, the rest
 * moving between them; the second node to pull a model gets it from the first (asked over
 * /orchard/weights/1) instead of the hub; nodes placed in a pipeline without the model fetch their
 * stages from peers only (counted by source, from each daemon's 'model fetched' log record) and serve.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomModel } from '@orchard/engine/testing';
import { startFakeHub, type FakeHub } from '../../../../test/harness/fake-hub.js';
import type { Orchard } from '../../src/orchard.js';
import { greedyText, startServingDaemon, waitFor } from './in-process-pod.js';

const REPO = 'test-org/pod-llama';
/** Pulled by all three nodes at once. */
const SHARED = 'test-org/pod-shared';
let hub: FakeHub;
let srcDir: string;
let sharedDir: string;
const dirs: string[] = [];
const daemons: Orchard[] = [];
/** Each daemon's 'model fetched' log records, by daemon index. */
const fetched: Array<Array<{ repo: string; hubBytes: number; peerBytes: number; holders: string[] }>> = [];
const savedEndpoint = process.env.HF_ENDPOINT;

async function startDaemon(bootstrap: string[]): Promise<Orchard> {
  const records: (typeof fetched)[number] = [];
  fetched.push(records);
  const log = pino({ level: 'info' }, { write: (line: string) => void (JSON.parse(line).msg === 'model fetched' && records.push(JSON.parse(line))) });
  const { daemon, dataDir } = await startServingDaemon({ tmpPrefix: 'orchard-serve-dl-', bootstrap, log });
  dirs.push(dataDir);
  daemons.push(daemon);
  return daemon;
}

const post = async (d: Orchard, path: string, body: unknown) => {
  const res = await fetch(`http://127.0.0.1:${d.apiPort}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as any };
};
const peerId = (d: Orchard) => d.daemon.node.peerId.toString();

beforeAll(async () => {
  srcDir = mkdtempSync(join(os.tmpdir(), 'orchard-serve-dl-src-'));
  writeRandomModel(srcDir, { numLayers: 4, hiddenSize: 128, intermediateSize: 256, seed: 13, maxPositionEmbeddings: 256 });
  sharedDir = mkdtempSync(join(os.tmpdir(), 'orchard-serve-dl-shared-'));
  writeRandomModel(sharedDir, { numLayers: 6, hiddenSize: 128, intermediateSize: 384, seed: 17, maxPositionEmbeddings: 256 });
  hub = await startFakeHub({ [REPO]: srcDir, [SHARED]: sharedDir });
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
  for (const d of [...dirs, srcDir, sharedDir]) rmSync(d, { recursive: true, force: true });
});

/** The files two model directories hold byte for byte the same. */
function sameFiles(a: string, b: string): string[] {
  return readdirSync(a).filter((f) => existsSync(join(b, f)) && readFileSync(join(a, f)).equals(readFileSync(join(b, f))));
}

/** Waits (15 s at most) until `d` lists `repo` among its models: a peer's announcement has reached it. */
async function listsModel(d: (typeof daemons)[number], repo: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  let ids: string[] = [];
  while (!ids.includes(repo) && Date.now() < deadline) {
    ids = ((await (await fetch(`http://127.0.0.1:${d.apiPort}/v1/models`)).json()) as any).data.map((m: any) => m.id);
    if (!ids.includes(repo)) await new Promise((r) => setTimeout(r, 300));
  }
  expect(ids).toContain(repo);
}

describe('model bytes in a pod', () => {
  it('three nodes pulling one model at once: the hub serves each byte at most once, the rest moves between peers', async () => {
    const pulls = await Promise.all(daemons.map((d) => post(d, '/api/models/pull', { repo: SHARED })));
    for (const p of pulls) expect(p.status, JSON.stringify(p.json)).toBe(200);
    for (const f of ['config.json', 'model.safetensors', 'tokenizer.json']) {
      expect(hub.servedByRepo.get(`${SHARED}/${f}`) ?? 0, f).toBeLessThanOrEqual(statSync(join(sharedDir, f)).size);
    }
    const weights = readFileSync(join(sharedDir, 'model.safetensors'));
    for (const p of pulls) expect(readFileSync(join(p.json.dir, 'model.safetensors')).equals(weights)).toBe(true);
    // Three copies were made; the hub gave at most one of them, peers the others.
    const total = pulls.reduce((n, p) => n + p.json.hubBytes + p.json.peerBytes, 0);
    const hubTotal = pulls.reduce((n, p) => n + p.json.hubBytes, 0);
    expect(hubTotal).toBe([...hub.servedByRepo].filter(([k]) => k.startsWith(`${SHARED}/`)).reduce((n, [, v]) => n + v, 0));
    expect(total - hubTotal).toBeGreaterThanOrEqual(2 * weights.length);
  }, 120_000);

  it('the second node gets the weights from the first, not from the hub', async () => {
    const weights = statSync(join(srcDir, 'model.safetensors')).size;
    const first = await post(daemons[0], '/api/models/pull', { repo: REPO });
    expect(first.status, JSON.stringify(first.json)).toBe(200);
    expect(first.json.sources['model.safetensors']).toBe('hub');
    expect(hub.servedByRepo.get(`${REPO}/model.safetensors`)).toBe(weights);
    // Once the first node's holdings have reached the second (it lists the model), every file of the
    // second pull comes from the first; before that the small files may still take another route.
    await listsModel(daemons[1], REPO);
    const second = await post(daemons[1], '/api/models/pull', { repo: REPO });
    expect(second.status, JSON.stringify(second.json)).toBe(200);
    expect(second.json.sources['model.safetensors']).toBe('peer');
    // Files are asked for by content, so a file byte-identical to one of SHARED's (the tokenizer) may
    // come from the third node, which holds SHARED; everything else comes from the first.
    const shared = sameFiles(srcDir, sharedDir);
    const fromFirst = second.json.bySource[peerId(daemons[0])];
    const fromThird = second.json.bySource[peerId(daemons[2])] ?? 0;
    expect(fromFirst).toBeGreaterThanOrEqual(weights);
    expect(fromFirst + fromThird).toBe(second.json.peerBytes);
    expect(fromThird).toBeLessThanOrEqual(shared.reduce((n, f) => n + statSync(join(srcDir, f)).size, 0));
    expect(second.json.peersHolding).toContain(peerId(daemons[0]));
    expect(second.json.peersHolding.every((p: string) => [peerId(daemons[0]), peerId(daemons[2])].includes(p))).toBe(true);
    expect(hub.servedByRepo.get(`${REPO}/model.safetensors`)).toBe(weights); // still one hub download
  }, 60_000);

  it('a node without the model lists it (peers announce theirs) and serves a request naming it', async () => {
    const c = daemons[2];
    await listsModel(c, REPO);
    const want = await greedyText(srcDir, 'And the earth', 8);
    const res = await post(c, '/v1/completions', { model: REPO, prompt: 'And the earth', max_tokens: 8, temperature: 0 });
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.json.choices[0].text).toBe(want);
  }, 120_000);

  it('a node placed in a pipeline without the model fetches its stage from its peers only and serves', async () => {
    const hubBefore = hub.servedByRepo.get(`${REPO}/model.safetensors`);
    const placed = await post(daemons[0], '/api/instances', { model: REPO, strategy: 'pipeline', nodes: 3 });
    expect(placed.status, JSON.stringify(placed.json)).toBe(201);
    expect(placed.json.instance.nodes).toHaveLength(3);
    const want = await greedyText(srcDir, 'Let there be', 12);
    const res = await post(daemons[2], '/v1/completions', { model: REPO, prompt: 'Let there be', max_tokens: 12, temperature: 0 });
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.json.choices[0].text).toBe(want);
    expect(hub.servedByRepo.get(`${REPO}/model.safetensors`)).toBe(hubBefore);
    // The third node had no copy: what it fetched came from the two that had, by source.
    const rec = fetched[2].filter((x) => x.repo === REPO).at(-1)!;
    expect(rec.hubBytes).toBe(0);
    expect(rec.peerBytes).toBeGreaterThan(0);
    expect(rec.holders.length).toBeGreaterThan(0);
    expect(rec.holders.every((h) => [peerId(daemons[0]), peerId(daemons[1])].includes(h))).toBe(true);
  }, 120_000);
});
