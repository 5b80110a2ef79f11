/**
 * Speculative decoding in a one-rank instance's batching driver (runner/batch-driver.ts): a request
 * that speculates by prompt lookup gets exactly the tokens (and logprobs) of plain decode — greedy and
 * seeded sampling — while other sequences batch beside it, with drafts accepted on text that repeats
 * its context; stop ids, the token budget and a client going away end it at the token plain decode
 * ends at, even inside an accepted draft; the KV cache it leaves behind (prefix cache) holds only
 * confirmed rows.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel, pipelineStages, type GenerateResult, type InProcessModel, type TokenLogprob } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { BatchDriver, type BatchDriverOptions } from '../../src/runner/batch-driver.js';
import { loadRankShard } from '../../src/runner/local.js';
import { createSimGroup } from '../../src/runner/transport.js';
import type { GenerateOutcome, GenerateRequest } from '../../src/runner/requests.js';

let dir: string;
let single: InProcessModel;
const layout = { stages: pipelineStages(4, 1), tensor: 1 };

beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-spec-'));
  writeRandomModel(dir, { variant: 'qwen3', numLayers: 4, hiddenSize: 64, numHeads: 4, numKvHeads: 2, seed: 17 });
  single = loadInProcessModel(dir, { maxBatch: 16 });
});
afterAll(() => {
  single.dispose();
  rmSync(dir, { recursive: true, force: true });
});

function driverOf(o: BatchDriverOptions = {}, maxBatch = 24): BatchDriver {
  const [group] = createSimGroup(1);
  return new BatchDriver(loadRankShard(dir, layout, 0, group, { maxBatch }), o);
}

const seedOf = (i: number, n: number) => Array.from({ length: n }, (_, j) => (i * 37 + j * 11 + 1) % 256);

/** A prompt whose continuation repeats it: a seed and the model's own greedy continuation of it. */
async function repetitive(i: number): Promise<number[]> {
  const seed = seedOf(i, 5);
  const plain = await generate(single, seed, { maxTokens: 40, stopTokenIds: [] });
  return [...seed, ...plain.tokens];
}

/** Runs a request on the driver, keeping what it streamed. */
async function run(driver: BatchDriver, req: GenerateRequest, onToken?: (n: number) => boolean) {
  const streamed: number[] = [];
  const logprobs: TokenLogprob[] = [];
  const o: GenerateOutcome = await driver.generate(req, (id, lp) => {
    streamed.push(id);
    if (lp) logprobs.push(lp);
    return onToken?.(streamed.length) ?? true;
  });
  return { o, streamed, logprobs };
}

describe('speculation in the batch driver', () => {
  it('speculating requests beside plain ones: every request gets its plain tokens (greedy and seeded sampling); drafts accepted', async () => {
    const driver = driverOf();
    const reqs: GenerateRequest[] = [];
    for (let i = 0; i < 3; i++) reqs.push({ promptIds: await repetitive(i), maxTokens: 30 + i * 5, stopTokenIds: [], speculate: 'prompt-lookup' });
    reqs.push({ promptIds: await repetitive(3), maxTokens: 30, stopTokenIds: [], speculate: 'prompt-lookup', temperature: 0.7, seed: 5 });
    // Not speculating, and a speculating one whose prompt does not repeat.
    reqs.push({ promptIds: seedOf(4, 9), maxTokens: 25, stopTokenIds: [] });
    reqs.push({ promptIds: seedOf(5, 7), maxTokens: 25, stopTokenIds: [], speculate: 'prompt-lookup', temperature: 1, topK: 20, seed: 9 });
    const want: GenerateResult[] = [];
    for (const r of reqs) want.push(await generate(single, r.promptIds, { maxTokens: r.maxTokens, stopTokenIds: [], temperature: r.temperature, topK: r.topK, seed: r.seed }));
    const got = await Promise.all(reqs.map((r) => run(driver, r)));
    got.forEach(({ o, streamed }, i) => {
      expect(o.tokens, `request ${i}`).toEqual(want[i].tokens);
      expect(streamed).toEqual(want[i].tokens);
      expect(o.finishReason).toBe('length');
      expect(o.speculation !== undefined).toBe(reqs[i].speculate === 'prompt-lookup');
    });
    const greedy = got.slice(0, 3).map(({ o }) => o.speculation!);
    console.log(`greedy repetitive prompts: ${greedy.map((s) => `${s.accepted}/${s.drafted}`).join(', ')} draft tokens accepted; driver ${driver.stats.accepted}/${driver.stats.drafted} over ${driver.stats.steps} steps`);
    for (const s of greedy) {
      expect(s.accepted).toBeGreaterThan(0);
      expect(s.accepted).toBeLessThanOrEqual(s.drafted);
    }
    expect(driver.stats.accepted).toBe(got.reduce((a, { o }) => a + (o.speculation?.accepted ?? 0), 0));
    expect(driver.stats.drafted).toBe(got.reduce((a, { o }) => a + (o.speculation?.drafted ?? 0), 0));
    await driver.stop();
  });

  it('few rows per step (maxBatch 4): drafts take only what prompt chunks leave; a prompt arriving mid-speculation is fed and every output is plain', async () => {
    const driver = driverOf({ speculate: 'prompt-lookup' }, 4);
    const a = { promptIds: await repetitive(9), maxTokens: 40, stopTokenIds: [] };
    const b = { promptIds: await repetitive(10), maxTokens: 40, stopTokenIds: [] };
    const late = { promptIds: seedOf(11, 30), maxTokens: 10, stopTokenIds: [] };
    const want: number[][] = [];
    for (const r of [a, b, late]) want.push((await generate(single, r.promptIds, { maxTokens: r.maxTokens, stopTokenIds: [] })).tokens);
    let arrived: () => void = () => {};
    const decoding = new Promise<void>((r) => (arrived = r));
    const runs = [run(driver, a, (n) => (n === 3 && arrived(), true)), run(driver, b)];
    await decoding;
    runs.push(run(driver, late));
    const got = await Promise.all(runs);
    got.forEach(({ o }, i) => expect(o.tokens, `request ${i}`).toEqual(want[i]));
    expect(driver.stats.mixedSteps).toBeGreaterThan(0);
    expect(driver.stats.accepted).toBeGreaterThan(0);
    await driver.stop();
  });

  it("the driver's default speculates requests that do not say; 'off' on a request wins; logprobs equal plain decode's", async () => {
    const driver = driverOf({ speculate: 'prompt-lookup', promptLookup: { draftTokens: 3 } });
    const prompt = await repetitive(6);
    const plain = await generate(single, prompt, { maxTokens: 24, stopTokenIds: [], logprobs: 3 });
    const a = await run(driver, { promptIds: prompt, maxTokens: 24, stopTokenIds: [], logprobs: 3 });
    const b = await run(driver, { promptIds: prompt, maxTokens: 24, stopTokenIds: [], speculate: 'off' });
    expect(a.o.tokens).toEqual(plain.tokens);
    expect(a.logprobs).toEqual(plain.logprobs);
    expect(a.o.speculation!.accepted).toBeGreaterThan(0);
    expect(b.o.tokens).toEqual(plain.tokens);
    expect(b.o.speculation).toBeUndefined();
    await driver.stop();
  });

  it('a stop id or the budget inside an accepted draft ends the stream at that token', async () => {
    const driver = driverOf({ speculate: 'prompt-lookup' });
    const prompt = await repetitive(7);
    const plain = await generate(single, prompt, { maxTokens: 30, stopTokenIds: [] });
    // Every place a stop id or the budget can end the output: several of them lie inside accepted drafts.
    let accepted = 0;
    for (let at = 1; at < plain.tokens.length; at++) {
      if (plain.tokens.indexOf(plain.tokens[at]) === at) {
        const s = await run(driver, { promptIds: prompt, maxTokens: 30, stopTokenIds: [plain.tokens[at]] });
        expect(s.o.tokens).toEqual(plain.tokens.slice(0, at + 1));
        expect(s.streamed).toEqual(s.o.tokens);
        expect(s.o.finishReason).toBe('stop');
        accepted += s.o.speculation!.accepted;
      }
      const l = await run(driver, { promptIds: prompt, maxTokens: at, stopTokenIds: [] });
      expect(l.o.tokens).toEqual(plain.tokens.slice(0, at));
      expect(l.streamed).toEqual(l.o.tokens);
      expect(l.o.finishReason).toBe('length');
      accepted += l.o.speculation!.accepted;
    }
    expect(accepted).toBeGreaterThan(0);
    // The context full: a capacity that ends mid-draft.
    const full = driverOf({ speculate: 'prompt-lookup' });
    const cap = await run(full, { promptIds: prompt, maxTokens: 200, stopTokenIds: [] });
    const capPlain = await generate(single, prompt, { maxTokens: 200, stopTokenIds: [] });
    expect(cap.o.tokens).toEqual(capPlain.tokens);
    await driver.stop();
    await full.stop();
  });

  it('a client gone mid-speculation frees the slot; the prefix cache it leaves holds only confirmed rows', async () => {
    const driver = driverOf({ speculate: 'prompt-lookup', maxSequences: 1 });
    const prompt = await repetitive(8);
    const plain = await generate(single, prompt, { maxTokens: 40, stopTokenIds: [] });
    const gone = await run(driver, { promptIds: prompt, maxTokens: 40, stopTokenIds: [] }, (n) => n < 11);
    expect(gone.o.finishReason).toBe('abort');
    expect(gone.o.tokens).toEqual(plain.tokens.slice(0, 11));
    expect(gone.o.speculation!.accepted).toBeGreaterThan(0);
    // The one slot is free again, and a request continuing the first reuses its cache: plain tokens.
    const next = [...prompt, ...gone.o.tokens, 3, 4];
    const want = await generate(single, next, { maxTokens: 20, stopTokenIds: [] });
    const again = await run(driver, { promptIds: next, maxTokens: 20, stopTokenIds: [] });
    expect(again.o.cachedPromptTokens).toBeGreaterThan(prompt.length);
    expect(again.o.tokens).toEqual(want.tokens);
    await driver.stop();
  });

  it('a shard without a batched forward (last row logits only) does not speculate, and answers plainly', async () => {
    const [group] = createSimGroup(1);
    const shard = loadRankShard(dir, layout, 0, group, { maxBatch: 8 });
    // The shard's methods, bound to it, without forwardBatch: a shard that cannot check a draft.
    const gpuLike = new Proxy(shard, {
      get: (t, k) => {
        if (k === 'forwardBatch') return undefined;
        const v = Reflect.get(t, k, t) as unknown;
        return typeof v === 'function' ? v.bind(t) : v;
      },
    });
    const driver = new BatchDriver(gpuLike, { speculate: 'prompt-lookup' });
    const prompt = await repetitive(12);
    const plain = await generate(single, prompt, { maxTokens: 20, stopTokenIds: [] });
    const s = await run(driver, { promptIds: prompt, maxTokens: 20, stopTokenIds: [] });
    expect(s.o.tokens).toEqual(plain.tokens);
    expect(s.o.speculation).toBeUndefined();
    expect(driver.stats.drafted).toBe(0);
    await driver.stop();
  });

  it('the draft length follows what rows cost (a step clock that charges fixed + per row): dear rows stop drafting, cheap ones keep it; plain tokens either way', async () => {
    const prompt = await repetitive(13);
    const plain = await generate(single, prompt, { maxTokens: 60, stopTokenIds: [] });
    const drafting = async (fixed: number, perRow: number) => {
      // Read at a step's start and end: the step's own rows (stats count them before the step is timed).
      const clock = () => driver.stats.steps * fixed + driver.stats.rows * perRow;
      const driver: BatchDriver = driverOf({ speculate: 'prompt-lookup', stepClock: clock });
      const s = await run(driver, { promptIds: prompt, maxTokens: 60, stopTokenIds: [] });
      expect(s.o.tokens).toEqual(plain.tokens);
      await driver.stop();
      return { ...s.o.speculation!, steps: driver.stats.steps };
    };
    // A row costing a whole step: no draft pays (each token costs its row, and not every one is accepted); probes only.
    const dear = await drafting(0, 1);
    // Rows nearly free: long drafts, the step count falling well below the tokens.
    const cheap = await drafting(1, 0.01);
    console.log(`dear rows: ${dear.accepted}/${dear.drafted} over ${dear.steps} steps; cheap rows: ${cheap.accepted}/${cheap.drafted} over ${cheap.steps} steps`);
    // Dear: short probes now and then (2 tokens every few steps), not a draft per step.
    expect(dear.drafted).toBeLessThan(plain.tokens.length / 2);
    expect(dear.steps).toBeGreaterThan(plain.tokens.length / 2);
    // Cheap: most tokens come out of accepted drafts, several per step.
    expect(cheap.accepted).toBeGreaterThan(plain.tokens.length / 2);
    expect(cheap.steps).toBeLessThan(plain.tokens.length / 4);
  });

  it('a prompt that does not repeat: hardly any draft rows, plain tokens', async () => {
    const driver = driverOf({ speculate: 'prompt-lookup' });
    // Ids that never repeat a pair, and a high temperature so the output does not cycle either.
    const prompt = Array.from({ length: 40 }, (_, j) => (j * 29 + 3) % 256);
    const plain = await generate(single, prompt, { maxTokens: 60, stopTokenIds: [], temperature: 1.5, seed: 1 });
    const s = await run(driver, { promptIds: prompt, maxTokens: 60, stopTokenIds: [], temperature: 1.5, seed: 1 });
    expect(s.o.tokens).toEqual(plain.tokens);
    console.log(`non-repetitive: ${s.o.speculation!.accepted}/${s.o.speculation!.drafted} draft tokens accepted over ${driver.stats.steps} steps`);
    expect(driver.stats.rows - prompt.length).toBeLessThan(60 * 1.5);
    await driver.stop();
  });
});
