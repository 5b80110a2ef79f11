/**
 * A GGUF model in the store is served by the pod like a Hugging Face directory: two daemons in this
 * process each hold the same .gguf (written by the engine's hfToGguf from a random model, a dense
 * llama and a Qwen3 MoE), the catalog lists it, placement splits it as a 2-stage pipeline, the
 * runners load their stage from the .gguf and the tokenizer comes from its metadata: a completion
 * equals the in-process engine's greedy text of the same file.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hfToGguf } from '@orchard/engine/gguf';
import { writeRandomModel, type RandomModelOptions } from '@orchard/engine/testing';
import { api, greedyText, startServingPair, waitFor } from './in-process-pod.js';

const prompt = 'In the beginning';
const scratch = mkdtempSync(join(os.tmpdir(), 'orchard-gguf-src-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The random model as llama.cpp's converter lays it out, the only file in the store's directory. */
function writeGguf(modelDir: string, options: RandomModelOptions): void {
  const src = mkdtempSync(join(scratch, 'hf-'));
  writeRandomModel(src, options);
  hfToGguf(src, join(modelDir, 'rand-F32.gguf'), { dtype: 'f32' });
}

const MODELS: Record<string, { repo: string; options: RandomModelOptions }> = {
  llama: { repo: 'test/rand-llama-GGUF', options: { numLayers: 4, hiddenSize: 64, seed: 7, maxPositionEmbeddings: 256 } },
  'qwen3 MoE': { repo: 'test/rand-qwen3moe-GGUF', options: { variant: 'qwen3-moe', mlpOnlyLayers: [], numLayers: 4, seed: 8, maxPositionEmbeddings: 256 } },
};

describe.each(Object.entries(MODELS))('a %s GGUF on a 2-daemon pod', (_, { repo, options }) => {
  it('is listed, placed as a 2-stage pipeline and answers with the unsplit greedy text', async () => {
    const { daemons, modelDir, stop } = await startServingPair('orchard-serve-gguf-', { repo, options, write: writeGguf });
    try {
      expect(readdirSync(modelDir).filter((f) => f.endsWith('.json'))).toEqual([]);
      const models = (await (await api(daemons[0], '/v1/models')).json()) as { data: { id: string }[] };
      expect(models.data.map((m) => m.id)).toContain(repo);
      const placed = await api(daemons[1], '/api/instances', { method: 'POST', body: JSON.stringify({ model: repo, strategy: 'pipeline', nodes: 2 }) });
      const body = (await placed.json()) as any;
      expect(placed.status, JSON.stringify(body)).toBe(201);
      expect(body.instance.strategy).toBe('pipeline');
      expect(new Set(body.instance.nodes).size).toBe(2);
      await waitFor('the instance ready on the other daemon', async () => {
        const l = (await (await api(daemons[0], '/api/instances')).json()) as any;
        return l.instances.find((i: any) => i.id === body.instance.id)?.status.ready || undefined;
      }, 20_000, 200);
      const want = await greedyText(join(modelDir, 'rand-F32.gguf'), prompt, 12);
      expect(want.length).toBeGreaterThan(0);
      for (const d of daemons) {
        const res = await api(d, '/v1/completions', { method: 'POST', body: JSON.stringify({ model: repo, prompt, max_tokens: 12, temperature: 0 }) });
        const out = (await res.json()) as any;
        expect(res.status, JSON.stringify(out)).toBe(200);
        expect(out.choices[0].text).toBe(want);
      }
    } finally {
      await stop();
    }
  }, 90_000);
});
