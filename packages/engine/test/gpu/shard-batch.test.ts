/**
 * GpuShard.forwardBatch (several sequences' rows in one step) against the engine's CPU forwardBatch
 * on the same steps: mixed steps (prompt chunks next to decode rows, different positions, a segment
 * asking for all its rows' logits), the caches continuing alone afterwards, a step of decode rows
 * giving each row exactly the bits of its own decode, and the pipeline and tensor splits.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createInProcessAllReduce } from '../../src/drivers/all-reduce.js';
import type { GpuContext } from '../../src/kernels/gpu/context.js';
import { GpuShard, type GpuKVCache, type GpuShardOptions } from '../../src/kernels/gpu/shard.js';
import { loadShard, type KVCache, type ModelShard } from '../../src/model/forward.js';
import { joinLogitSlices } from '../../src/model/tensor-split.js';
import { argmax } from '../../src/generate/sampler.js';
import { writeRandomModel, type RandomModelOptions } from '../../src/testing/index.js';
import type { ShardSpec } from '../../src/shard.js';
import { logitError } from './cpu-ref.js';
import { openTestGpu } from './gpu-env.js';

const gpu = await openTestGpu();
const ctx = gpu.ctx as GpuContext;
const root = mkdtempSync(join(tmpdir(), 'orchard-gpu-batch-'));
afterAll(() => {
  gpu.ctx?.destroy();
  rmSync(root, { recursive: true, force: true });
});

const full = (layers: number): ShardSpec => ({ layers: [0, layers], tensor: { rank: 0, size: 1 }, embed: true, head: true });
const OPTS = { maxBatch: 16, maxSeqLen: 64 };
const PROMPTS = [
  [72, 101, 108, 108, 111, 44, 32, 119, 111],
  [3, 14, 15, 92, 65],
  [27, 18, 28],
  [1, 41, 42, 13, 56, 200, 7],
];
const TOL = 2e-5;

/** One sequence's rows in a step: prompt tokens [from, to), or (to omitted) its next greedy token. */
type Part = { seq: number; from?: number; to?: number; allLogits?: boolean };
/** Prompt chunks next to decode rows at different positions, then steps of decode rows only. */
const SCHEDULE: Part[][] = [
  [{ seq: 0, from: 0, to: 9 }, { seq: 1, from: 0, to: 3 }],
  [{ seq: 0 }, { seq: 1, from: 3, to: 5 }, { seq: 2, from: 0, to: 3, allLogits: true }],
  [{ seq: 0 }, { seq: 1 }, { seq: 2 }, { seq: 3, from: 0, to: 4 }],
  [{ seq: 0 }, { seq: 1 }, { seq: 2 }, { seq: 3, from: 4, to: 7 }],
  [{ seq: 0 }, { seq: 1 }, { seq: 2 }, { seq: 3 }],
  [{ seq: 3 }, { seq: 1 }, { seq: 0 }, { seq: 2 }],
];

/** The CPU's steps: per step, each segment's tokens and logits (its greedy token is fed next). */
async function cpuSchedule(cpu: ModelShard, caches: KVCache[]): Promise<{ tokens: number[][][]; logits: Float32Array[][] }> {
  const next: number[] = [];
  const tokens: number[][][] = [];
  const logits: Float32Array[][] = [];
  for (const step of SCHEDULE) {
    const toks = step.map((p) => (p.to === undefined ? [next[p.seq]] : PROMPTS[p.seq].slice(p.from, p.to)));
    const outs = await cpu.forwardBatch(step.map((p, i) => ({ input: { tokens: toks[i] }, cache: caches[p.seq], allLogits: p.allLogits })));
    const V = cpu.config.vocabSize;
    step.forEach((p, i) => (next[p.seq] = argmax(outs[i].subarray(outs[i].length - V))));
    tokens.push(toks);
    logits.push(outs.map((o) => Float32Array.from(o)));
  }
  return { tokens, logits };
}

/** Each segment's logits within TOL of the CPU's (row by row with allLogits), and the same greedy token. */
function expectClose(got: Float32Array, want: Float32Array, V: number): void {
  expect(got.length).toBe(want.length);
  for (let r = 0; r < want.length / V; r++) {
    const g = got.subarray(r * V, (r + 1) * V);
    const w = want.subarray(r * V, (r + 1) * V);
    expect(logitError(g, w)).toBeLessThan(TOL);
    expect(argmax(g)).toBe(argmax(w));
  }
}

const VARIANTS: [string, RandomModelOptions, GpuShardOptions['batchKernels']?][] = [
  ['llama GQA f32', { variant: 'llama' }],
  ['llama GQA f32, kernels chosen by the step (tiled matmul for decode steps)', { variant: 'llama' }, 'step'],
  ['qwen3 q/k norm, f16', { variant: 'qwen3', numLayers: 2, dtype: 'f16' }],
  ['gpt-oss (mixture of experts, sinks, sliding/full layers, yarn)', { variant: 'gpt-oss' }],
  // Latent attention runs the step's sequences one after another (forwardBatch's doc).
  ['deepseek-v3 (latent attention, experts)', { variant: 'deepseek-v3' }],
];

describe.skipIf(!gpu.ctx)(`GpuShard.forwardBatch${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  for (const [name, opts, batchKernels] of VARIANTS) {
    it(`${name}: mixed steps equal the CPU's forwardBatch, and the caches continue alone`, async () => {
      const dir = join(root, name.replace(/\W+/g, '-'));
      const info = writeRandomModel(dir, { numLayers: 3, seed: 11, ...opts });
      const cpu = loadShard(dir, full(info.config.num_hidden_layers as number), OPTS);
      const V = cpu.config.vocabSize;
      const cpuCaches = PROMPTS.map(() => cpu.newCache(64));
      const want = await cpuSchedule(cpu, cpuCaches);
      const g = await GpuShard.create(ctx, { config: cpu.config, spec: cpu.spec, slice: cpu.slice, weights: cpu.weights, ...OPTS, batchKernels });
      try {
        const caches = await Promise.all(PROMPTS.map(() => g.newCache(64)));
        // The same segments run one per call: with each segment's own kernels ('sequence'), the same bits.
        const solo = await Promise.all(PROMPTS.map(() => g.newCache(64)));
        for (let s = 0; s < SCHEDULE.length; s++) {
          const step = SCHEDULE[s];
          const outs = await g.forwardBatch(step.map((p, i) => ({ input: { tokens: want.tokens[s][i] }, cache: caches[p.seq], allLogits: p.allLogits })));
          // Decode rows next to prompt chunks: one pass of each kind (latent attention: one per sequence).
          // (a segment asking for every row's logits runs as decode rows: EXACT_ROWS_MAX)
          const kinds = new Set(want.tokens[s].map((t, i) => t.length > 2 && !step[i].allLogits)).size;
          expect(g.lastCall.submissions).toBe(batchKernels === 'step' ? 1 : name.startsWith('deepseek') ? step.length : kinds);
          outs.forEach((o, i) => expectClose(o, want.logits[s][i], V));
          for (const [i, p] of step.entries()) {
            const [one] = await g.forwardBatch([{ input: { tokens: want.tokens[s][i] }, cache: solo[p.seq], allLogits: p.allLogits }]);
            if (batchKernels !== 'step') expect(outs[i], `step ${s}, sequence ${p.seq}`).toEqual(one);
          }
        }
        expect(caches.map((c) => c.length)).toEqual(cpuCaches.map((c) => c.length));
        // Each cache goes on alone: its history was written by the batched steps.
        for (let q = 0; q < PROMPTS.length; q++) {
          const t = [5 + q, 9 + q];
          expectClose(await g.forward({ tokens: t }, caches[q]), Float32Array.from(await cpu.forward({ tokens: t }, cpuCaches[q])), V);
        }
        for (const c of caches) c.destroy();
        await expect(g.forwardBatch([{ input: { tokens: [1] }, cache: caches[0] }])).rejects.toThrow(/KV cache was destroyed/);
      } finally {
        g.dispose();
      }
    });
  }

  it('a step of decode rows gives each row the bits of its own decode, in one submission with fewer dispatches', async () => {
    const dir = join(root, 'exact');
    writeRandomModel(dir, { variant: 'llama3', numLayers: 3, dtype: 'f16', seed: 4 });
    const cpu = loadShard(dir, full(3), OPTS);
    const g = await GpuShard.create(ctx, { config: cpu.config, spec: cpu.spec, slice: cpu.slice, weights: cpu.weights, ...OPTS });
    try {
      const alone = await Promise.all(PROMPTS.map(() => g.newCache(64)));
      const batched = await Promise.all(PROMPTS.map(() => g.newCache(64)));
      const next: number[] = [];
      for (let q = 0; q < PROMPTS.length; q++) {
        const a = await g.forward({ tokens: PROMPTS[q] }, alone[q]);
        const b = await g.forward({ tokens: PROMPTS[q] }, batched[q]);
        expect(b).toEqual(a);
        next.push(argmax(a));
      }
      for (let s = 0; s < 4; s++) {
        const one: Float32Array[] = [];
        let dispatches = 0;
        for (let q = 0; q < PROMPTS.length; q++) {
          one.push(Float32Array.from(await g.forward({ tokens: [next[q]] }, alone[q])));
          dispatches += g.lastCall.dispatches;
        }
        const many = await g.forwardBatch(PROMPTS.map((_, q) => ({ input: { tokens: [next[q]] }, cache: batched[q] })));
        expect(g.lastCall.submissions).toBe(1);
        expect(g.lastCall.dispatches).toBeLessThan(dispatches);
        for (let q = 0; q < PROMPTS.length; q++) {
          expect(many[q]).toEqual(one[q]);
          next[q] = argmax(one[q]);
        }
      }
    } finally {
      g.dispose();
    }
  });

  it("a draft's check (every row's logits) gives each row its 1-token decode bits, and a cache cut back continues as plain decode", async () => {
    const dir = join(root, 'draft-check');
    writeRandomModel(dir, { variant: 'llama3', numLayers: 3, dtype: 'f16', seed: 6 });
    const cpu = loadShard(dir, full(3), OPTS);
    const V = cpu.config.vocabSize;
    const g = await GpuShard.create(ctx, { config: cpu.config, spec: cpu.spec, slice: cpu.slice, weights: cpu.weights, ...OPTS });
    try {
      const toks = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33];
      const plain = await g.newCache(64);
      const decoded: Float32Array[] = [];
      for (const t of toks) decoded.push(Float32Array.from(await g.forward({ tokens: [t] }, plain)));
      const spec = await g.newCache(64);
      for (const t of toks.slice(0, 4)) await g.forward({ tokens: [t] }, spec);
      // 9 rows (a token and 8 drafted ones) beside another sequence's decode row, in one step
      const other = await g.newCache(64);
      await g.forward({ tokens: [5] }, other);
      const [check] = await g.forwardBatch([{ input: { tokens: toks.slice(4, 13) }, cache: spec, allLogits: true }, { input: { tokens: [6] }, cache: other }]);
      expect(g.lastCall.submissions).toBe(1);
      for (let r = 0; r < 9; r++) expect(check.subarray(r * V, (r + 1) * V), `row ${r}`).toEqual(decoded[4 + r]);
      // the check rejected from row 3 on: the cache is cut back, and the next rows are plain decode's
      spec.length = 7;
      for (let i = 7; i < toks.length; i++) expect(await g.forward({ tokens: [toks[i]] }, spec)).toEqual(decoded[i]);
      // a prompt chunk of the same length without allLogits takes the tiled matmul: other bits
      const chunk = await g.newCache(64);
      const tiled = await g.forward({ tokens: toks.slice(0, 9) }, chunk);
      expect(argmax(tiled)).toBe(argmax(decoded[8]));
    } finally {
      g.dispose();
    }
  });

  it("a destroyed cache frees its own dispatches' buffers, and the other caches run on", async () => {
    const dir = join(root, 'free');
    writeRandomModel(dir, { numLayers: 2, seed: 9 });
    const cpu = loadShard(dir, full(2), OPTS);
    const g = await GpuShard.create(ctx, { config: cpu.config, spec: cpu.spec, slice: cpu.slice, weights: cpu.weights, ...OPTS });
    try {
      const [a, b, c] = await Promise.all([g.newCache(64), g.newCache(64), g.newCache(64)]);
      const [cb, cc] = [cpu.newCache(64), cpu.newCache(64)];
      await g.forwardBatch([{ input: { tokens: PROMPTS[3] }, cache: a }, { input: { tokens: PROMPTS[1] }, cache: b }, { input: { tokens: PROMPTS[2] }, cache: c }]);
      await cpu.forwardBatch([{ input: { tokens: PROMPTS[1] }, cache: cb }, { input: { tokens: PROMPTS[2] }, cache: cc }]);
      // Two parameter buffers per layer (RoPE + KV append, attention).
      expect(a.owned.length).toBe(2 * 2);
      a.destroy();
      expect(a.owned.length).toBe(0);
      const got = await g.forwardBatch([{ input: { tokens: [7] }, cache: b }, { input: { tokens: [8] }, cache: c }]);
      const want = await cpu.forwardBatch([{ input: { tokens: [7] }, cache: cb }, { input: { tokens: [8] }, cache: cc }]);
      got.forEach((o, i) => expectClose(o, Float32Array.from(want[i]), cpu.config.vocabSize));
    } finally {
      g.dispose();
    }
  });

  it('bad steps fail clearly: a cache twice, token ids mixed with hidden rows, more rows than maxBatch', async () => {
    const dir = join(root, 'errors');
    writeRandomModel(dir, { numLayers: 1, seed: 5 });
    const cpu = loadShard(dir, full(1), OPTS);
    const g = await GpuShard.create(ctx, { config: cpu.config, spec: cpu.spec, slice: cpu.slice, weights: cpu.weights, ...OPTS });
    try {
      const [a, b] = await Promise.all([g.newCache(64), g.newCache(64)]);
      await expect(g.forwardBatch([])).rejects.toThrow(/no sequences in the step/);
      await expect(g.forwardBatch([{ input: { tokens: [1] }, cache: a }, { input: { tokens: [2] }, cache: a }])).rejects.toThrow(/a KV cache appears twice/);
      const hidden = new Float32Array(cpu.config.hiddenSize);
      await expect(g.forwardBatch([{ input: { tokens: [1] }, cache: a }, { input: { hidden, n: 1 }, cache: b }])).rejects.toThrow(/token ids for every sequence or hidden states/);
      const many = Array.from({ length: 9 }, (_, i) => i + 1);
      await expect(g.forwardBatch([{ input: { tokens: many }, cache: a }, { input: { tokens: many }, cache: b }])).rejects.toThrow(/18 tokens per call; this shard takes 1\.\.16/);
      expect([a.length, b.length]).toEqual([0, 0]);
    } finally {
      g.dispose();
    }
  });

  it('pipeline split (2 stages) and tensor split (2 ranks, one all-reduce per point for all rows of a pass) equal the CPU', async () => {
    const dir = join(root, 'splits');
    writeRandomModel(dir, { variant: 'qwen2', numLayers: 3, numHeads: 4, numKvHeads: 2, seed: 3 });
    const whole = loadShard(dir, full(3), OPTS);
    const { vocabSize: V, hiddenSize: D } = whole.config;
    const cpuCaches = PROMPTS.map(() => whole.newCache(64));
    const want = await cpuSchedule(whole, cpuCaches);
    const on = (cpu: ModelShard, allReduce?: (b: Float32Array) => Promise<void>) =>
      GpuShard.create(ctx, { config: cpu.config, spec: cpu.spec, slice: cpu.slice, weights: cpu.weights, ...OPTS, allReduce });
    const s0 = await on(loadShard(dir, { layers: [0, 1], tensor: { rank: 0, size: 1 }, embed: true, head: false }, OPTS));
    const s1 = await on(loadShard(dir, { layers: [1, 3], tensor: { rank: 0, size: 1 }, embed: false, head: true }, OPTS));
    const reduces = createInProcessAllReduce(2);
    const ranks = await Promise.all([0, 1].map((rank) => on(loadShard(dir, { layers: [0, 3], tensor: { rank, size: 2 }, embed: true, head: true }, { ...OPTS, allReduce: reduces[rank] }), reduces[rank])));
    try {
      const stage0 = await Promise.all(PROMPTS.map(() => s0.newCache(64)));
      const stage1 = await Promise.all(PROMPTS.map(() => s1.newCache(64)));
      const rc: GpuKVCache[][] = await Promise.all(ranks.map((r) => Promise.all(PROMPTS.map(() => r.newCache(64)))));
      for (let s = 0; s < SCHEDULE.length; s++) {
        const step = SCHEDULE[s];
        const toks = want.tokens[s];
        // Pipeline: stage 0's hidden rows per sequence cross to stage 1 (allLogits there too, as the runner
        // sends a draft's check to every rank: without the head it only picks the decode rows' kernels).
        const hidden = (await s0.forwardBatch(step.map((p, i) => ({ input: { tokens: toks[i] }, cache: stage0[p.seq], allLogits: p.allLogits })))).map((h) => Float32Array.from(h));
        step.forEach((p, i) => expect(hidden[i].length).toBe(toks[i].length * D));
        const piped = await s1.forwardBatch(step.map((p, i) => ({ input: { hidden: hidden[i], n: toks[i].length }, cache: stage1[p.seq], allLogits: p.allLogits })));
        piped.forEach((o, i) => expectClose(o, want.logits[s][i], V));
        // Tensor: rank 0 embeds the step's tokens; both ranks take each sequence's rows.
        const rows = await ranks[0].embed(toks.flat());
        let at = 0;
        const segs = toks.map((t) => {
          at += t.length;
          return rows.subarray((at - t.length) * D, at * D);
        });
        const slices = await Promise.all(ranks.map((r, k) => r.forwardBatch(step.map((p, i) => ({ input: { hidden: segs[i], n: toks[i].length }, cache: rc[k][p.seq], allLogits: p.allLogits })))));
        // 3 layers x (o_proj, down_proj) all-reduces of every row of a pass, then the logits: 3·2 + 1
        // submissions per pass (decode rows and prompt chunks: one pass each).
        expect(ranks[0].lastCall.submissions).toBe((3 * 2 + 1) * new Set(toks.map((t, i) => t.length > 2 && !step[i].allLogits)).size);
        step.forEach((p, i) => {
          const rowsOf = want.logits[s][i].length / V;
          for (let r = 0; r < rowsOf; r++) {
            const parts = slices.map((sl) => sl[i].subarray((r * sl[i].length) / rowsOf, ((r + 1) * sl[i].length) / rowsOf));
            expectClose(joinLogitSlices(new Float32Array(V), parts), want.logits[s][i].subarray(r * V, (r + 1) * V), V);
          }
        });
      }
    } finally {
      for (const s of [s0, s1, ...ranks]) s.dispose();
    }
  });
});
