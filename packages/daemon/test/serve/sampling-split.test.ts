/**
 * Sampling with penalties, min-p, typical-p and logit bias gives the same tokens however the model is
 * split: the sampling rank (the last stage's, when it is not the driver) gets the options and the
 * prompt's tail its penalty window starts from, and matches the in-process sampler token for token.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel, pipelineStages, type InstanceLayout } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { createSimGroup } from '../../src/runner/transport.js';
import { loadRankShard, startRank } from '../../src/runner/local.js';

let dir: string;
// Repeats in the prompt, so the penalty window has something to push against.
const prompt = [1, 40, 50, 40, 50, 40, 50, 60, 70, 60, 70, 60];

beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-sampling-split-'));
  writeRandomModel(dir, { numLayers: 4, hiddenSize: 64, numHeads: 4, numKvHeads: 2, seed: 11 });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function runSplit(layout: InstanceLayout, sampling: Record<string, unknown>, maxTokens: number): Promise<number[]> {
  const groups = createSimGroup(layout.stages.length * layout.tensor);
  const ranks = groups.map((g) => startRank(g, layout, loadRankShard(dir, layout, g.rank, g, { maxBatch: 4 })));
  try {
    const out = await ranks[0].driver!.generate({ promptIds: prompt, maxTokens, stopTokenIds: [], ...sampling }, () => true);
    return out.tokens;
  } finally {
    await ranks[0].driver!.stop();
    await Promise.all(ranks.map((r) => r.done));
    await Promise.all(groups.map((g) => g.close()));
  }
}

describe('penalised, seeded sampling on any split', () => {
  const sampling = { temperature: 0.8, topK: 40, topP: 0.95, minP: 0.02, typicalP: 0.97, repeatPenalty: 1.4, frequencyPenalty: 0.3, presencePenalty: 0.2, repeatLastN: 6, logitBias: { 40: -3, 7: 1.5 }, seed: 1234 };
  const layouts: [string, InstanceLayout][] = [
    ['single rank', { stages: pipelineStages(4, 1), tensor: 1 }],
    ['2-stage pipeline (sampling on another rank)', { stages: pipelineStages(4, 2), tensor: 1 }],
    ['2 stages x tensor 2', { stages: pipelineStages(4, 2), tensor: 2 }],
  ];
  for (const [name, layout] of layouts) {
    it(`${name}: the same tokens as in process`, async () => {
      const want = await generate(loadInProcessModel(dir, { maxBatch: 4 }), prompt, { maxTokens: 16, stopTokenIds: [], ...sampling });
      expect(await runSplit(layout, sampling, 16)).toEqual(want.tokens);
    });
  }

  it('the penalties change what greedy decoding picks (they reach the sampling rank)', async () => {
    const layout = { stages: pipelineStages(4, 2), tensor: 1 };
    // A bias makes greedy decoding repeat token 7; a frequency penalty pushes it back after a few.
    const biased = { temperature: 0, logitBias: { 7: 40 } };
    const penalty = { ...biased, frequencyPenalty: 15, repeatLastN: 64 };
    const plain = await runSplit(layout, biased, 12);
    const penalised = await runSplit(layout, penalty, 12);
    const want = await generate(loadInProcessModel(dir, { maxBatch: 4 }), prompt, { maxTokens: 12, stopTokenIds: [], ...penalty });
    expect(plain).toEqual(Array(12).fill(7));
    expect(penalised).toEqual(want.tokens);
    expect(penalised[0]).toBe(7);
    expect(penalised.filter((t) => t === 7).length).toBeLessThan(12);
  });
});
