/**
 * A GGUF model in the store is served by the pod like a Hugging Face directory: two daemons in this
 * process each hold the same .gguf (written by the engine's hfToGguf from a random model, a dense
 * llama and a Qwen3 MoE), the catalog lists it, placement splits it as a 2-stage pipeline and as tensor parallel 2
 * (the MoE's experts split as from its Hugging Face layout), the
 * runners load their stage from the .gguf and the tokenizer comes from its metadata: a completion
 * equals the in-process engine's greedy text of the same file. A node placed a stage of a GGUF its peer
 * pulled fetches the header and its stage's tensors by byte range, from the peer only.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hfToGguf, readGgufFile } from '@orchard/engine/gguf';
import { writeRandomModel, type RandomModelOptions } from '@orchard/engine/testing';
import { startFakeHub } from '../../../../test/harness/fake-hub.js';
import { chunkSizeFor } from '../../src/store/chunked/layout.js';
import { api, greedyText, startServingDaemon, startServingPair, waitFor } from './in-process-pod.js';

const prompt = 'In the beginning';
const scratch = mkdtempSync(join(os.tmpdir(), 'orchard-gguf-src-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The random model as llama.cpp's converter lays it out, the only file in the store's directory. */
function writeGguf(modelDir: string, options: RandomModelOptions): void {
  const src = mkdtempSync(join(scratch, 'hf-'));
  writeRandomModel(src, options);
  hfToGguf(src, join(modelDir, 'rand-F32.gguf'), { dtype: 'f32' });
}

const MODELS = {
  llama: { repo: 'test/rand-llama-GGUF', options: { numLayers: 4, hiddenSize: 64, seed: 7, maxPositionEmbeddings: 256 }, strategies: ['pipeline', 'tensor'] },
  'qwen3 MoE': { repo: 'test/rand-qwen3moe-GGUF', options: { variant: 'qwen3-moe', mlpOnlyLayers: [], numLayers: 4, seed: 8, maxPositionEmbeddings: 256 }, strategies: ['pipeline'] },
} satisfies Record<string, { repo: string; options: RandomModelOptions; strategies: ('pipeline' | 'tensor')[] }>;

/** Both GGUFs in both daemons' stores (the MoE beside the llama). */
function writeBoth(modelDir: string): void {
  writeGguf(modelDir, MODELS.llama.options);
  const moe = join(modelDir, '..', MODELS['qwen3 MoE'].repo.split('/')[1]);
  mkdirSync(moe, { recursive: true });
  writeGguf(moe, MODELS['qwen3 MoE'].options);
}

let pair: Awaited<ReturnType<typeof startServingPair>>;
beforeAll(async () => {
  pair = await startServingPair('orchard-serve-gguf-', { repo: MODELS.llama.repo, options: {}, write: writeBoth });
}, 60_000);
afterAll(() => pair?.stop());

describe.each(Object.entries(MODELS))('a %s GGUF on a 2-daemon pod', (_, { repo, strategies }) => {
  it(`is listed, placed (${strategies.join(', ')} over 2 nodes) and answers with the unsplit greedy text`, async () => {
    const { daemons } = pair;
    const modelDir = join(pair.modelDir, '..', repo.split('/')[1]);
    expect(readdirSync(modelDir).filter((f) => f.endsWith('.json'))).toEqual([]);
    const models = (await (await api(daemons[0], '/v1/models')).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toContain(repo);
    const want = await greedyText(join(modelDir, 'rand-F32.gguf'), prompt, 12);
    expect(want.length).toBeGreaterThan(0);
    for (const strategy of strategies) {
      const placed = await api(daemons[1], '/api/instances', { method: 'POST', body: JSON.stringify({ model: repo, strategy, nodes: 2 }) });
      const body = (await placed.json()) as any;
      expect(placed.status, JSON.stringify(body)).toBe(201);
      expect(body.instance.strategy).toBe(strategy);
      expect(new Set(body.instance.nodes).size).toBe(2);
      await waitFor('the instance ready on the other daemon', async () => {
        const l = (await (await api(daemons[0], '/api/instances')).json()) as any;
        return l.instances.find((i: any) => i.id === body.instance.id)?.status.ready || undefined;
      }, 20_000, 200);
      for (const d of daemons) {
        const res = await api(d, '/v1/completions', { method: 'POST', body: JSON.stringify({ model: repo, prompt, max_tokens: 12, temperature: 0 }) });
        const out = (await res.json()) as any;
        expect(res.status, `${strategy}: ${JSON.stringify(out)}`).toBe(200);
        expect(out.choices[0].text, strategy).toBe(want);
      }
      expect((await api(daemons[0], `/api/instances/${body.instance.id}`, { method: 'DELETE' })).status).toBe(204);
    }
  }, 90_000);
});

describe('a GGUF pulled by one node of a 2-daemon pod', () => {
  it('the other node, placed a pipeline stage, fetches the .gguf from its peer (not the hub) and serves', async () => {
    const hubDir = mkdtempSync(join(scratch, 'hub-'));
    writeGguf(hubDir, MODELS.llama.options);
    const hub = await startFakeHub({ 'test/pod-llama-GGUF': hubDir });
    const saved = process.env.HF_ENDPOINT;
    process.env.HF_ENDPOINT = hub.url;
    const a = await startServingDaemon({ tmpPrefix: 'orchard-serve-gguf-dl-', bootstrap: [] });
    const b = await startServingDaemon({ tmpPrefix: 'orchard-serve-gguf-dl-', bootstrap: [String(a.daemon.daemon.node.getMultiaddrs()[0])] });
    try {
      await waitFor('both nodes with profiles', () => [a, b].every((d) => d.daemon.daemon.cluster().nodes.length === 2) || undefined, 30_000, 100);
      const pull = await api(a.daemon, '/api/models/pull', { method: 'POST', body: JSON.stringify({ repo: 'test/pod-llama-GGUF' }) });
      expect(pull.status, await pull.clone().text()).toBe(200);
      const hubBytes = hub.servedBytes.get('rand-F32.gguf');
      const placed = await api(a.daemon, '/api/instances', { method: 'POST', body: JSON.stringify({ model: 'test/pod-llama-GGUF', strategy: 'pipeline', nodes: 2 }) });
      const body = (await placed.json()) as any;
      expect(placed.status, JSON.stringify(body)).toBe(201);
      await waitFor('the instance ready', async () => {
        const l = (await (await api(b.daemon, '/api/instances')).json()) as any;
        return l.instances.find((i: any) => i.id === body.instance.id)?.status.ready || undefined;
      }, 30_000, 200);
      expect(readdirSync(join(b.dataDir, 'models', 'test', 'pod-llama-GGUF'))).toContain('rand-F32.gguf');
      expect(hub.servedBytes.get('rand-F32.gguf')).toBe(hubBytes);
      // The other node holds its stage only: the header and its layers' tensors, by byte range, from the peer.
      const size = statSync(join(hubDir, 'rand-F32.gguf')).size;
      const held = JSON.parse(readFileSync(join(b.dataDir, 'models', 'test', 'pod-llama-GGUF', '.orchard-manifest.json'), 'utf8')).files['rand-F32.gguf'];
      expect(held.complete).toBe(false);
      // Whole tensors only where their chunks all arrived (a neighbour's small norm may share a chunk).
      const all = [...readGgufFile(join(hubDir, 'rand-F32.gguf')).tensors.keys()];
      expect((held.tensors as string[]).some((t) => t.startsWith('blk.'))).toBe(true);
      expect(all.filter((t) => t.startsWith('blk.') && !held.tensors.includes(t)).length).toBeGreaterThan(0);
      const chunks = readFileSync(join(b.dataDir, 'models', 'test', 'pod-llama-GGUF', '.orchard-chunks', 'rand-F32.gguf.log'), 'utf8').split('\n').filter((l) => /^\d+ [0-9a-f]{64}$/.test(l));
      expect(chunks.length).toBeGreaterThan(0);
      expect(chunks.length).toBeLessThan(Math.ceil(size / chunkSizeFor(size)));
      const want = await greedyText(join(hubDir, 'rand-F32.gguf'), prompt, 12);
      const res = await api(b.daemon, '/v1/completions', { method: 'POST', body: JSON.stringify({ model: 'test/pod-llama-GGUF', prompt, max_tokens: 12, temperature: 0 }) });
      const out = (await res.json()) as any;
      expect(res.status, JSON.stringify(out)).toBe(200);
      expect(out.choices[0].text).toBe(want);
      // Placed again as tensor parallel (every layer on both nodes): the stage's copy is completed
      // from the peer first, never read where its bytes are missing.
      expect((await api(a.daemon, `/api/instances/${body.instance.id}`, { method: 'DELETE' })).status).toBe(204);
      const tp = await api(a.daemon, '/api/instances', { method: 'POST', body: JSON.stringify({ model: 'test/pod-llama-GGUF', strategy: 'tensor', nodes: 2 }) });
      const tpBody = (await tp.json()) as any;
      expect(tp.status, JSON.stringify(tpBody)).toBe(201);
      await waitFor('the tensor-parallel instance ready', async () => {
        const l = (await (await api(b.daemon, '/api/instances')).json()) as any;
        return l.instances.find((i: any) => i.id === tpBody.instance.id)?.status.ready || undefined;
      }, 30_000, 200);
      const again = (await (await api(b.daemon, '/v1/completions', { method: 'POST', body: JSON.stringify({ model: 'test/pod-llama-GGUF', prompt, max_tokens: 12, temperature: 0 }) })).json()) as any;
      expect(again.choices?.[0]?.text, JSON.stringify(again)).toBe(want);
      expect(JSON.parse(readFileSync(join(b.dataDir, 'models', 'test', 'pod-llama-GGUF', '.orchard-manifest.json'), 'utf8')).files['rand-F32.gguf'].complete).toBe(true);
      expect(hub.servedBytes.get('rand-F32.gguf')).toBe(hubBytes);
    } finally {
      await Promise.all([a.daemon.stop(), b.daemon.stop()]);
      await hub.close();
      if (saved === undefined) delete process.env.HF_ENDPOINT;
      else process.env.HF_ENDPOINT = saved;
      for (const d of [a.dataDir, b.dataDir]) rmSync(d, { recursive: true, force: true });
    }
  }, 120_000);
});
