/**
 * Split instances batch their sequences (driver.ts): several requests run through a pipeline or
 * a tensor split in shared steps, spread over as many lanes as there are stages, and each gets
 * exactly the tokens it gets alone.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel, pipelineStages, type InstanceLayout, type ModelShard } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { asGpuRank, startSplit } from './split-instance.js';

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

function start(layout: InstanceLayout, sequences: number, prefixCacheBytes = 0, shardOf?: (s: ModelShard, rank: number) => ModelShard) {
  return startSplit(dir, layout, { maxBatch: 8, batch: { sequences, prefixCacheBytes }, shardOf });
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

  for (const [name, layout] of [
    ['2-stage pipeline', { stages: pipelineStages(4, 2), tensor: 1 }],
    ['tensor parallel 2', { stages: pipelineStages(4, 1), tensor: 2 }],
    ['2 stages x tensor 2', { stages: pipelineStages(4, 2), tensor: 2 }],
  ] as [string, InstanceLayout][]) {
    it(`${name}: a chat's second turn reuses its history on every rank and answers as a cold run`, async () => {
      const history = Array.from({ length: 70 }, (_, j) => (j * 11 + 3) % 250);
      const { driver, close } = await start(layout, 4, 2 ** 20);
      const turn1 = await driver.generate({ promptIds: history, maxTokens: 8, stopTokenIds: [] }, () => true);
      expect(turn1.cachedPromptTokens).toBe(0);
      const prompt2 = [...history, ...turn1.tokens, 5, 6, 7];
      const want = await alone(prompt2, 6);
      const rowsBefore = driver.stats.rows;
      const turn2 = await driver.generate({ promptIds: prompt2, maxTokens: 6, stopTokenIds: [] }, () => true);
      expect(turn2.tokens).toEqual(want.tokens);
      // Turn 1 fed 77 tokens (its last token never was): 4 whole blocks of 16 are reused.
      expect(turn2.cachedPromptTokens).toBe(64);
      // Only the rest of the prompt was computed, then 5 decode rows.
      expect(driver.stats.rows - rowsBefore).toBe(prompt2.length - 64 + 5);
      await close();
    });
  }

  it('under a budget of a few blocks the ranks evict alike: interleaved chats reuse what they can and stay exact', async () => {
    const layout = { stages: pipelineStages(4, 2), tensor: 2 };
    // The driver's shard: 2 layers x (K + V) x 1 KV head of 16 (its tensor share) = 64 floats a token,
    // 4 KiB a block of 16: room for 3 blocks.
    const { driver, close } = await start(layout, 4, 3 * 4096);
    const chats = [0, 1, 2].map((c) => Array.from({ length: 40 + 9 * c }, (_, j) => (j * (c + 3) + c) % 240));
    let reused = 0;
    for (let turn = 0; turn < 3; turn++) {
      const outs = await Promise.all(chats.map((p) => driver.generate({ promptIds: p, maxTokens: 4, stopTokenIds: [] }, () => true)));
      for (let c = 0; c < chats.length; c++) {
        expect(outs[c].tokens, `chat ${c} turn ${turn}`).toEqual((await alone(chats[c], 4)).tokens);
        reused += outs[c].cachedPromptTokens ?? 0;
        chats[c] = [...chats[c], ...outs[c].tokens, 9 + turn];
      }
    }
    expect(reused).toBeGreaterThan(0);
    expect(driver.broken).toBeNull();
    await close();
  });

  it('a rank that keeps no prefix cache (a GPU rank) turns reuse off for the instance', async () => {
    const layout = { stages: pipelineStages(4, 2), tensor: 1 };
    const noBatch = (s: ModelShard, rank: number) => (rank === 1 ? asGpuRank(s) : s);
    const { driver, close } = await start(layout, 2, 2 ** 20, noBatch);
    const history = Array.from({ length: 40 }, (_, j) => (j * 7 + 1) % 250);
    const turn1 = await driver.generate({ promptIds: history, maxTokens: 4, stopTokenIds: [] }, () => true);
    const prompt2 = [...history, ...turn1.tokens, 1];
    const turn2 = await driver.generate({ promptIds: prompt2, maxTokens: 4, stopTokenIds: [] }, () => true);
    expect(turn2.cachedPromptTokens).toBe(0);
    expect(turn2.tokens).toEqual((await alone(prompt2, 4)).tokens);
    await close();
  });
});
