/**
 * Mixture-of-experts layers on the GPU (kernels/gpu/moe.ts, wgsl-moe.ts) against the engine's CPU
 * forward pass (reference backend): routing on the GPU with the torch tie rule (models with tied
 * router rows), the gathered-expert matvec over the chosen experts only, shared experts, dense layers
 * among sparse ones, a q8_0 GGUF, gpt-oss (attention sinks, alternating sliding/full layers, yarn,
 * biased router and experts, clamped SwiGLU), DeepSeek V3 / Kimi K2 (latent attention with the compressed
 * cache, grouped sigmoid routing, shared experts), and experts (and latent-attention heads) split over two
 * tensor ranks (each holding half, partial
 * sums all-reduced) — logits within 2e-5 of the logit scale and identical greedy tokens picked on the GPU.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createInProcessAllReduce } from '../../src/drivers/all-reduce.js';
import { hfToGguf } from '../../src/gguf/index.js';
import type { GpuContext } from '../../src/kernels/gpu/context.js';
import { GpuShard } from '../../src/kernels/gpu/shard.js';
import { loadShard, type ModelShard } from '../../src/model/forward.js';
import { joinLogitSlices } from '../../src/model/tensor-split.js';
import { writeRandomModel, type RandomModelOptions } from '../../src/testing/index.js';
import type { ShardSpec } from '../../src/shard.js';
import { cpuGreedyRun, logitError } from './cpu-ref.js';
import { openTestGpu } from './gpu-env.js';

const gpu = await openTestGpu();
const ctx = gpu.ctx as GpuContext;
const root = mkdtempSync(join(tmpdir(), 'orchard-gpu-moe-'));
afterAll(() => {
  gpu.ctx?.destroy();
  rmSync(root, { recursive: true, force: true });
});

const LAYERS = 3;
const spec = (rank = 0, size = 1): ShardSpec => ({ layers: [0, LAYERS], tensor: { rank, size }, embed: true, head: true });
const PROMPT = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108];
const STEPS = 6;

const gpuFrom = (cpu: ModelShard, allReduce?: (b: Float32Array) => Promise<void>) =>
  GpuShard.create(ctx, { config: cpu.config, spec: cpu.spec, slice: cpu.slice, weights: cpu.weights, maxBatch: 16, maxSeqLen: 64, allReduce });

const VARIANTS: [string, RandomModelOptions, boolean][] = [
  ['qwen3-moe (layer 1 dense), f16', { variant: 'qwen3-moe', dtype: 'f16' }, false],
  ['qwen3-moe top-3, tied router rows', { variant: 'qwen3-moe', routerTies: true, expertsPerToken: 3 }, false],
  ['mixtral bf16, tied router rows', { variant: 'mixtral', dtype: 'bf16', routerTies: true }, false],
  ['qwen3-moe from a q8_0 GGUF', { variant: 'qwen3-moe', mlpOnlyLayers: [], moeIntermediateSize: 64 }, true],
  ['gpt-oss (sinks, sliding/full layers, yarn, biased router and experts, clamped SwiGLU)', { variant: 'gpt-oss' }, false],
  ['gpt-oss bf16, tied router rows', { variant: 'gpt-oss', dtype: 'bf16', routerTies: true }, false],
  ['deepseek-v3 (MLA, yarn, grouped sigmoid routing, shared expert, dense layer 0)', { variant: 'deepseek-v3' }, false],
  ['deepseek-v3 plain q_proj, f16, tied router rows', { variant: 'deepseek-v3', qLoraRank: null, dtype: 'f16', routerTies: true }, false],
  ['kimi k2 layout (one expert group) from a q8_0 GGUF', { variant: 'deepseek-v3', kimiLayout: true }, true],
];

describe.skipIf(!gpu.ctx)(`GPU mixture of experts vs CPU forward${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  for (const [name, opts, q8] of VARIANTS) {
    it(`${name}: logits after a prompt batch and decode steps, and GPU greedy tokens`, async () => {
      const dir = join(root, name.replace(/\W+/g, '-'));
      writeRandomModel(dir, { numLayers: LAYERS, seed: 7, ...opts });
      let path = dir;
      if (q8) hfToGguf(dir, (path = join(dir, 'm.gguf')), { dtype: 'q8_0' });
      const cpu = loadShard(path, spec(), { maxBatch: 16, maxSeqLen: 64 });
      const want = await cpuGreedyRun(cpu, PROMPT, STEPS);
      const g = await gpuFrom(cpu);
      try {
        const cache = await g.newCache(64);
        let l = await g.forward({ tokens: PROMPT }, cache);
        expect(g.lastCall.submissions).toBe(1);
        for (let s = 0; s < STEPS; s++) {
          expect(logitError(l, want.logits[s]), `step ${s}`).toBeLessThan(2e-5);
          l = await g.forward({ tokens: [want.tokens[s]] }, cache);
        }
        const c2 = await g.newCache(64);
        const got: number[] = [await g.forwardSample(PROMPT, c2)];
        for (let s = 1; s < STEPS; s++) got.push(await g.forwardSample([got[s - 1]], c2));
        expect(got).toEqual(want.tokens);
        c2.destroy();
        cache.destroy();
      } finally {
        g.dispose();
      }
    });
  }

  it.each([
    ['qwen3-moe', { variant: 'qwen3-moe' }],
    ['deepseek-v3 (MLA by heads)', { variant: 'deepseek-v3' }],
  ] as [string, RandomModelOptions][])('%s, experts split over 2 tensor ranks: the joined logits equal the unsplit CPU run', async (name, opts) => {
    const dir = join(root, `tp-${name.replace(/\W+/g, '-')}`);
    writeRandomModel(dir, { numLayers: LAYERS, seed: 9, ...opts });
    const want = await cpuGreedyRun(loadShard(dir, spec(), { maxBatch: 16, maxSeqLen: 64 }), PROMPT, STEPS);
    const reduces = createInProcessAllReduce(2);
    const cpus = [0, 1].map((r) => loadShard(dir, spec(r, 2), { maxBatch: 16, maxSeqLen: 64, allReduce: reduces[r] }));
    const ranks = await Promise.all(cpus.map((c, r) => gpuFrom(c, reduces[r])));
    try {
      const caches = await Promise.all(ranks.map((g) => g.newCache(64)));
      const logits = new Float32Array(cpus[0].config.vocabSize);
      let feed = PROMPT;
      for (let s = 0; s < STEPS; s++) {
        const rows = await ranks[0].embed(feed);
        const slices = await Promise.all(ranks.map((g, i) => g.forward({ hidden: rows, n: feed.length }, caches[i])));
        expect(logitError(joinLogitSlices(logits, slices), want.logits[s]), `step ${s}`).toBeLessThan(2e-5);
        feed = [want.tokens[s]];
      }
    } finally {
      ranks.forEach((g) => g.dispose());
    }
  });
});
