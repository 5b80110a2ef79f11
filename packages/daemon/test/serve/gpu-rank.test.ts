/**
 * Runner ranks on the GPU (lavapipe here, a software adapter asked for explicitly): the drivers over a
 * simulated group with GPU shards give each sequence the greedy tokens the CPU in-process model gives
 * it alone, with four sequences in batched steps (GpuShard.forwardBatch) on a one-rank instance and on
 * a 2-stage × 2-rank layout; a chat's second turn reuses the first turn's K/V blocks kept on the device
 * (prefix cache, one rank and 2 × 2); a rank whose GPU cannot be opened falls back to the CPU and says so.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createReferenceBackend, generate, loadInProcessModel, pipelineStages } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { createSimGroup } from '../../src/runner/transport.js';
import { startRank } from '../../src/runner/local.js';
import { GpuRankShard, loadRankGpuShard, loadRankOn } from '../../src/runner/gpu-shard.js';
import type { InstanceLayout } from '@orchard/engine';
import { openTestGpu } from '../gpu-env.js';

const { ctx, skip } = await openTestGpu();

let dir: string;
const prompt = [1, 40, 50, 60, 70, 80, 90, 100, 110, 120];
beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-gpu-rank-'));
  writeRandomModel(dir, { numLayers: 4, hiddenSize: 64, numHeads: 4, numKvHeads: 2, seed: 7 });
});
afterAll(() => {
  ctx?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!ctx)(`runner ranks on the GPU${skip ? ` (skipped: ${skip})` : ''}`, () => {
  /** The CPU model's greedy tokens for each of `reqs` alone. */
  const alone = async (reqs: { promptIds: number[]; maxTokens: number }[]) => {
    const cpu = loadInProcessModel(dir, { maxBatch: 4 });
    const out: number[][] = [];
    for (const r of reqs) out.push((await generate(cpu, r.promptIds, { maxTokens: r.maxTokens, temperature: 0, stopTokenIds: [] })).tokens);
    return out;
  };
  const four = [
    { promptIds: prompt, maxTokens: 10 },
    { promptIds: prompt.slice(0, 3), maxTokens: 5 },
    { promptIds: [1, 200, 150, 100, 7], maxTokens: 8 },
    { promptIds: [9], maxTokens: 6 },
  ];
  /** Counts the sequences of each GPU step (the widest step seen). */
  const widestStep = (shard: GpuRankShard) => {
    const seen = { widest: 0 };
    const run = shard.gpu.forwardBatch.bind(shard.gpu);
    shard.gpu.forwardBatch = (segments) => {
      seen.widest = Math.max(seen.widest, segments.length);
      return run(segments);
    };
    return seen;
  };

  it('a one-rank GPU instance batches four sequences in its steps, each with its own tokens', async () => {
    const layout: InstanceLayout = { stages: pipelineStages(4, 1), tensor: 1 };
    const wants = await alone(four);
    const [group] = createSimGroup(1);
    const shard = await loadRankGpuShard(dir, layout, 0, group, { context: ctx!, maxBatch: 8, maxSeqLen: 64 });
    const steps = widestStep(shard);
    const driver = startRank(group, layout, shard as never).driver!;
    const outs = await Promise.all(four.map((r) => driver.generate({ ...r, stopTokenIds: [], temperature: 0 }, () => true)));
    expect(outs.map((o) => o.tokens)).toEqual(wants);
    expect(steps.widest).toBe(4);
    // The K/V stay on the device, and so do the prefix cache's blocks.
    expect((driver as { prefix?: { kvBlocks: unknown } | null }).prefix?.kvBlocks).toBe(shard.kvBlocks);
    await driver.stop();
    shard.dispose();
    await group.close();
  });

  it('2 stages x 2 tensor ranks on GPU shards equal the CPU model: two sequences in a row, then four batched', async () => {
    const layout: InstanceLayout = { stages: pipelineStages(4, 2), tensor: 2 };
    const wants = await alone(four);

    const groups = createSimGroup(4);
    const shards = await Promise.all(groups.map((g) => loadRankGpuShard(dir, layout, g.rank, g, { context: ctx!, maxBatch: 8, maxSeqLen: 64 })));
    const steps = shards.map(widestStep);
    const ranks = groups.map((g, i) => startRank(g, layout, shards[i] as never, { batch: { sequences: 4, prefixCacheBytes: 2 ** 20 } }));
    const driver = ranks[0].driver!;
    const first = await driver.generate({ ...four[0], stopTokenIds: [], temperature: 0 }, () => true);
    const second = await driver.generate({ ...four[1], stopTokenIds: [], temperature: 0 }, () => true);
    expect([first.tokens, second.tokens]).toEqual(wants.slice(0, 2));
    const outs = await Promise.all(four.map((r) => driver.generate({ ...r, stopTokenIds: [], temperature: 0 }, () => true)));
    expect(outs.map((o) => o.tokens)).toEqual(wants);
    // Each stage's ranks ran steps of several sequences (lanes split the four between the stages' turns).
    for (const s of steps) expect(s.widest).toBeGreaterThan(1);
    // GPU caches are handed back: none on the driver after its requests, at most one per slot elsewhere.
    expect(shards[0].liveCaches).toBe(0);
    for (const s of shards.slice(1)) expect(s.liveCaches).toBeLessThanOrEqual(driver.maxSequences);
    await driver.stop();
    await Promise.all(ranks.map((r) => r.done));
    await Promise.all(groups.map((g) => g.close()));
    for (const s of shards) s.dispose();
  });

  it('GPU ranks speculate: a draft checked on the device gives plain decode\'s tokens, one rank and 2 stages x 2 ranks', async () => {
    // a prompt whose continuation repeats it: the model's own greedy output, which cycles
    const [cycle] = await alone([{ promptIds: prompt, maxTokens: 24 }]);
    const repetitive = [...prompt, ...cycle];
    const [want] = await alone([{ promptIds: repetitive, maxTokens: 20 }]);
    for (const layout of [{ stages: pipelineStages(4, 1), tensor: 1 }, { stages: pipelineStages(4, 2), tensor: 2 }] as InstanceLayout[]) {
      const groups = createSimGroup(layout.stages.length * layout.tensor);
      const shards = await Promise.all(groups.map((g) => loadRankGpuShard(dir, layout, g.rank, g, { context: ctx!, maxBatch: 16, maxSeqLen: 64 })));
      // a step clock under which draft rows cost nothing, so the draft policy keeps drafting whatever
      // lavapipe's rows cost (this test is about drafts checked on the device, not whether they pay)
      let tick = 0;
      const stepClock = () => ++tick;
      const ranks = groups.map((g, i) => startRank(g, layout, shards[i] as never, { batch: { sequences: 4, prefixCacheBytes: 0, speculate: 'prompt-lookup' }, stepClock }));
      const driver = ranks[0].driver!;
      const [spec, plain] = await Promise.all([
        driver.generate({ promptIds: repetitive, maxTokens: 20, stopTokenIds: [], temperature: 0 }, () => true),
        driver.generate({ promptIds: four[2].promptIds, maxTokens: 8, stopTokenIds: [], temperature: 0, speculate: 'off' }, () => true),
      ]);
      expect(spec.tokens, `${layout.stages.length} stage(s) x ${layout.tensor}`).toEqual(want);
      expect(plain.tokens).toEqual((await alone([four[2]]))[0]);
      expect(spec.speculation!.accepted).toBeGreaterThan(0);
      await driver.stop();
      await Promise.all(ranks.map((r) => r.done));
      await Promise.all(groups.map((g) => g.close()));
      for (const s of shards) s.dispose();
    }
  });

  it("a chat's second turn reuses the first turn's K/V blocks on the device: cold tokens, only new tokens prefilled; one rank and 2 stages x 2 ranks", async () => {
    const turn1 = Array.from({ length: 40 }, (_, i) => (i * 37 + 5) % 250);
    const [reply] = await alone([{ promptIds: turn1, maxTokens: 8 }]);
    const turn2 = [...turn1, ...reply, 7, 8, 9, 10, 11];
    // a second chat sharing turn 1's first block only, then diverging
    const other = [...turn1.slice(0, 16), 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4];
    const [want2, wantOther] = await alone([{ promptIds: turn2, maxTokens: 8 }, { promptIds: other, maxTokens: 6 }]);
    for (const layout of [{ stages: pipelineStages(4, 1), tensor: 1 }, { stages: pipelineStages(4, 2), tensor: 2 }] as InstanceLayout[]) {
      const at = `${layout.stages.length} stage(s) x ${layout.tensor}`;
      const groups = createSimGroup(layout.stages.length * layout.tensor);
      const shards = await Promise.all(groups.map((g) => loadRankGpuShard(dir, layout, g.rank, g, { context: ctx!, maxBatch: 16, maxSeqLen: 128 })));
      const copied = shards.map((s) => {
        const seen = { out: 0, in: 0 };
        const [out, into] = [s.kvBlocks.copyOut.bind(s.kvBlocks), s.gpu.copyKvIn.bind(s.gpu)];
        s.kvBlocks.copyOut = (...a) => (seen.out++, out(...a));
        s.gpu.copyKvIn = (...a) => (seen.in++, into(...a));
        return seen;
      });
      const ranks = groups.map((g, i) => startRank(g, layout, shards[i] as never, { batch: { sequences: 4, prefixCacheBytes: 2 ** 20 } }));
      const driver = ranks[0].driver!;
      const first = await driver.generate({ promptIds: turn1, maxTokens: 8, stopTokenIds: [], temperature: 0 }, () => true);
      expect(first.tokens, at).toEqual(reply);
      expect(first.cachedPromptTokens ?? 0).toBe(0);
      const second = await driver.generate({ promptIds: turn2, maxTokens: 8, stopTokenIds: [], temperature: 0 }, () => true);
      expect(second.tokens, at).toEqual(want2);
      // turn 1 left 47 tokens: 2 whole blocks of 16 came back from the device, on every rank
      expect(second.cachedPromptTokens, at).toBe(32);
      for (const c of copied) expect(c.in, at).toBe(2);
      const diverging = await driver.generate({ promptIds: other, maxTokens: 6, stopTokenIds: [], temperature: 0 }, () => true);
      expect(diverging.tokens, at).toEqual(wantOther);
      expect(diverging.cachedPromptTokens, at).toBe(16);
      await driver.stop();
      await Promise.all(ranks.map((r) => r.done));
      // each rank kept every whole block it did not hold yet: 2 of turn 1, then turn 2's 3rd, the other chat's 2nd
      for (const c of copied) expect(c.out, at).toBe(4);
      await Promise.all(groups.map((g) => g.close()));
      for (const s of shards) s.dispose();
    }
  });

  it('a prefix-cache block that could not be made on the device fails the sequence that needs it, not silently', async () => {
    const layout: InstanceLayout = { stages: pipelineStages(4, 1), tensor: 1 };
    const [group] = createSimGroup(1);
    const shard = await loadRankGpuShard(dir, layout, 0, group, { context: ctx!, maxBatch: 16, maxSeqLen: 64 });
    shard.gpu.copyKvOut = () => Promise.reject(new Error('out of GPU memory'));
    const driver = startRank(group, layout, shard as never, { batch: { sequences: 2, prefixCacheBytes: 2 ** 20 } }).driver!;
    const turn1 = Array.from({ length: 20 }, (_, i) => i + 3);
    await driver.generate({ promptIds: turn1, maxTokens: 2, stopTokenIds: [], temperature: 0 }, () => true);
    await expect(driver.generate({ promptIds: [...turn1, 1, 2], maxTokens: 2, stopTokenIds: [], temperature: 0 }, () => true)).rejects.toThrow(/prefix cache: a K\/V block could not be copied on the GPU: out of GPU memory/);
    await driver.stop().catch(() => undefined);
    shard.dispose();
    await group.close();
  });

  it('queues concurrent forward calls and keeps each cache length', async () => {
    const layout: InstanceLayout = { stages: pipelineStages(4, 1), tensor: 1 };
    const [g] = createSimGroup(1);
    const shard = await loadRankGpuShard(dir, layout, 0, g, { context: ctx!, maxBatch: 4, maxSeqLen: 32 });
    const a = shard.newCache(16);
    const b = shard.newCache(16);
    const tokens = [5, 6, 7];
    const [la, lb] = await Promise.all([shard.forward({ tokens }, a), shard.forward({ tokens }, b)]).then((o) => o.map((x) => Array.from(x)));
    expect(a.length).toBe(3);
    expect(b.length).toBe(3);
    expect(lb).toEqual(la);
    await expect(Promise.all([shard.forward({ tokens: [1] }, a), shard.forward({ tokens: [1] }, a)])).resolves.toHaveLength(2);
    expect(a.length).toBe(5);
    shard.releaseCache(a);
    shard.releaseCache(b);
    shard.dispose();
    await g.close();
  });
});

describe('a rank whose GPU cannot be opened', () => {
  it.runIf(process.platform === 'linux')('falls back to the CPU with the reason', async () => {
    const layout: InstanceLayout = { stages: pipelineStages(4, 1), tensor: 1 };
    const [g] = createSimGroup(1);
    const saved = process.env.VK_ICD_FILENAMES;
    process.env.VK_ICD_FILENAMES = join(dir, 'no-such-icd.json');
    try {
      const { shard, note } = await loadRankOn({ kind: 'gpu', allowSoftware: true }, dir, layout, 0, g, { cpuBackend: () => createReferenceBackend() });
      expect(shard).not.toBeInstanceOf(GpuRankShard);
      expect(note).toMatch(/^rank 0: GPU unusable \(no WebGPU adapter found: no Vulkan driver.*\); running on the CPU \(wasm\)$/);
      shard.dispose();
    } finally {
      if (saved === undefined) delete process.env.VK_ICD_FILENAMES;
      else process.env.VK_ICD_FILENAMES = saved;
      await g.close();
    }
  });
});

describe.skipIf(!ctx)(`runner processes on the GPU${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('a 2-stage pipeline of GPU runner processes streams the CPU greedy tokens', async () => {
    const { startLocalInstance } = await import('../../src/runner/runner-process.js');
    const want = await generate(loadInProcessModel(dir), prompt, { maxTokens: 8, temperature: 0, stopTokenIds: [] });
    const runners = await startLocalInstance(
      { modelDir: dir, layout: { stages: pipelineStages(4, 2), tensor: 1 }, groupId: 'gpu-1', secret: 'cd'.repeat(16), listenHost: '127.0.0.1', stepMs: 30_000, maxSeqLen: 64, backend: { kind: 'gpu', allowSoftware: true } },
      { ...process.env },
    );
    try {
      for (const r of runners) expect(r.backend).toMatch(/^rank \d on the GPU \((llvmpipe|lavapipe)/);
      const out = await runners[0].generate({ promptIds: prompt, maxTokens: 8, stopTokenIds: [], temperature: 0 }, () => undefined);
      expect(out.tokens).toEqual(want.tokens);
    } finally {
      await Promise.all(runners.map((r) => r.stop(1000)));
    }
  }, 120_000);
});
