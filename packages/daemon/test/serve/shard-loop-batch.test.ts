/**
 * Split instances batch their sequences (shard-loop.ts): several requests run through a pipeline or
 * a tensor split in shared steps, spread over as many lanes as there are stages, and each gets
 * exactly the tokens it gets alone.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel, pipelineStages, type InstanceLayout } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { createSimGroup } from '../../src/runner/transport.js';
import { loadRankShard, startRank } from '../../src/runner/local.js';
import type { Driver } from '../../src/runner/shard-loop.js';

let dir: string;
const prompts = [
  [1, 40, 50, 60, 70, 80, 90, 100, 110, 120],
  [1, 200, 150, 100],
  [1, 90, 91, 92, 93, 94],
  [7],
  [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13],
  [1, 33, 66],
  [250, 10, 20, 30, 40],
  [1, 5],
];

beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-loop-batch-'));
  writeRandomModel(dir, { numLayers: 4, hiddenSize: 64, numHeads: 4, numKvHeads: 2, seed: 7 });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function start(layout: InstanceLayout, sequences: number) {
  const groups = createSimGroup(layout.stages.length * layout.tensor);
  const ranks = groups.map((g) => startRank(g, layout, loadRankShard(dir, layout, g.rank, g, { maxBatch: 8 }), { batch: { sequences, prefixCacheBytes: 0 } }));
  const driver = ranks[0].driver as Driver;
  return {
    driver,
    async close() {
      await driver.stop();
      await Promise.all(ranks.map((r) => r.done));
      await Promise.all(groups.map((g) => g.close()));
    },
  };
}

describe('batched steps in split instances', () => {
  const alone = (p: number[], maxTokens: number, sampling = {}) => generate(loadInProcessModel(dir, { maxBatch: 8 }), p, { maxTokens, stopTokenIds: [], ...sampling });

  for (const [name, layout] of [
    ['2-stage pipeline', { stages: pipelineStages(4, 2), tensor: 1 }],
    ['tensor parallel 2', { stages: pipelineStages(4, 1), tensor: 2 }],
    ['2 stages x tensor 2', { stages: pipelineStages(4, 2), tensor: 2 }],
  ] as [string, InstanceLayout][]) {
    it(`${name}: 8 sequences joining and leaving mid-run each get their greedy tokens alone`, async () => {
      const budgets = prompts.map((_, i) => 4 + ((i * 5) % 9));
      const wants = await Promise.all(prompts.map((p, i) => alone(p, budgets[i])));
      const { driver, close } = await start(layout, 8);
      expect(driver.maxSequences).toBe(8);
      // Half start together; each of the rest joins when an earlier one hands out its 3rd token.
      const runs: Promise<{ tokens: number[] }>[] = [];
      const launch = (i: number) => {
        let n = 0;
        runs[i] = driver.generate({ promptIds: prompts[i], maxTokens: budgets[i], stopTokenIds: [] }, () => {
          if (++n === 3 && i + 4 < prompts.length) launch(i + 4);
          return true;
        });
      };
      for (let i = 0; i < 4; i++) launch(i);
      for (let i = 0; i < prompts.length; i++) {
        while (!runs[i]) await new Promise((r) => setTimeout(r, 1));
        expect((await runs[i]).tokens, `sequence ${i}`).toEqual(wants[i].tokens);
      }
      // Shared steps happened: more than one sequence in a forward, fewer steps than sequences' tokens.
      expect(driver.stats.widest).toBeGreaterThan(1);
      expect(driver.stats.sequences).toBeGreaterThan(driver.stats.steps);
      await close();
    });
  }

  it('seeded sampling per sequence on the last stage matches each sequence alone', async () => {
    const layout = { stages: pipelineStages(4, 2), tensor: 1 };
    const samplings = [0, 1, 2, 3].map((i) => ({ temperature: 0.8 + 0.1 * i, topP: 0.95, seed: 40 + i }));
    const wants = await Promise.all(samplings.map((s, i) => alone(prompts[i], 8, s)));
    const { driver, close } = await start(layout, 4);
    const outs = await Promise.all(samplings.map((s, i) => driver.generate({ promptIds: prompts[i], maxTokens: 8, stopTokenIds: [], ...s }, () => true)));
    outs.forEach((o, i) => expect(o.tokens, `sequence ${i}`).toEqual(wants[i].tokens));
    expect(driver.stats.widest).toBeGreaterThan(1);
    await close();
  });

  it('a client that leaves frees its slot at the next step while the others go on', async () => {
    const layout = { stages: pipelineStages(4, 2), tensor: 1 };
    const want = await alone(prompts[0], 12);
    const { driver, close } = await start(layout, 2);
    let n = 0;
    const leaver = driver.generate({ promptIds: prompts[1], maxTokens: 50, stopTokenIds: [] }, () => ++n < 2);
    const stayer = driver.generate({ promptIds: prompts[0], maxTokens: 12, stopTokenIds: [] }, () => true);
    expect((await leaver).finishReason).toBe('abort');
    // Its slot is free again while the other sequence still runs.
    const third = driver.generate({ promptIds: prompts[2], maxTokens: 3, stopTokenIds: [] }, () => true);
    expect((await third).tokens).toHaveLength(3);
    expect((await stayer).tokens).toEqual(want.tokens);
    await close();
  });
});
