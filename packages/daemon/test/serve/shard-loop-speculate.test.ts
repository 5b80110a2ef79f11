/**
 * Split instances speculate (driver.ts): a sequence's prompt-lookup draft rides as extra rows of
 * its segment, the last stage gives every row's logits, the sampling rank confirms the tokens that agree
 * and every rank drops the rejected rows at the next header. The output is plain decode's, token for
 * token (greedy and seeded sampling, logprobs, stops inside a draft), beside sequences that do not
 * speculate.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel, pipelineStages, type InstanceLayout, type ModelShard } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import type { GenerateRequest } from '../../src/runner/requests.js';
import { asGpuRank, startSplit } from './split-instance.js';

let dir: string;
/** A prompt the model's own greedy continuation repeats (built in beforeAll): drafts get confirmed. */
let repetitive: number[];
const plainPrompt = [1, 40, 50, 60, 70, 80, 90, 100, 110, 120];

beforeAll(async () => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-loop-spec-'));
  writeRandomModel(dir, { numLayers: 4, hiddenSize: 64, numHeads: 4, numKvHeads: 2, seed: 7 });
  repetitive = await cyclingPrompt();
});

/**
 * A random model's greedy output often ends in a cycle: the first seed prompt (of 30) whose 150-token
 * continuation ends in a cycle of 2+ tokens, with its continuation up to twice that cycle, is text the
 * model goes on to repeat.
 */
async function cyclingPrompt(): Promise<number[]> {
  for (let s = 1; s <= 30; s++) {
    const seed = [1, (s * 7) % 250, (s * 13) % 250];
    const out = (await alone(seed, 150)).tokens;
    for (let p = 2; p <= 8; p++) {
      let tail = 0;
      for (let i = out.length - 1 - p; i >= 0 && out[i] === out[i + p]; i--) tail++;
      if (tail >= 4 * p) return [...seed, ...out.slice(0, out.length - tail + p)];
    }
  }
  throw new Error('no seed prompt of the test model ends in a cycle: pick another model seed');
}
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function alone(p: number[], maxTokens: number, extra: Partial<GenerateRequest> = {}) {
  return generate(loadInProcessModel(dir, { maxBatch: 16 }), p, { maxTokens, stopTokenIds: [], ...extra });
}

function start(layout: InstanceLayout, shardOf?: (s: ModelShard, rank: number) => ModelShard) {
  return startSplit(dir, layout, { maxBatch: 16, batch: { sequences: 4, prefixCacheBytes: 2 ** 20, speculate: 'prompt-lookup' }, shardOf });
}

describe('speculation in split instances', () => {
  for (const [name, layout] of [
    ['2-stage pipeline', { stages: pipelineStages(4, 2), tensor: 1 }],
    ['tensor parallel 2', { stages: pipelineStages(4, 1), tensor: 2 }],
    ['2 stages x tensor 2', { stages: pipelineStages(4, 2), tensor: 2 }],
  ] as [string, InstanceLayout][]) {
    it(`${name}: greedy and seeded-sampled tokens equal plain decode, beside a sequence that does not speculate`, async () => {
      const sampled = { temperature: 0.7, topP: 0.95, seed: 5 };
      const [wantRep, wantSampled, wantPlain] = await Promise.all([alone(repetitive, 30), alone(repetitive, 30, sampled), alone(plainPrompt, 12)]);
      const { driver, close } = await start(layout);
      const [rep, samp, plain] = await Promise.all([
        driver.generate({ promptIds: repetitive, maxTokens: 30, stopTokenIds: [] }, () => true),
        driver.generate({ promptIds: repetitive, maxTokens: 30, stopTokenIds: [], ...sampled }, () => true),
        driver.generate({ promptIds: plainPrompt, maxTokens: 12, stopTokenIds: [], speculate: 'off' }, () => true),
      ]);
      expect(rep.tokens).toEqual(wantRep.tokens);
      expect(samp.tokens).toEqual(wantSampled.tokens);
      expect(plain.tokens).toEqual(wantPlain.tokens);
      expect(plain.speculation).toBeUndefined();
      // The repetitive text's drafts were checked and mostly confirmed: fewer steps than tokens.
      expect(rep.speculation!.drafted).toBeGreaterThan(0);
      expect(rep.speculation!.accepted).toBeGreaterThan(rep.speculation!.drafted / 2);
      expect(driver.stats.accepted).toBeGreaterThan(0);
      await close();
    });
  }

  it('a client leaving in the middle of a confirmed draft ends the stream there; a stop id ends it as plain decode does; logprobs equal', async () => {
    const layout = { stages: pipelineStages(4, 2), tensor: 1 };
    const want = await alone(repetitive, 30);
    const { driver, close } = await start(layout);
    // The 6th token comes from a draft row (the first decode step checks a whole draft of the cycle).
    const streamed: number[] = [];
    const left = await driver.generate({ promptIds: repetitive, maxTokens: 30, stopTokenIds: [] }, (id) => (streamed.push(id), streamed.length < 6));
    expect(left.finishReason).toBe('abort');
    expect(left.tokens).toEqual(want.tokens.slice(0, 6));
    expect(left.speculation!.accepted).toBeGreaterThanOrEqual(4);
    const stop = want.tokens[1];
    const stopped = await driver.generate({ promptIds: repetitive, maxTokens: 30, stopTokenIds: [stop] }, () => true);
    expect(stopped.finishReason).toBe('stop');
    expect(stopped.tokens).toEqual(want.tokens.slice(0, want.tokens.indexOf(stop) + 1));
    // Logprobs from checked draft rows equal plain decode's on the same instance.
    const lps = async (speculate: 'off' | 'prompt-lookup') => {
      const got: { id: number; logprob: number; top: number[] }[] = [];
      const out = await driver.generate({ promptIds: repetitive, maxTokens: 12, stopTokenIds: [], logprobs: 2, speculate }, (id, lp) => (got.push({ id, logprob: lp!.logprob, top: lp!.top.map((t) => t.id) }), true));
      return { got, out };
    };
    const plain = await lps('off');
    const spec = await lps('prompt-lookup');
    expect(spec.out.speculation!.accepted).toBeGreaterThan(0);
    expect(spec.got.map((g) => [g.id, g.top])).toEqual(plain.got.map((g) => [g.id, g.top]));
    spec.got.forEach((g, i) => expect(g.logprob).toBeCloseTo(plain.got[i].logprob, 5));
    await close();
  });

  it('an instance with a rank that cannot check drafts (K/V on the device, no verifiesDrafts) answers plainly when asked to speculate', async () => {
    const layout = { stages: pipelineStages(4, 2), tensor: 1 };
    const { driver, close } = await start(layout, (s, rank) => (rank === 1 ? asGpuRank(s) : s));
    const want = await alone(repetitive, 20);
    const out = await driver.generate({ promptIds: repetitive, maxTokens: 20, stopTokenIds: [], speculate: 'prompt-lookup' }, () => true);
    expect(out.tokens).toEqual(want.tokens);
    expect(out.speculation).toBeUndefined();
    expect(driver.stats.drafted).toBe(0);
    await close();
  });
});
