/**
 * Weights sharing between stores over the real data plane (loopback), with the pod's questions
 * asked in-process (local-pod.ts) and a local stand-in for the hub that counts what it serves:
 * stages fetched at once cost the hub each byte once; later nodes take whole models from peers,
 * striped over all of them; a peer that dies or serves bad bytes is worked around (and reported);
 * a restarted download fetches nothing it had verified; --from-pod uses no hub at all.
 */
import { readFileSync, rmSync, mkdtempSync, openSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SafetensorsFile } from '@orchard/engine';
import { writeRandomModel, type RandomModelInfo } from '@orchard/engine/testing';
import { startFakeHub, type FakeHub } from '../../../../test/harness/fake-hub.js';
import { HubClient, ModelStore } from '../../src/store/index.js';
import { ChunkedFile } from '../../src/store/chunked/chunk-file.js';
import { chunkSizeFor } from '../../src/store/chunked/layout.js';
import { parseLayout } from '../../src/store/chunked/safetensors-layout.js';
import { startLocalPod, type LocalPod } from './local-pod.js';

const REPO = 'orchard-test/pod-llama';
let work: string;
let model: RandomModelInfo;
let weights: Buffer;
let hub: FakeHub;
let pod: LocalPod | undefined;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'orchard-pod-fetch-'));
  model = writeRandomModel(join(work, 'src'), { hiddenSize: 256, intermediateSize: 512, numLayers: 4, numHeads: 4, numKvHeads: 2, seed: 21 });
  weights = readFileSync(join(model.dir, 'model.safetensors'));
  hub = await startFakeHub({ [REPO]: model.dir });
});
afterEach(async () => {
  await pod?.close();
  pod = undefined;
  hub.servedBytes.clear();
  hub.ranges.clear();
});
afterAll(async () => {
  await hub.close();
  rmSync(work, { recursive: true, force: true });
});

let podCount = 0;
const newPod = async (ids: string[]) => (pod = await startLocalPod(ids, join(work, `pod${podCount++}`), hub.url));
const node = (id: string) => pod!.nodes.find((n) => n.id === id)!;
const file = (id: string) => join(node(id).store.dirFor(REPO), 'model.safetensors');
const identical = (id: string) => readFileSync(file(id)).equals(weights);
const hubServed = () => [...hub.servedBytes.values()].reduce((a, b) => a + b, 0);
const totalBytes = () => ['config.json', 'model.safetensors', 'tokenizer.json', 'generation_config.json', 'tokenizer_config.json']
  .map((f) => { try { return readFileSync(join(model.dir, f)).length; } catch { return 0; } })
  .reduce((a, b) => a + b, 0);

/** Tensors of a partial file must equal the source's, byte for byte. */
function checkTensors(path: string): string[] {
  const f = SafetensorsFile.open(path);
  const names = [...f.tensors.keys()];
  const src = parseLayout(weights, weights.length, 'src');
  const mine = readFileSync(path);
  for (const n of names) {
    const t = src.tensors.find((x) => x.name === n)!;
    expect(mine.subarray(t.start, t.end).equals(weights.subarray(t.start, t.end)), n).toBe(true);
  }
  f.close();
  return names;
}

describe('weights from the pod', () => {
  it('three nodes fetching one stage each at once: the hub serves each byte at most once', async () => {
    await newPod(['a', 'b', 'c']);
    const stages = [
      { id: 'a', selection: { layers: [0, 2] as [number, number], embed: true, head: false } },
      { id: 'b', selection: { layers: [2, 3] as [number, number], embed: false, head: false } },
      { id: 'c', selection: { layers: [3, 4] as [number, number], embed: false, head: true } },
    ];
    const results = await Promise.all(stages.map((s) => node(s.id).store.pull(REPO, { selection: s.selection, pod: node(s.id).pod })));
    for (const [name, bytes] of hub.servedBytes) {
      expect(bytes, name).toBeLessThanOrEqual(readFileSync(join(model.dir, name)).length);
    }
    expect(hubServed()).toBeLessThanOrEqual(totalBytes());
    // The small files and the shared header chunk came from the hub once and from peers otherwise.
    expect(results.reduce((n, r) => n + r.peerBytes, 0)).toBeGreaterThan(0);
    expect(checkTensors(file('a'))).toContain('model.layers.1.mlp.down_proj.weight');
    // b holds every tensor of layer 2 (plus small neighbours that share a boundary chunk), nothing large of other layers.
    const b = checkTensors(file('b'));
    const layer2 = parseLayout(weights, weights.length, 'src').tensors.filter((t) => t.name.startsWith('model.layers.2.')).map((t) => t.name);
    expect(b).toEqual(expect.arrayContaining(layer2));
    for (const other of ['model.embed_tokens.weight', 'lm_head.weight', 'model.layers.0.mlp.up_proj.weight', 'model.layers.3.mlp.up_proj.weight']) expect(b).not.toContain(other);
    expect(checkTensors(file('c'))).toContain('lm_head.weight');
  }, 60_000);

  it('later nodes take the whole model from peers, the third striped over both', async () => {
    await newPod(['a', 'b', 'c']);
    await node('a').store.pull(REPO, { pod: node('a').pod });
    const fromHub = hubServed();
    expect(fromHub).toBe(totalBytes());
    const b = await node('b').store.pull(REPO, { pod: node('b').pod });
    expect(b.hubBytes).toBe(0);
    expect(b.bySource.a).toBe(totalBytes());
    expect(b.sources['model.safetensors']).toBe('peer');
    const c = await node('c').store.pull(REPO, { pod: node('c').pod });
    expect(c.hubBytes).toBe(0);
    expect(c.bySource.a).toBeGreaterThan(0);
    expect(c.bySource.b).toBeGreaterThan(0);
    expect(hubServed()).toBe(fromHub);
    expect(identical('b') && identical('c')).toBe(true);
  }, 60_000);

  it('a download is finished only once every chunk is written, however late one write completes', async () => {
    await newPod(['a', 'b']);
    await node('a').store.pull(REPO, { pod: node('a').pod });
    const write = ChunkedFile.prototype.writeChunk;
    ChunkedFile.prototype.writeChunk = async function (this: ChunkedFile, i: number, bytes: Uint8Array, digest: Uint8Array) {
      if (i === 1 && this.path.endsWith('model.safetensors')) await new Promise((r) => setTimeout(r, 500));
      return write.call(this, i, bytes, digest);
    };
    try {
      const b = await node('b').store.pull(REPO, { pod: node('b').pod });
      expect(b.sources['model.safetensors']).toBe('peer');
      expect((await node('b').store.readManifest(REPO))?.files['model.safetensors'].complete).toBe(true);
      expect(identical('b')).toBe(true);
    } finally {
      ChunkedFile.prototype.writeChunk = write;
    }
  }, 60_000);

  it('a peer that dies mid-transfer: the download finishes from the other', async () => {
    await newPod(['a', 'b', 'c']);
    await node('a').store.pull(REPO, { pod: node('a').pod });
    await node('b').store.pull(REPO, { pod: node('b').pod });
    const before = hubServed();
    node('a').served = 0;
    node('a').onServed = (n) => {
      if (n === 5) void pod!.kill('a');
    };
    const c = await node('c').store.pull(REPO, { pod: node('c').pod });
    expect(node('a').served).toBeGreaterThanOrEqual(5);
    expect(c.bySource.b).toBeGreaterThan(0);
    expect(c.hubBytes).toBe(0);
    expect(hubServed()).toBe(before);
    expect(identical('c')).toBe(true);
  }, 60_000);

  it('a peer serving a corrupted chunk is detected and reported; the chunk comes again from elsewhere', async () => {
    await newPod(['a', 'c']);
    await node('a').store.pull(REPO, { pod: node('a').pod });
    // Bit rot on a's disk after it verified the chunk: its record still has the right digest.
    const cs = chunkSizeFor(weights.length);
    const fd = openSync(file('a'), 'r+');
    writeSync(fd, Buffer.from([weights[3 * cs + 17] ^ 0xff]), 0, 1, 3 * cs + 17);
    closeSync(fd);
    const before = hub.servedBytes.get('model.safetensors') ?? 0;
    const reports: Array<[string, string, number]> = [];
    const c = await node('c').store.pull(REPO, { pod: node('c').pod, onBadPeer: (peer, f, chunk) => reports.push([peer, f, chunk]) });
    expect(reports.length).toBe(1);
    expect(reports[0][0]).toBe('a');
    expect(reports[0][1]).toBe('model.safetensors');
    expect(c.badPeers).toEqual(['a']);
    expect(identical('c')).toBe(true);
    // What a no longer delivered came from the hub: at least the corrupted chunk.
    expect((hub.servedBytes.get('model.safetensors') ?? 0) - before).toBeGreaterThanOrEqual(cs);
  }, 60_000);

  it('resume after a restart fetches nothing that was verified', async () => {
    await newPod(['a']);
    const abort = new AbortController();
    let seen = 0;
    const first = node('a').store.pull(REPO, {
      onProgress: (e) => {
        if (e.file === 'model.safetensors' && e.done > weights.length / 2 && !abort.signal.aborted) {
          seen = e.done;
          abort.abort(new Error('daemon stopped'));
        }
      },
      signal: abort.signal,
    });
    await expect(first).rejects.toThrow(/daemon stopped/);
    expect(seen).toBeGreaterThan(0);
    await node('a').store.close();
    // A new store on the same directory: what the chunk log recorded is not fetched again.
    const again = new ModelStore(join(node('a').store.root, '..'), new HubClient({ endpoint: hub.url }));
    const servedBefore = hub.servedBytes.get('model.safetensors')!;
    const r = await again.pull(REPO);
    const refetched = hub.servedBytes.get('model.safetensors')! - servedBefore;
    expect(r.sources['model.safetensors']).toBe('hub');
    expect(refetched).toBeLessThanOrEqual(weights.length - seen + chunkSizeFor(weights.length) * 4);
    expect(refetched).toBeLessThan(weights.length);
    expect(readFileSync(join(again.dirFor(REPO), 'model.safetensors')).equals(weights)).toBe(true);
    await again.close();
  }, 60_000);

  it('--from-pod takes the listing and every byte from peers, and fails clearly when no peer has the model', async () => {
    await newPod(['a', 'b']);
    await expect(node('b').store.pull(REPO, { pod: node('b').pod, fromPod: true })).rejects.toThrow(/orchard-test\/pod-llama: no peer in the pod holds this model/);
    await node('a').store.pull(REPO, { pod: node('a').pod, selection: { layers: [0, 2], embed: true, head: false } });
    const before = hubServed();
    const partial = await node('b').store.pull(REPO, { pod: node('b').pod, fromPod: true, selection: { layers: [0, 1], embed: true, head: false } });
    expect(partial.hubBytes).toBe(0);
    expect(hubServed()).toBe(before);
    expect(checkTensors(file('b'))).toContain('model.layers.0.self_attn.q_proj.weight');
    // a holds only layers 0-1: the head is in no peer's store.
    await expect(node('b').store.pull(REPO, { pod: node('b').pod, fromPod: true })).rejects.toThrow(/model.safetensors: no peer in the pod holds chunks/);
  }, 60_000);
});
