import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomModel, type RandomModelInfo } from '@orchard/engine/testing';
import { ChecksumError, HubClient, ModelStore, StoreError } from '../../src/store/index.js';
import { startFakeHub, type FakeHub } from '../../../../test/harness/fake-hub.js';
import { chunkSizeFor } from '../../src/store/chunked/layout.js';

const REPO = 'orchard-test/tiny-llama';
let work: string;
let model: RandomModelInfo;

function readSafetensorsHeader(file: string): Record<string, { data_offsets: [number, number] }> {
  const buf = readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  return JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
}
function tensorBytes(file: string, name: string): Buffer {
  const buf = readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const h = readSafetensorsHeader(file)[name];
  return buf.subarray(8 + n + h.data_offsets[0], 8 + n + h.data_offsets[1]);
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'orchard-store-'));
  model = writeRandomModel(join(work, 'src-model'), { hiddenSize: 256, intermediateSize: 512, numLayers: 4, numHeads: 4, numKvHeads: 2, seed: 7 });
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Stores a test made: their open chunk files are closed when it ends. */
const stores: ModelStore[] = [];
const newStore = (dir: string, hub: HubClient) => {
  const s = new ModelStore(dir, hub);
  stores.push(s);
  return s;
};

async function withHub<T>(faults: Parameters<typeof startFakeHub>[1], fn: (hub: FakeHub) => Promise<T>): Promise<T> {
  const hub = await startFakeHub({ [REPO]: model.dir }, faults);
  try {
    return await fn(hub);
  } finally {
    await Promise.all(stores.splice(0).map((s) => s.close()));
    await hub.close();
  }
}

describe('model store: pull from the hub', () => {
  it('downloads every file byte for byte, pins the commit, and a second pull fetches nothing', async () => {
    await withHub({}, async (hub) => {
      const store = newStore(join(work, 'a'), new HubClient({ endpoint: hub.url }));
      const r = await store.pull(REPO);
      expect(r.commit).toBe(hub.commit);
      for (const f of ['config.json', 'model.safetensors', 'tokenizer.json']) {
        expect(readFileSync(join(r.dir, f)).equals(readFileSync(join(model.dir, f)))).toBe(true);
      }
      expect(r.sources['model.safetensors']).toBe('hub');
      const again = await store.pull(REPO);
      expect(Object.values(again.sources).every((s) => s === 'local')).toBe(true);
      expect(again.hubBytes).toBe(0);
      expect((await store.list()).map((m) => m.repo)).toEqual([REPO]);
    });
  });

  it("fetches a tiktoken vocabulary (Kimi K2's tiktoken.model) but not the tokenizer's Python code", async () => {
    const kimi = join(work, 'kimi-layout');
    cpSync(model.dir, kimi, { recursive: true });
    writeFileSync(join(kimi, 'tiktoken.model'), 'IQ== 0\n');
    writeFileSync(join(kimi, 'tokenization_kimi.py'), '# never run\n');
    const hub = await startFakeHub({ 'orchard-test/kimi-layout': kimi }, {});
    try {
      const store = newStore(join(work, 'k'), new HubClient({ endpoint: hub.url }));
      const r = await store.pull('orchard-test/kimi-layout');
      expect(readFileSync(join(r.dir, 'tiktoken.model'), 'utf8')).toBe('IQ== 0\n');
      expect(existsSync(join(r.dir, 'tokenization_kimi.py'))).toBe(false);
    } finally {
      await Promise.all(stores.splice(0).map((s) => s.close()));
      await hub.close();
    }
  });

  it('resumes an interrupted download at the next chunk instead of starting over', async () => {
    const size = readFileSync(join(model.dir, 'model.safetensors')).length;
    const half = Math.floor(size / 2);
    await withHub({ dropAfter: { file: 'model.safetensors', bytes: half, times: 1 } }, async (hub) => {
      const store = newStore(join(work, 'resume'), new HubClient({ endpoint: hub.url }));
      await store.pull(REPO);
      expect(readFileSync(join(store.dirFor(REPO), 'model.safetensors')).equals(readFileSync(join(model.dir, 'model.safetensors')))).toBe(true);
      // Range requests of whole chunks: the broken one is resumed at the first chunk it did not
      // complete, so at most one chunk's worth is read twice.
      const cs = chunkSizeFor(size);
      const starts = (hub.ranges.get('model.safetensors') ?? []).map((r) => Number(/^bytes=(\d+)-\d+$/.exec(r)?.[1]));
      expect(starts.every((b) => b % cs === 0)).toBe(true);
      expect(hub.servedBytes.get('model.safetensors')).toBeGreaterThanOrEqual(size);
      expect(hub.servedBytes.get('model.safetensors')).toBeLessThan(size + cs);
    });
  });

  it('detects a corrupt file, names it, and leaves no corrupt bytes in place', async () => {
    await withHub({ corrupt: { file: 'model.safetensors' } }, async (hub) => {
      const store = newStore(join(work, 'corrupt'), new HubClient({ endpoint: hub.url }));
      const err = await store.pull(REPO).catch((e) => e);
      expect(err).toBeInstanceOf(ChecksumError);
      expect(err.message).toContain('orchard-test/tiny-llama: model.safetensors: checksum mismatch');
      expect(existsSync(join(store.dirFor(REPO), 'model.safetensors'))).toBe(false);
    });
  });

  it('sends HF_TOKEN and explains a refusal', async () => {
    await withHub({ token: 'secret' }, async (hub) => {
      const denied = newStore(join(work, 'tok1'), new HubClient({ endpoint: hub.url, token: 'wrong' }));
      await expect(denied.pull(REPO)).rejects.toThrow(/the hub refused the file listing \(HTTP 401\)/);
      const ok = newStore(join(work, 'tok2'), new HubClient({ endpoint: hub.url, token: 'secret' }));
      await expect(ok.pull(REPO)).resolves.toMatchObject({ commit: hub.commit });
    });
  });

  it('rejects bad repo ids and unknown repos with the name in the message', async () => {
    await withHub({}, async (hub) => {
      const store = newStore(join(work, 'bad'), new HubClient({ endpoint: hub.url }));
      await expect(store.pull('../etc')).rejects.toThrow(StoreError);
      await expect(store.pull('nobody/nothing')).rejects.toThrow(/nobody\/nothing: not found on http:\/\/127\.0\.0\.1:\d+ \(HTTP 404\): check the name \(ORG\/NAME; case matters\) and the revision "main"/);
    });
  });
});

describe('model store: pipeline stages', () => {
  it('a pipeline stage fetches only its layers: about its share of the bytes, tensors intact', async () => {
    await withHub({}, async (hub) => {
      const store = newStore(join(work, 'stage'), new HubClient({ endpoint: hub.url }));
      const r = await store.pull(REPO, { selection: { layers: [0, 2], embed: true, head: false } });
      expect(r.sources['model.safetensors']).toBe('hub-range');
      const file = join(store.dirFor(REPO), 'model.safetensors');
      const names = Object.keys(readSafetensorsHeader(file)).filter((n) => n !== '__metadata__');
      // Whole chunks are fetched: a small tensor sharing the boundary chunk may come along, nothing large.
      expect(names.some((n) => n.startsWith('model.layers.2.mlp.') || n.startsWith('model.layers.3.'))).toBe(false);
      expect(names).toContain('model.embed_tokens.weight');
      expect(names).toContain('model.layers.1.mlp.down_proj.weight');
      expect(names.some((n) => n.startsWith('lm_head'))).toBe(false);
      for (const n of names) expect(tensorBytes(file, n).equals(tensorBytes(join(model.dir, 'model.safetensors'), n))).toBe(true);
      // Expected share: the selected tensors' bytes out of all tensor bytes.
      const srcHeader = readSafetensorsHeader(join(model.dir, 'model.safetensors'));
      const want = names.reduce((s, n) => s + srcHeader[n].data_offsets[1] - srcHeader[n].data_offsets[0], 0);
      // Whole chunks: the header's, and at most one partly used chunk at each end of each run of tensors.
      const served = hub.servedBytes.get('model.safetensors')!;
      const cs = chunkSizeFor(readFileSync(join(model.dir, 'model.safetensors')).length);
      expect(served).toBeGreaterThanOrEqual(want);
      expect(served).toBeLessThanOrEqual(want + 4 * cs);
      expect(served).toBeLessThan(model.weightBytes * 0.75);
    });
  });
});
