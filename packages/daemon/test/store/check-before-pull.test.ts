/**
 * Check before download (store/check-before-pull.ts): a pull fetches config.json, the index, the
 * tokenizer files and each weight file's header (exact range requests) first; the engine's own check
 * refuses an unloadable model with its reason before any weight byte moves, and a loadable one goes on.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hfToGguf } from '@orchard/engine/gguf';
import { writeAwqModel, writeRandomModel } from '@orchard/engine/testing';
import Fastify from 'fastify';
import { modelRoutes } from '../../src/http/models.js';
import type { Serving } from '../../src/serving/serving.js';
import { HubClient, ModelRefusedError, ModelStore } from '../../src/store/index.js';
import { startFakeHub, type FakeHub } from '../../../../test/harness/fake-hub.js';

let work: string;
let hub: FakeHub;
const repos: Record<string, string> = {};

/** Bytes of a safetensors file before its data: the 8-byte length and the header. */
function headerBytes(file: string): number {
  return 8 + Number(readFileSync(file).readBigUInt64LE(0));
}
const served = (repo: string, file: string) => hub.servedByRepo.get(`${repo}/${file}`) ?? 0;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'orchard-check-pull-'));
  const big = { hiddenSize: 256, intermediateSize: 512, numLayers: 4, numHeads: 4, numKvHeads: 2, seed: 7 };
  repos['test/llama'] = writeRandomModel(join(work, 'llama'), { ...big, shards: 2 }).dir;
  writeAwqModel(repos['test/llama'], (repos['test/llama-awq'] = join(work, 'llama-awq')));
  const mamba = writeRandomModel(join(work, 'mamba'), big);
  writeFileSync(join(mamba.dir, 'config.json'), JSON.stringify({ ...mamba.config, architectures: ['MambaForCausalLM'], model_type: 'mamba' }));
  repos['test/mamba'] = mamba.dir;
  // GGUF-only repos: a loadable one, and the same file claiming an architecture the engine does not run
  for (const [repo, arch] of [['test/tiny-GGUF', 'llama'], ['test/mamba-GGUF', 'mamba']]) {
    const dir = join(work, repo.replace('/', '-'));
    mkdirSync(dir);
    const file = join(dir, 'tiny-F32.gguf');
    hfToGguf(repos['test/llama'], file, { dtype: 'f32' });
    const bytes = readFileSync(file);
    const key = bytes.indexOf('general.architecture');
    // the key, its value type (u32) and the string's length (u64), then the 5 bytes of "llama"
    bytes.write(arch, key + 'general.architecture'.length + 4 + 8, 'latin1');
    writeFileSync(file, bytes);
    repos[repo] = dir;
  }
  hub = await startFakeHub(repos);
});
afterAll(async () => {
  await hub?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('a pull checks the model before its weights', () => {
  it.each([
    ['test/llama-awq', /quant_method "awq" is not supported/],
    ['test/mamba', /unsupported architecture MambaForCausalLM/],
  ])('%s is refused with the reason after fetching only the small files and the headers', async (repo, reason) => {
    const store = new ModelStore(join(work, `store-${repo.replace('/', '-')}`), new HubClient({ endpoint: hub.url }));
    try {
      const err = await store.pull(repo).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(ModelRefusedError);
      expect((err as Error).message).toMatch(reason);
      expect((err as Error).message).toMatch(/before downloading the weights/);
      const src = repos[repo];
      const weights = join(src, 'model.safetensors');
      // the weight file: its length, then the file up to the header's end, and nothing of its data
      expect(served(repo, 'model.safetensors')).toBe(8 + headerBytes(weights));
      expect(hub.ranges.get('model.safetensors')).toEqual(expect.arrayContaining(['bytes=0-7', `bytes=0-${headerBytes(weights) - 1}`]));
      expect(existsSync(join(store.dirFor(repo), 'model.safetensors'))).toBe(false);
      // everything else served is the small files, whole
      const small = ['config.json', 'tokenizer.json', 'tokenizer_config.json'];
      for (const f of small) expect(served(repo, f), f).toBe(statSync(join(src, f)).size);
      const total = [...hub.servedByRepo].filter(([k]) => k.startsWith(`${repo}/`)).reduce((a, [, n]) => a + n, 0);
      const smallBytes = ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json'].filter((f) => existsSync(join(src, f))).reduce((a, f) => a + statSync(join(src, f)).size, 0);
      expect(total).toBe(smallBytes + 8 + headerBytes(weights));
      expect(total).toBeLessThan(statSync(weights).size / 20);
    } finally {
      await store.close();
    }
  });

  it('a loadable model is checked from its headers, then pulled whole; a second pull reads the headers from disk', async () => {
    const repo = 'test/llama';
    const store = new ModelStore(join(work, 'store-llama'), new HubClient({ endpoint: hub.url }));
    try {
      const r = await store.pull(repo);
      const shards = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
      for (const f of shards) {
        const src = join(repos[repo], f);
        expect(readFileSync(join(r.dir, f)).equals(readFileSync(src))).toBe(true);
        // the header twice (the check, then the download), the data once
        expect(served(repo, f)).toBe(statSync(src).size + 8 + headerBytes(src));
      }
      const before = [...hub.servedByRepo.values()].reduce((a, b) => a + b, 0);
      const again = await store.pull(repo);
      expect(again.hubBytes).toBe(0);
      expect([...hub.servedByRepo.values()].reduce((a, b) => a + b, 0)).toBe(before);
    } finally {
      await store.close();
    }
  });
});

describe('a GGUF pull checks the file from its header', () => {
  it('refuses an architecture the engine does not run after fetching only the header', async () => {
    const repo = 'test/mamba-GGUF';
    const store = new ModelStore(join(work, 'store-gguf-refused'), new HubClient({ endpoint: hub.url }));
    try {
      const err = await store.pull(repo).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(ModelRefusedError);
      expect((err as Error).message).toMatch(/GGUF architecture mamba is not supported/);
      const size = statSync(join(repos[repo], 'tiny-F32.gguf')).size;
      expect(size).toBeGreaterThan(4 * 256 * 1024);
      expect(served(repo, 'tiny-F32.gguf')).toBe(256 * 1024);
      expect(existsSync(join(store.dirFor(repo), 'tiny-F32.gguf'))).toBe(false);
    } finally {
      await store.close();
    }
  });

  it('pulls a loadable one whole after its check', async () => {
    const repo = 'test/tiny-GGUF';
    const store = new ModelStore(join(work, 'store-gguf'), new HubClient({ endpoint: hub.url }));
    try {
      const r = await store.pull(repo);
      const src = join(repos[repo], 'tiny-F32.gguf');
      expect(readFileSync(join(r.dir, 'tiny-F32.gguf')).equals(readFileSync(src))).toBe(true);
      // The header's chunks the check read are the file's own: nothing is fetched twice.
      expect(served(repo, 'tiny-F32.gguf')).toBe(statSync(src).size);
    } finally {
      await store.close();
    }
  });
});

describe('POST /api/models/pull', () => {
  it('answers a refused model with 422 model_not_loadable and the reason, not a 502', async () => {
    const repo = 'test/llama-awq';
    const store = new ModelStore(join(work, 'store-http'), new HubClient({ endpoint: hub.url }));
    const app = Fastify();
    modelRoutes(app, { pull: (r: string) => store.pull(r) } as unknown as Serving);
    try {
      const res = await app.inject({ method: 'POST', url: '/api/models/pull', payload: { repo } });
      expect(res.statusCode).toBe(422);
      const body = res.json() as { error: { code: string; message: string } };
      expect(body.error.code).toBe('model_not_loadable');
      expect(body.error.message).toMatch(/test\/llama-awq: Orchard cannot run this model: .*quant_method "awq" is not supported/);
    } finally {
      await app.close();
      await store.close();
    }
  });
});
