import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { createSimFabric, createSimGroup } from '../../src/runner/transport.js';
import { loadRankShard, startRank } from '../../src/runner/local.js';
import type { Driver } from '../../src/runner/driver.js';
import { pipelineStages } from '@orchard/engine';
import type { InstanceLayout } from '@orchard/engine';

let dir: string;
const prompt = [1, 40, 50, 60, 70, 80, 90, 100, 110, 120];

beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-loop-'));
  writeRandomModel(dir, { numLayers: 4, hiddenSize: 64, numHeads: 4, numKvHeads: 2, seed: 7 });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function runDistributed(layout: InstanceLayout, maxTokens: number, sampling = {}) {
  const groups = createSimGroup(layout.stages.length * layout.tensor);
  const ranks = groups.map((g) => startRank(g, layout, loadRankShard(dir, layout, g.rank, g, { maxBatch: 4 })));
  const driver = ranks[0].driver!;
  const seen: number[] = [];
  const out = await driver.generate({ promptIds: prompt, maxTokens, stopTokenIds: [], ...sampling }, (id) => {
    seen.push(id);
    return true;
  });
  const second = await driver.generate({ promptIds: prompt.slice(0, 3), maxTokens: 5, stopTokenIds: [] }, () => true);
  await driver.stop();
  await Promise.all(ranks.map((r) => r.done));
  await Promise.all(groups.map((g) => g.close()));
  return { out, seen, second };
}

describe('shard loop over a group', () => {
  const single = () => loadInProcessModel(dir, { maxBatch: 4 });
  for (const [name, layout] of [
    ['single rank', { stages: pipelineStages(4, 1), tensor: 1 }],
    ['2-stage pipeline', { stages: pipelineStages(4, 2), tensor: 1 }],
    ['3-stage pipeline', { stages: pipelineStages(4, 3), tensor: 1 }],
    ['tensor parallel 2', { stages: pipelineStages(4, 1), tensor: 2 }],
    ['2 stages x tensor 2', { stages: pipelineStages(4, 2), tensor: 2 }],
  ] as [string, InstanceLayout][]) {
    it(`${name}: greedy tokens equal the unsplit model's`, async () => {
      const want = await generate(single(), prompt, { maxTokens: 12, stopTokenIds: [] });
      const want2 = await generate(single(), prompt.slice(0, 3), { maxTokens: 5, stopTokenIds: [] });
      const { out, seen, second } = await runDistributed(layout, 12);
      expect(out.tokens).toEqual(want.tokens);
      expect(seen).toEqual(want.tokens);
      expect(out.finishReason).toBe('length');
      expect(second.tokens).toEqual(want2.tokens);
    });
  }

  it('seeded sampling on the last stage matches the in-process sampler', async () => {
    const sampling = { temperature: 0.9, topP: 0.9, seed: 42 };
    const want = await generate(single(), prompt, { maxTokens: 10, stopTokenIds: [], ...sampling });
    const { out } = await runDistributed({ stages: pipelineStages(4, 2), tensor: 1 }, 10, sampling);
    expect(out.tokens).toEqual(want.tokens);
  });

  it('a follower that dies fails the running request instead of hanging', async () => {
    const layout = { stages: pipelineStages(4, 2), tensor: 1 };
    const groups = createSimGroup(2);
    const ranks = groups.map((g) => startRank(g, layout, loadRankShard(dir, layout, g.rank, g), { stepMs: 2000 }));
    ranks[1].done.catch(() => undefined);
    let n = 0;
    const t0 = Date.now();
    const run = ranks[0].driver!.generate({ promptIds: prompt, maxTokens: 200, stopTokenIds: [] }, () => {
      if (++n === 3) void groups[1].close();
      return true;
    });
    await expect(run).rejects.toThrow();
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(ranks[0].driver!.broken).not.toBeNull();
    await groups[0].close();
  });

  it('a stage that goes silent (no close) fails the decode within a few seconds, not the 30 s step limit', async () => {
    const layout = { stages: pipelineStages(4, 2), tensor: 1 };
    const fabric = createSimFabric(2, { timeoutMs: 60_000 });
    const ranks = fabric.groups.map((g) => startRank(g, layout, loadRankShard(dir, layout, g.rank, g), { stepMs: 30_000 }));
    ranks[1].done.catch(() => undefined);
    const driver = ranks[0].driver!;
    let n = 0;
    let stalledAt = 0;
    const run = driver.generate({ promptIds: prompt, maxTokens: 10_000, stopTokenIds: [] }, () => {
      if (++n === 20) {
        stalledAt = Date.now();
        fabric.stall(1);
      }
      return true;
    });
    await expect(run).rejects.toThrow();
    expect((driver as Driver).decodeTimeoutMs).toBeLessThan(5000);
    expect(Date.now() - stalledAt).toBeLessThan(5000);
    fabric.kill(1);
    await fabric.groups[0].close();
  }, 20_000);

  it('several sequences at once through a 2-stage pipeline each get their own greedy tokens', async () => {
    const layout = { stages: pipelineStages(4, 2), tensor: 1 };
    const groups = createSimGroup(2);
    const ranks = groups.map((g) => startRank(g, layout, loadRankShard(dir, layout, g.rank, g, { maxBatch: 4 })));
    const driver = ranks[0].driver!;
    expect(driver.maxSequences).toBe(2);
    const prompts = [prompt, [1, 200, 150, 100], [1, 90, 91, 92, 93, 94]];
    const wants = await Promise.all(prompts.map((p) => generate(single(), p, { maxTokens: 10, stopTokenIds: [] })));
    const a = driver.generate({ promptIds: prompts[0], maxTokens: 10, stopTokenIds: [] }, () => true);
    const b = driver.generate({ promptIds: prompts[1], maxTokens: 10, stopTokenIds: [] }, () => true);
    await expect(driver.generate({ promptIds: prompts[2], maxTokens: 10, stopTokenIds: [] }, () => true)).rejects.toThrow(/already running/);
    const [ra, rb] = await Promise.all([a, b]);
    expect(ra.tokens).toEqual(wants[0].tokens);
    expect(rb.tokens).toEqual(wants[1].tokens);
    const rc = await driver.generate({ promptIds: prompts[2], maxTokens: 10, stopTokenIds: [] }, () => true);
    expect(rc.tokens).toEqual(wants[2].tokens);
    await driver.stop();
    await Promise.all(ranks.map((r) => r.done));
    await Promise.all(groups.map((g) => g.close()));
  });
});
