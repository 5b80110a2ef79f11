/**
 * A one-rank instance's continuous batching (runner/batch-driver.ts, started by startRank): requests
 * arriving while others decode join at the next step and each gets exactly the tokens it gets alone
 * (greedy and seeded sampling); a client that goes away frees its slot; the prefix cache makes a chat's
 * second turn prefill only its new tokens, with the cold run's tokens; a long prompt arriving mid-stream
 * is fed in chunks sized from the (here simulated) step times while the running stream gets a token
 * every step.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel, pipelineStages, type GenerateResult, type InProcessModel } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { BatchDriver } from '../../src/runner/batch-driver.js';
import { loadRankShard, startRank } from '../../src/runner/local.js';
import { createSimGroup } from '../../src/runner/transport.js';
import type { GenerateRequest } from '../../src/runner/requests.js';

let dir: string;
let single: InProcessModel;
const layout = { stages: pipelineStages(4, 1), tensor: 1 };

beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-batch-'));
  writeRandomModel(dir, { variant: 'qwen3', numLayers: 4, hiddenSize: 64, numHeads: 4, numKvHeads: 2, seed: 17 });
  single = loadInProcessModel(dir, { maxBatch: 8 });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function driverOf(maxBatch = 8): BatchDriver {
  const [group] = createSimGroup(1);
  const { driver } = startRank(group, layout, loadRankShard(dir, layout, 0, group, { maxBatch }));
  expect(driver).toBeInstanceOf(BatchDriver);
  return driver as BatchDriver;
}

const tick = () => new Promise((r) => setTimeout(r, 0));
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const promptOf = (i: number, n: number) => Array.from({ length: n }, (_, j) => (i * 37 + j * 11 + 1) % 256);

describe('batch driver', () => {
  it('8 concurrent requests, joining while others decode and leaving at different lengths, each get their tokens alone', async () => {
    const driver = driverOf(16);
    const reqs: GenerateRequest[] = Array.from({ length: 8 }, (_, i) => ({
      promptIds: promptOf(i, 3 + ((i * 7) % 19)),
      maxTokens: 10 + ((i * 3) % 9),
      stopTokenIds: [],
      ...(i % 3 === 2 ? { temperature: 0.8, seed: i } : {}),
    }));
    const want: GenerateResult[] = [];
    for (const r of reqs) want.push(await generate(single, r.promptIds, { maxTokens: r.maxTokens, stopTokenIds: [], temperature: r.temperature, seed: r.seed }));
    const runs = [];
    let decoding: () => void = () => {};
    const firstDecodes = new Promise<void>((r) => (decoding = r));
    for (let i = 0; i < reqs.length; i++) {
      const streamed: number[] = [];
      const onToken = (id: number) => (streamed.push(id), i === 0 && streamed.length === 2 && decoding(), true);
      runs.push(driver.generate(reqs[i], onToken).then((o) => ({ o, streamed })));
      // The second half arrives while the first half decodes.
      if (i === 3) await firstDecodes;
    }
    const got = await Promise.all(runs);
    got.forEach(({ o, streamed }, i) => {
      expect(o.tokens).toEqual(want[i].tokens);
      expect(streamed).toEqual(want[i].tokens);
      expect(o.finishReason).toBe('length');
    });
    // They really shared steps: at some step all eight ran in one forward.
    expect(driver.stats.widest).toBe(8);
    await driver.stop();
  });

  it('a client that goes away frees its slot at the next step; the others are unaffected', async () => {
    const [group] = createSimGroup(1);
    const driver = new BatchDriver(loadRankShard(dir, layout, 0, group, { maxBatch: 8 }), { maxSequences: 2 });
    const a = { promptIds: promptOf(1, 6), maxTokens: 30, stopTokenIds: [] };
    const b = { promptIds: promptOf(2, 5), maxTokens: 30, stopTokenIds: [] };
    const wantB = await generate(single, b.promptIds, { maxTokens: 30, stopTokenIds: [] });
    let seenA = 0;
    const runA = driver.generate(a, () => ++seenA < 3);
    const runB = driver.generate(b, () => true);
    await expect(driver.generate(b, () => true)).rejects.toThrow(/2 sequences already running/);
    const outA = await runA;
    expect(outA.finishReason).toBe('abort');
    expect(outA.tokens.length).toBe(3);
    // A's slot is free while B still decodes.
    const c = driver.generate({ promptIds: promptOf(3, 4), maxTokens: 2, stopTokenIds: [] }, () => true);
    expect((await c).tokens.length).toBe(2);
    expect((await runB).tokens).toEqual(wantB.tokens);
    await driver.stop();
  });

  it("a chat's second turn reuses the first turn's cache: same tokens as cold, only the new tokens prefilled", async () => {
    const driver = driverOf();
    const turn1 = promptOf(5, 40);
    const first = await driver.generate({ promptIds: turn1, maxTokens: 8, stopTokenIds: [] }, () => true);
    expect(first.cachedPromptTokens).toBe(0);
    const prompt2 = [...turn1, ...first.tokens, 7, 8, 9, 10, 11];
    const before = driver.stats.prefilledTokens;
    const second = await driver.generate({ promptIds: prompt2, maxTokens: 8, stopTokenIds: [] }, () => true);
    const cold = await generate(single, prompt2, { maxTokens: 8, stopTokenIds: [] });
    expect(second.tokens).toEqual(cold.tokens);
    // The first turn left 47 tokens in its cache: 2 whole blocks of 16 are reused.
    expect(second.cachedPromptTokens).toBe(32);
    expect(driver.stats.prefilledTokens - before).toBe(prompt2.length - 32);
    await driver.stop();
  });

  it('stop ends running sequences with abort and refuses new ones', async () => {
    const driver = driverOf();
    const run = driver.generate({ promptIds: promptOf(9, 5), maxTokens: 500, stopTokenIds: [] }, () => true);
    await tick();
    await driver.stop();
    expect((await run).finishReason).toBe('abort');
    await expect(driver.generate({ promptIds: [1], maxTokens: 1, stopTokenIds: [] }, () => true)).rejects.toThrow(/stopped/);
  });

  it("reads the step clock only for steps beside a speculating sequence (only a draft policy reads the step's cost)", async () => {
    const [group] = createSimGroup(1);
    let reads = 0;
    const driver = new BatchDriver(loadRankShard(dir, layout, 0, group, { maxBatch: 8 }), { stepClock: () => ++reads, prefixCacheBytes: 0 });
    const prompt = promptOf(13, 6);
    const plain = await driver.generate({ promptIds: prompt, maxTokens: 12, stopTokenIds: [] }, () => true);
    expect(plain.tokens).toHaveLength(12);
    expect(reads).toBe(0);
    const drafting = await driver.generate({ promptIds: prompt, maxTokens: 12, stopTokenIds: [], speculate: 'prompt-lookup' }, () => true);
    expect(drafting.tokens).toEqual(plain.tokens);
    expect(reads).toBeGreaterThan(0);
    await driver.stop();
  });

  // Steps timed by a simulated clock: a forward of r rows takes 20 + r ms, so a decode step of one
  // sequence takes 21 ms and p prompt rows add p ms; a chunk may add stretch × 21 ms. The chunk grows a
  // row per step while the sizes tried fit (each size measured once), one size past the budget is
  // tried once, then the largest that fits is kept: 15 rows for stretch 0.75, 5 for 0.25.
  it.each([
    [0.75, [...range(1, 16), 15, 15, 15, 15, 4]],
    [0.25, [...range(1, 6), ...Array(35).fill(5), 4]],
  ])('a long prompt arriving mid-stream is prefilled in chunks sized from step times (stretch %s) while the running stream gets a token every step', async (stretch, chunks) => {
    const [group] = createSimGroup(1);
    const shard = loadRankShard(dir, layout, 0, group, { maxBatch: 32 });
    let clock = 0;
    const steps: { rows: number[]; a: boolean }[] = [];
    const forwardBatch = shard.forwardBatch.bind(shard);
    const a = { promptIds: promptOf(11, 5), maxTokens: 60, stopTokenIds: [] };
    const b = { promptIds: promptOf(12, 200), maxTokens: 4, stopTokenIds: [] };
    shard.forwardBatch = (segments) => {
      const rows = segments.map((s) => ('tokens' in s.input ? s.input.tokens.length : s.input.n));
      clock += 20 + rows.reduce((x, y) => x + y, 0);
      steps.push({ rows, a: segments.some((s) => s.cache === cacheA) });
      return forwardBatch(segments);
    };
    let cacheA: unknown;
    const newCache = shard.newCache.bind(shard);
    shard.newCache = (capacity) => {
      const c = newCache(capacity);
      cacheA ??= c;
      return c;
    };
    const driver = new BatchDriver(shard, { prefill: { stretch }, now: () => clock, prefixCacheBytes: 0 });
    const [wantA, wantB] = [await generate(single, a.promptIds, { maxTokens: 60, stopTokenIds: [] }), await generate(single, b.promptIds, { maxTokens: 4, stopTokenIds: [] })];
    let started: () => void = () => {};
    const decoding = new Promise<void>((r) => (started = r));
    const streamedA: number[] = [];
    const runA = driver.generate(a, (id) => (streamedA.push(id), streamedA.length === 3 && started(), true));
    await decoding;
    const firstB = steps.length;
    const outB = await driver.generate(b, () => true);
    const outA = await runA;
    expect(outA.tokens).toEqual(wantA.tokens);
    expect(outB.tokens).toEqual(wantB.tokens);
    // A's 5-token prompt went in one step (nobody was decoding).
    expect(steps[0].rows).toEqual([5]);
    // B's prompt: every chunk in a step that also decoded A (one row: A gets a token every step).
    const bPrompt: number[] = [];
    for (const s of steps.slice(firstB)) {
      if (bPrompt.reduce((x, y) => x + y, 0) === b.promptIds.length) break;
      expect(s.a).toBe(true);
      expect(s.rows[0]).toBe(1);
      bPrompt.push(s.rows[1]);
    }
    expect(bPrompt).toEqual(chunks);
    expect(driver.stats.mixedSteps).toBeGreaterThanOrEqual(bPrompt.length);
    await driver.stop();
  });
});
