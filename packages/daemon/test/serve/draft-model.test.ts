/**
 * Speculation with a draft model (runner/draft-model.ts) in both drivers: the output is plain decode's,
 * token for token (greedy and seeded sampling), unsplit, pipeline 2 and tensor 2, beside sequences that
 * do not speculate or speculate by prompt lookup. The target as its own draft (its HF directory, or it
 * converted to GGUF) has every draft token confirmed; a smaller random draft of the same tokenizer fewer. A draft with another tokenizer is
 * refused naming both models; `draft` without a draft model is the request's error; a client gone
 * mid-speculation frees its slot and its draft cache.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel, pipelineStages, type InProcessModel, type InstanceLayout } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { hfToGguf } from '@orchard/engine/gguf';
import { BatchDriver } from '../../src/runner/batch-driver.js';
import { DraftModel } from '../../src/runner/draft-model.js';
import { loadRankShard } from '../../src/runner/local.js';
import { createSimGroup } from '../../src/runner/transport.js';
import type { GenerateRequest } from '../../src/runner/requests.js';
import { startSplit } from './split-instance.js';

let root: string;
let target: string;
/** Same tokenizer, other weights, fewer layers. */
let small: string;
/** Another tokenizer: the same special tokens in another order. */
let foreign: string;
let single: InProcessModel;
const one = { stages: pipelineStages(4, 1), tensor: 1 };

beforeAll(() => {
  root = mkdtempSync(join(os.tmpdir(), 'orchard-draft-'));
  target = join(root, 'target');
  small = join(root, 'small');
  foreign = join(root, 'foreign');
  writeRandomModel(target, { numLayers: 4, hiddenSize: 64, numHeads: 4, numKvHeads: 2, seed: 23 });
  writeRandomModel(small, { numLayers: 1, hiddenSize: 32, numHeads: 2, numKvHeads: 1, seed: 24 });
  writeRandomModel(foreign, { numLayers: 1, hiddenSize: 32, numHeads: 2, numKvHeads: 1, seed: 24, tokenizer: { specialTokens: ['<|im_start|>', '<|endoftext|>', '<|im_end|>'] } });
  single = loadInProcessModel(target, { maxBatch: 16 });
});
afterAll(() => {
  single.dispose();
  rmSync(root, { recursive: true, force: true });
});

const promptOf = (i: number, n: number) => Array.from({ length: n }, (_, j) => (i * 37 + j * 11 + 1) % 256);
/** Plain decode of each request, one after another (the reference model runs one forward at a time). */
async function inOrder(reqs: GenerateRequest[]) {
  const out = [];
  for (const r of reqs) out.push(await plain(r));
  return out;
}
const plain = (r: GenerateRequest) => generate(single, r.promptIds, { maxTokens: r.maxTokens, stopTokenIds: r.stopTokenIds, temperature: r.temperature, topP: r.topP, seed: r.seed });

/**
 * A step clock read off the driver's own counters: a step costs 1 + 0.1 per row, and a draft proposal
 * (no step runs during it) nothing, so the policies keep drafting. These tests are about output and
 * catch-up, not whether a draft pays: on the real clock the target as its own draft is (rightly) turned
 * off after its first proposal (step-draft-policy.test.ts tests that choice).
 */
function countingClock(stats: () => { steps: number; rows: number }): () => number {
  return () => stats().steps + 0.1 * stats().rows;
}

function batchDriver(draftDir: string, o: { maxSequences?: number } = {}, draftRows = 24) {
  const draftModel = DraftModel.load(draftDir, target, { maxBatch: draftRows });
  const [group] = createSimGroup(1);
  const driver: BatchDriver = new BatchDriver(loadRankShard(target, one, 0, group, { maxBatch: 24 }), { speculate: 'draft', draftModel, stepClock: countingClock(() => driver.stats), ...o });
  return { draftModel, driver };
}

describe('draft-model speculation, one rank', () => {
  it('the target as its own draft: plain tokens, every draft token confirmed; beside plain and prompt-lookup sequences', async () => {
    const { driver, draftModel } = batchDriver(target);
    const reqs: GenerateRequest[] = [
      { promptIds: promptOf(1, 7), maxTokens: 30, stopTokenIds: [] },
      { promptIds: promptOf(2, 12), maxTokens: 25, stopTokenIds: [] },
      { promptIds: promptOf(3, 9), maxTokens: 20, stopTokenIds: [], speculate: 'off' },
      { promptIds: promptOf(4, 5), maxTokens: 20, stopTokenIds: [], speculate: 'prompt-lookup' },
    ];
    const want = await inOrder(reqs);
    const got = await Promise.all(reqs.map((r) => driver.generate(r, () => true)));
    got.forEach((o, i) => expect(o.tokens, `request ${i}`).toEqual(want[i].tokens));
    for (const o of got.slice(0, 2)) {
      expect(o.speculation!.drafted).toBeGreaterThan(o.tokens.length / 2);
      expect(o.speculation!.accepted).toBe(o.speculation!.drafted);
    }
    expect(got[2].speculation).toBeUndefined();
    // Its own draft: the steps are far fewer than the tokens.
    expect(driver.stats.steps).toBeLessThan(30);
    expect(draftModel.held).toBe(0);
    await driver.stop();
  });

  it('a draft whose forwards cost a step each is turned off after its first proposal; one at a twentieth of a step keeps drafting; plain tokens both', async () => {
    const req: GenerateRequest = { promptIds: promptOf(8, 6), maxTokens: 40, stopTokenIds: [] };
    const want = (await plain(req)).tokens;
    const drafted: number[] = [];
    for (const perForward of [1, 0.05]) {
      const draftModel = DraftModel.load(target, target, { maxBatch: 24 });
      const [group] = createSimGroup(1);
      // A target step costs 0.7 + 0.3 per row; each draft forward perForward (the driver times proposals apart).
      const clock = () => driver.stats.steps * 0.7 + driver.stats.rows * 0.3 + draftModel.stats.forwards * perForward;
      const driver: BatchDriver = new BatchDriver(loadRankShard(target, one, 0, group, { maxBatch: 24 }), { speculate: 'draft', draftModel, stepClock: clock });
      const o = await driver.generate(req, () => true);
      expect(o.tokens, `draft forward at ${perForward} of a step`).toEqual(want);
      drafted.push(o.speculation!.drafted);
      await driver.stop();
    }
    // Its first proposal is made on the prior (no draft was timed yet), then one probe of 2 times it again.
    expect(drafted[0]).toBeGreaterThan(0);
    expect(drafted[0]).toBeLessThanOrEqual(8 + 2);
    expect(drafted[1]).toBeGreaterThan(20);
  });

  it('a smaller draft of the same tokenizer: plain tokens (greedy and seeded sampling), fewer confirmed', async () => {
    const { driver, draftModel } = batchDriver(small);
    const reqs: GenerateRequest[] = [
      { promptIds: promptOf(5, 8), maxTokens: 30, stopTokenIds: [] },
      { promptIds: promptOf(6, 8), maxTokens: 30, stopTokenIds: [], temperature: 0.8, topP: 0.95, seed: 3 },
      { promptIds: promptOf(7, 6), maxTokens: 30, stopTokenIds: [], temperature: 1.2, seed: 11 },
    ];
    const want = await inOrder(reqs);
    const got = await Promise.all(reqs.map((r) => driver.generate(r, () => true)));
    got.forEach((o, i) => expect(o.tokens, `request ${i}`).toEqual(want[i].tokens));
    const { drafted, accepted } = driver.stats;
    console.log(`small random draft: ${accepted}/${drafted} draft tokens accepted over ${driver.stats.steps} steps`);
    expect(drafted).toBeGreaterThan(0);
    expect(accepted).toBeLessThan(drafted);
    expect(draftModel.stats.forwards).toBeGreaterThan(0);
    await driver.stop();
  });

  it('a draft taking 4 rows per forward: long prompts and a restored prefix are caught up a forward per step; plain tokens, every draft token confirmed', async () => {
    const { driver, draftModel } = batchDriver(target, {}, 4);
    const long = promptOf(16, 40);
    const reqs: GenerateRequest[] = [
      { promptIds: long, maxTokens: 16, stopTokenIds: [] },
      { promptIds: promptOf(17, 3), maxTokens: 24, stopTokenIds: [] },
    ];
    const want = await inOrder(reqs);
    const got = await Promise.all(reqs.map((r) => driver.generate(r, () => true)));
    got.forEach((o, i) => expect(o.tokens, `request ${i}`).toEqual(want[i].tokens));
    // The same prompt again: the target restores it from the prefix cache, the draft feeds it anew.
    const again = await driver.generate(reqs[0], () => true);
    expect(again.cachedPromptTokens).toBeGreaterThan(0);
    expect(again.tokens).toEqual(want[0].tokens);
    for (const o of [...got, again]) {
      expect(o.speculation!.drafted).toBeGreaterThan(0);
      expect(o.speculation!.accepted).toBe(o.speculation!.drafted);
    }
    // Both times the draft fed the whole long prompt, but never in one step: a step's proposal runs at most
    // two forwards of catch-up (4 rows of each sequence) and 7 for the rest of an 8-token draft (all of
    // a 40-token prompt at once would take 10 forwards before drafting).
    expect(draftModel.stats.rows).toBeGreaterThanOrEqual(2 * long.length);
    expect(draftModel.stats.longest).toBeLessThanOrEqual(9);
    await driver.stop();
  });

  it("a draft with a shorter context drafts while the sequence fits it, then the sequence decodes plainly", async () => {
    const short = join(root, 'short-context');
    writeRandomModel(short, { numLayers: 1, hiddenSize: 32, numHeads: 2, numKvHeads: 1, seed: 25, maxPositionEmbeddings: 16 });
    const draftModel = DraftModel.load(short, target, { maxBatch: 8, maxSeqLen: 256 });
    expect(draftModel.shard.maxSeqLen).toBe(16);
    const [group] = createSimGroup(1);
    const driver: BatchDriver = new BatchDriver(loadRankShard(target, one, 0, group, { maxBatch: 24 }), { speculate: 'draft', draftModel, stepClock: countingClock(() => driver.stats) });
    const req = { promptIds: promptOf(19, 6), maxTokens: 30, stopTokenIds: [] };
    const out = await driver.generate(req, () => true);
    expect(out.tokens).toEqual((await plain(req)).tokens);
    expect(out.speculation!.drafted).toBeGreaterThan(0);
    expect(draftModel.held).toBe(0);
    await driver.stop();
  });

  it('a stop id and the budget end the stream where plain decode does', async () => {
    const { driver } = batchDriver(target);
    const prompt = promptOf(8, 6);
    const full = await plain({ promptIds: prompt, maxTokens: 24, stopTokenIds: [] });
    const stop = full.tokens[9];
    const stopped = await driver.generate({ promptIds: prompt, maxTokens: 24, stopTokenIds: [stop] }, () => true);
    expect(stopped.tokens).toEqual(full.tokens.slice(0, full.tokens.indexOf(stop) + 1));
    expect(stopped.finishReason).toBe('stop');
    const short = await driver.generate({ promptIds: prompt, maxTokens: 7, stopTokenIds: [] }, () => true);
    expect(short.tokens).toEqual(full.tokens.slice(0, 7));
    await driver.stop();
  });

  it('a client gone mid-speculation frees the slot and the draft cache; the next request is plain', async () => {
    const { driver, draftModel } = batchDriver(target, { maxSequences: 1 });
    const prompt = promptOf(9, 6);
    const full = await plain({ promptIds: prompt, maxTokens: 30, stopTokenIds: [] });
    let n = 0;
    const gone = await driver.generate({ promptIds: prompt, maxTokens: 30, stopTokenIds: [] }, () => ++n < 9);
    expect(gone.finishReason).toBe('abort');
    expect(gone.tokens).toEqual(full.tokens.slice(0, 9));
    expect(gone.speculation!.accepted).toBeGreaterThan(0);
    expect(draftModel.held).toBe(0);
    const next = await driver.generate({ promptIds: prompt, maxTokens: 30, stopTokenIds: [] }, () => true);
    expect(next.tokens).toEqual(full.tokens);
    await driver.stop();
  });

  it('a GGUF draft (the target converted): its tokenizer, rebuilt from the GGUF, passes the check; plain tokens, every draft token confirmed', async () => {
    const gguf = join(root, 'target-f32.gguf');
    hfToGguf(target, gguf, { dtype: 'f32' });
    const { driver, draftModel } = batchDriver(gguf);
    const reqs: GenerateRequest[] = [
      { promptIds: promptOf(14, 6), maxTokens: 20, stopTokenIds: [] },
      { promptIds: promptOf(15, 9), maxTokens: 20, stopTokenIds: [], temperature: 0.9, seed: 2 },
    ];
    const want = await inOrder(reqs);
    const got = await Promise.all(reqs.map((r) => driver.generate(r, () => true)));
    got.forEach((o, i) => expect(o.tokens, `request ${i}`).toEqual(want[i].tokens));
    expect(got[0].speculation!.drafted).toBeGreaterThan(0);
    expect(got[0].speculation!.accepted).toBe(got[0].speculation!.drafted);
    expect(draftModel.dir).toBe(gguf);
    await driver.stop();
  });

  it("a draft with another tokenizer is refused naming both models; 'draft' without a draft model is the request's error", async () => {
    expect(() => DraftModel.load(foreign, target)).toThrow(`draft model ${foreign} does not share the tokenizer of ${target}: token 256 is "<|im_start|>" vs "<|endoftext|>"`);
    const plainMarker = join(root, 'plain-marker');
    writeRandomModel(plainMarker, { numLayers: 1, hiddenSize: 32, numHeads: 2, numKvHeads: 1, tokenizer: { plainTokens: ['<|im_start|>'] } });
    expect(() => DraftModel.load(plainMarker, target)).toThrow(`draft model ${plainMarker} does not share the tokenizer of ${target}: token 257 ("<|im_start|>") is plain in the draft and special in the target`);
    expect(() => DraftModel.load(join(root, 'missing'), target)).toThrow(`draft model ${join(root, 'missing')}`);
    const [group] = createSimGroup(1);
    const driver = new BatchDriver(loadRankShard(target, one, 0, group, { maxBatch: 8 }));
    await expect(driver.generate({ promptIds: [1, 2, 3], maxTokens: 4, stopTokenIds: [], speculate: 'draft' }, () => true)).rejects.toThrow(/no draft model .*--draft-model/);
    expect(driver.broken).toBeNull();
    await driver.stop();
  });
});

describe('draft-model speculation, split instances', () => {
  for (const [name, layout] of [
    ['2-stage pipeline', { stages: pipelineStages(4, 2), tensor: 1 }],
    ['tensor parallel 2', { stages: pipelineStages(4, 1), tensor: 2 }],
  ] as [string, InstanceLayout][]) {
    it(`${name}: plain tokens (greedy and seeded sampling) beside a sequence that does not speculate; its own draft confirmed whole; a client gone mid-speculation frees its slot`, async () => {
      const draftModel = DraftModel.load(target, target, { maxBatch: 16 });
      const { driver, close } = await startSplit(target, layout, { maxBatch: 16, batch: { sequences: 4, prefixCacheBytes: 2 ** 20, speculate: 'draft' }, draftModel });
      const reqs: GenerateRequest[] = [
        { promptIds: promptOf(10, 7), maxTokens: 24, stopTokenIds: [] },
        { promptIds: promptOf(11, 7), maxTokens: 24, stopTokenIds: [], temperature: 0.7, seed: 5 },
        { promptIds: promptOf(12, 9), maxTokens: 12, stopTokenIds: [], speculate: 'off' },
        // A fourth: the pipeline's two lanes both hold drafting sequences and propose at the same time.
        { promptIds: promptOf(13, 5), maxTokens: 20, stopTokenIds: [] },
      ];
      const want = await inOrder(reqs);
      const got = await Promise.all(reqs.map((r) => driver.generate(r, () => true)));
      got.forEach((o, i) => expect(o.tokens, `request ${i}`).toEqual(want[i].tokens));
      expect(got[0].speculation!.drafted).toBeGreaterThan(0);
      expect(got[0].speculation!.accepted).toBe(got[0].speculation!.drafted);
      expect(got[1].speculation!.drafted).toBeGreaterThan(0);
      expect(got[2].speculation).toBeUndefined();
      // A client gone mid-speculation: the stream ends at that token, the slot and the draft cache are free.
      let n = 0;
      const gone = await driver.generate(reqs[0], () => ++n < 7);
      expect(gone.finishReason).toBe('abort');
      expect(gone.tokens).toEqual(want[0].tokens.slice(0, 7));
      expect(draftModel.held).toBe(0);
      const again = await Promise.all(Array.from({ length: 4 }, () => driver.generate(reqs[0], () => true)));
      for (const o of again) expect(o.tokens).toEqual(want[0].tokens);
      await close();
    });
  }

  it("a split instance without a draft model refuses a request for 'draft' as the request's error and serves on", async () => {
    const { driver, close } = await startSplit(target, { stages: pipelineStages(4, 2), tensor: 1 }, { maxBatch: 16, batch: { sequences: 2, prefixCacheBytes: 0 } });
    const req = { promptIds: promptOf(18, 5), maxTokens: 8, stopTokenIds: [] };
    await expect(driver.generate({ ...req, speculate: 'draft' }, () => true)).rejects.toThrow(RangeError);
    expect(driver.broken).toBeNull();
    expect((await driver.generate(req, () => true)).tokens).toEqual((await plain(req)).tokens);
    await close();
  });
});
