/**
 * The GPU shard runner against the engine's CPU forward pass (reference backend) on random models of
 * each architecture variant: logits after a prompt batch and after decode steps, greedy tokens picked on
 * the GPU, a two-stage pipeline split and a two-rank tensor split.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createInProcessAllReduce } from '../../src/drivers/all-reduce.js';
import type { GpuContext } from '../../src/kernels/gpu/context.js';
import { GpuShard } from '../../src/kernels/gpu/shard.js';
import { loadShard, type ModelShard } from '../../src/model/forward.js';
import { joinLogitSlices, vocabSlice } from '../../src/model/tensor-split.js';
import { writeRandomModel, type RandomModelOptions } from '../../src/testing/index.js';
import type { ShardSpec } from '../../src/shard.js';
import { cpuGreedyRun, logitError } from './cpu-ref.js';
import { openTestGpu } from './gpu-env.js';

const gpu = await openTestGpu();
const ctx = gpu.ctx as GpuContext;
const root = mkdtempSync(join(tmpdir(), 'orchard-gpu-shard-'));
afterAll(() => {
  gpu.ctx?.destroy();
  rmSync(root, { recursive: true, force: true });
});

const full = (layers: number): ShardSpec => ({ layers: [0, layers], tensor: { rank: 0, size: 1 }, embed: true, head: true });
const PROMPT = [72, 101, 108, 108, 111, 44, 32, 119, 111];
const STEPS = 6;

function gpuFrom(cpu: ModelShard, extra: { allReduce?: (b: Float32Array) => Promise<void> } = {}) {
  return GpuShard.create(ctx, { config: cpu.config, spec: cpu.spec, slice: cpu.slice, weights: cpu.weights, maxBatch: 16, maxSeqLen: 64, ...extra });
}

const VARIANTS: [string, RandomModelOptions][] = [
  ['llama GQA f32', { variant: 'llama' }],
  ['llama3 rope scaling, tied embeddings, f16', { variant: 'llama3', tiedEmbeddings: true, dtype: 'f16' }],
  ['mistral bf16', { variant: 'mistral', dtype: 'bf16' }],
  ['qwen2 q/k/v bias', { variant: 'qwen2' }],
  ['qwen3 q/k norm, head_dim 32', { variant: 'qwen3', numLayers: 2 }],
];

describe.skipIf(!gpu.ctx)(`GPU shard vs CPU forward${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  for (const [name, opts] of VARIANTS) {
    it(`${name}: logits after a prompt batch and decode steps, and GPU greedy tokens`, async () => {
      const dir = join(root, name.replace(/\W+/g, '-'));
      const info = writeRandomModel(dir, { numLayers: 3, seed: 7, ...opts });
      const layers = info.config.num_hidden_layers as number;
      const cpu = loadShard(dir, full(layers), { maxBatch: 16, maxSeqLen: 64 });
      const want = await cpuGreedyRun(cpu, PROMPT, STEPS);
      const g = await gpuFrom(cpu);
      try {
        // Logits, fed the CPU's tokens so both see the same sequence.
        const cache = await g.newCache(64);
        let l = await g.forward({ tokens: PROMPT }, cache);
        expect(g.lastCall.submissions).toBe(1);
        for (let s = 0; s < STEPS; s++) {
          expect(logitError(l, want.logits[s])).toBeLessThan(2e-5);
          l = await g.forward({ tokens: [want.tokens[s]] }, cache);
        }
        // Greedy tokens chosen on the GPU, only the token id read back.
        const c2 = await g.newCache(64);
        const got: number[] = [await g.forwardSample(PROMPT, c2)];
        for (let s = 1; s < STEPS; s++) got.push(await g.forwardSample([got[s - 1]], c2));
        expect(g.lastCall.readbackBytes).toBe(8);
        expect(got).toEqual(want.tokens);
        c2.destroy();
        cache.destroy();
      } finally {
        g.dispose();
      }
    });
  }

  it('bad calls fail clearly: token outside the vocabulary, cache overflow, concurrent calls on one shard', async () => {
    const dir = join(root, 'errors');
    writeRandomModel(dir, { numLayers: 1, seed: 5 });
    const cpu = loadShard(dir, full(1), { maxBatch: 16, maxSeqLen: 64 });
    const g = await gpuFrom(cpu);
    try {
      const cache = await g.newCache(4);
      await expect(g.forward({ tokens: [1, 99999] }, cache)).rejects.toThrow(/token id 99999 is outside the vocabulary 0\.\.263/);
      await expect(g.forward({ tokens: [1, 2, 3, 4, 5] }, cache)).rejects.toThrow(/sequence of 5 tokens exceeds the KV cache capacity 4/);
      const first = g.forward({ tokens: [1, 2] }, cache);
      await expect(g.forward({ tokens: [3] }, cache)).rejects.toThrow(/already running on this shard/);
      await first;
      expect(cache.length).toBe(2);
    } finally {
      g.dispose();
    }
  });

  it('pipeline split (2 stages: hidden states cross) and tensor split (2 ranks: all-reduce) equal the unsplit CPU run', async () => {
    const dir = join(root, 'splits');
    writeRandomModel(dir, { variant: 'qwen2', numLayers: 3, numHeads: 4, numKvHeads: 2, seed: 3 });
    const whole = loadShard(dir, full(3), { maxBatch: 16, maxSeqLen: 64 });
    const { vocabSize: V, hiddenSize: D } = whole.config;
    const want = await cpuGreedyRun(whole, PROMPT, STEPS);

    const s0 = await gpuFrom(loadShard(dir, { layers: [0, 1], tensor: { rank: 0, size: 1 }, embed: true, head: false }, { maxBatch: 16, maxSeqLen: 64 }));
    const s1 = await gpuFrom(loadShard(dir, { layers: [1, 3], tensor: { rank: 0, size: 1 }, embed: false, head: true }, { maxBatch: 16, maxSeqLen: 64 }));
    const reduces = createInProcessAllReduce(2);
    const ranks = await Promise.all(
      [0, 1].map((rank) =>
        gpuFrom(loadShard(dir, { layers: [0, 3], tensor: { rank, size: 2 }, embed: true, head: true }, { maxBatch: 16, maxSeqLen: 64, allReduce: reduces[rank] }), {
          allReduce: reduces[rank],
        }),
      ),
    );
    try {
      await expect(ranks[1].forward({ tokens: PROMPT }, await ranks[1].newCache(64))).rejects.toThrow(/tensor rank 1 of the first stage holds no embedding/);
      const c0 = await s0.newCache(64);
      const c1 = await s1.newCache(64);
      const rc = await Promise.all(ranks.map((r) => r.newCache(64)));
      let feed: number[] = PROMPT;
      for (let s = 0; s < STEPS; s++) {
        const hidden = new Float32Array(await s0.forward({ tokens: feed }, c0));
        const piped = await s1.forward({ hidden, n: feed.length }, c1);
        expect(logitError(piped, want.logits[s])).toBeLessThan(2e-5);
        // Rank 0 embeds (one submission, n·hidden floats back) and both ranks take its rows.
        const rows = await ranks[0].embed(feed);
        expect(ranks[0].lastCall).toMatchObject({ submissions: 1, readbackBytes: feed.length * D * 4, dispatches: 1 });
        const slices = await Promise.all(ranks.map((r, i) => r.forward({ hidden: rows, n: feed.length }, rc[i])));
        expect(slices.map((x) => x.length)).toEqual(ranks.map((_, rank) => vocabSlice(V, rank, 2)).map(([a, b]) => b - a));
        expect(logitError(joinLogitSlices(new Float32Array(V), slices), want.logits[s])).toBeLessThan(2e-5);
        // 3 layers x (o_proj, down_proj) all-reduces, then the logits: 3·2 + 1 submissions; no all-reduce for embedding or logits.
        expect(ranks[0].lastCall.submissions).toBe(3 * 2 + 1);
        feed = [want.tokens[s]];
      }
    } finally {
      for (const s of [s0, s1, ...ranks]) s.dispose();
    }
  });
});
