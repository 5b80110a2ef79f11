/**
 * mlx-lm MoE conversions (testing/mlx-moe-model.ts: stacked `switch_mlp` experts MLX-quantized, the
 * router by the model's predicate, both MLA forms, gpt-oss's experts in mode mxfp4) on the GPU (lavapipe here): greedy tokens equal the
 * float reference's (the F32 model of the same dequantized values, CPU reference backend) unsplit, as 2
 * pipeline stages and as 2 tensor / expert ranks.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { GpuContext } from '../../src/kernels/gpu/context.js';
import { loadGpuModel } from '../../src/kernels/gpu/model.js';
import { loadInProcessModel } from '../../src/drivers/in-process.js';
import { generate } from '../../src/generate/generate.js';
import { writeMlxMoeModel, writeRandomModel, type MlxMoeModelOptions, type RandomModelOptions } from '../../src/testing/index.js';
import { openTestGpu } from './gpu-env.js';

const gpu = await openTestGpu();
const ctx = gpu.ctx as GpuContext;
const root = mkdtempSync(join(tmpdir(), 'orchard-gpu-mlx-moe-'));
afterAll(() => {
  gpu.ctx?.destroy();
  rmSync(root, { recursive: true, force: true });
});

const PROMPT = [5, 77, 130, 9, 201, 33, 64, 12];
const STEPS = 6;
const MLA = { kvLoraRank: 64, nopeDim: 32, ropeDim: 8, vDim: 32 };
const CASES: [string, RandomModelOptions, Omit<MlxMoeModelOptions, 'referenceDir'>][] = [
  ['qwen3-moe 4-bit g32, switch_mlp, router 8-bit g64', { variant: 'qwen3-moe', numLayers: 3, hiddenSize: 64, moeIntermediateSize: 64, numExperts: 8, dtype: 'bf16', seed: 31 }, { bits: 4, groupSize: 32, maxShardBytes: 40_000 }],
  ['deepseek-v3 4-bit g32, MLA as embed_q / unembed_out', { variant: 'deepseek-v3', numLayers: 3, hiddenSize: 64, numHeads: 4, moeIntermediateSize: 64, intermediateSize: 64, numExperts: 8, mlaDims: MLA, dtype: 'bf16', seed: 32 }, { bits: 4, groupSize: 32, mla: 'embed_q' }],
  ['gpt-oss, experts MXFP4 (mode mxfp4), the rest 4-bit g32', { variant: 'gpt-oss', numLayers: 2, hiddenSize: 64, intermediateSize: 32, numExperts: 4, dtype: 'bf16', seed: 34 }, { bits: 4, groupSize: 32 }],
  ['kimi-k2 layout 8-bit g32, MLA as packed kv_b_proj', { variant: 'deepseek-v3', kimiLayout: true, numLayers: 2, hiddenSize: 64, numHeads: 4, moeIntermediateSize: 64, intermediateSize: 64, numExperts: 8, mlaDims: MLA, dtype: 'bf16', seed: 33 }, { bits: 8, groupSize: 32, mla: 'kv_b_proj' }],
];

describe.skipIf(!gpu.ctx)(`mlx-lm MoE conversions on the GPU${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  for (const [name, model, mlx] of CASES) {
    it(`${name}: greedy tokens equal the float reference, unsplit, PP-2 and TP-2`, async () => {
      const dir = join(root, name.replace(/\W+/g, '-'));
      writeRandomModel(`${dir}-hf`, model);
      writeMlxMoeModel(`${dir}-hf`, `${dir}-mlx`, { ...mlx, referenceDir: `${dir}-ref` });
      const cpu = loadInProcessModel(`${dir}-ref`, { maxBatch: 16, maxSeqLen: 64 });
      const want = (await generate(cpu, PROMPT, { maxTokens: STEPS, temperature: 0, stopTokenIds: [] })).tokens;
      cpu.dispose();
      for (const split of [{}, { pipeline: 2 }, { tensor: 2 }]) {
        const m = await loadGpuModel(`${dir}-mlx`, { context: ctx, maxBatch: 16, maxSeqLen: 64, ...split });
        try {
          const got = await generate(m, PROMPT, { maxTokens: STEPS, temperature: 0, stopTokenIds: [] });
          expect(got.tokens, JSON.stringify(split)).toEqual(want);
        } finally {
          m.dispose();
        }
      }
    }, 240_000);
  }
});
