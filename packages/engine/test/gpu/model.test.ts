/**
 * End to end: generate() over the GPU model gives the same greedy tokens as over the CPU in-process
 * model (reference backend), unsplit and as 2 pipeline stages × 2 tensor ranks, with a prompt longer
 * than one batch.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadInProcessModel } from '../../src/drivers/in-process.js';
import { generate } from '../../src/generate/generate.js';
import type { GpuContext } from '../../src/kernels/gpu/context.js';
import { loadGpuModel } from '../../src/kernels/gpu/model.js';
import { writeRandomModel, type RandomModelOptions } from '../../src/testing/index.js';
import { openTestGpu } from './gpu-env.js';

const gpu = await openTestGpu();
const ctx = gpu.ctx as GpuContext;
const root = mkdtempSync(join(tmpdir(), 'orchard-gpu-model-'));
afterAll(() => {
  gpu.ctx?.destroy();
  rmSync(root, { recursive: true, force: true });
});

const prompt = Array.from({ length: 37 }, (_, i) => (i * 37 + 11) % 256);
const CASES: [string, RandomModelOptions, { pipeline?: number; tensor?: number }][] = [
  ['llama f16, unsplit', { variant: 'llama', dtype: 'f16' }, {}],
  ['qwen3, unsplit', { variant: 'qwen3' }, {}],
  ['qwen2, 2 stages x 2 ranks', { variant: 'qwen2', numLayers: 4 }, { pipeline: 2, tensor: 2 }],
  ['llama tied f16, 2 ranks (rank 0 embeds; its head is the table’s leading rows)', { variant: 'llama', tiedEmbeddings: true, dtype: 'f16' }, { tensor: 2 }],
];

describe.skipIf(!gpu.ctx)(`GPU model: generate() equals the CPU${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  for (const [name, opts, split] of CASES) {
    it(`${name}: 24 greedy tokens after a 37-token prompt`, async () => {
      const dir = join(root, name.replace(/\W+/g, '-'));
      writeRandomModel(dir, { numLayers: 3, seed: 11, ...opts });
      const cpu = loadInProcessModel(dir, { maxBatch: 16, maxSeqLen: 128 });
      const want = await generate(cpu, prompt, { maxTokens: 24, temperature: 0, stopTokenIds: [] });
      const model = await loadGpuModel(dir, { context: ctx, maxBatch: 16, maxSeqLen: 128, ...split });
      try {
        const got = await generate(model, prompt, { maxTokens: 24, temperature: 0, stopTokenIds: [] });
        expect(got.tokens).toHaveLength(24);
        expect(got.tokens).toEqual(want.tokens);
      } finally {
        model.dispose();
        cpu.dispose();
      }
    });
  }
});
