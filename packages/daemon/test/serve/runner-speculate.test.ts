/**
 * Speculation through a runner process (the daemon's path): the instance default (RunnerInit.batch
 * .speculate, from --speculate) and a request's own `speculate` reach the batching driver over IPC,
 * the streamed tokens are plain decode's, and the outcome says how many drafts were accepted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generate, loadInProcessModel, pipelineStages } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { InvalidRequestError, startLocalInstance } from '../../src/runner/runner-process.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-runner-spec-'));
  writeRandomModel(dir, { numLayers: 2, hiddenSize: 64, seed: 5 });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it('a one-process instance that speculates by default streams the plain tokens; a request can turn it off', async () => {
  const model = loadInProcessModel(dir);
  const seed = [1, 33, 44, 55, 66, 77];
  // The model's own continuation as the prompt: text that goes on repeating what it holds.
  const prompt = [...seed, ...(await generate(model, seed, { maxTokens: 40, stopTokenIds: [] })).tokens];
  const want = await generate(model, prompt, { maxTokens: 30, stopTokenIds: [] });
  model.dispose();
  const runners = await startLocalInstance({ modelDir: dir, layout: { stages: pipelineStages(2, 1), tensor: 1 }, groupId: 'test-spec', secret: 'ef'.repeat(16), listenHost: '127.0.0.1', batch: { sequences: 4, prefixCacheBytes: 0, speculate: 'prompt-lookup' } });
  try {
    const seen: number[] = [];
    const spec = await runners[0].generate({ promptIds: prompt, maxTokens: 30, stopTokenIds: [] }, (t) => seen.push(t));
    expect(spec.tokens).toEqual(want.tokens);
    expect(seen).toEqual(want.tokens);
    expect(spec.speculation!.accepted).toBeGreaterThan(0);
    const off = await runners[0].generate({ promptIds: prompt, maxTokens: 30, stopTokenIds: [], speculate: 'off' }, () => undefined);
    expect(off.tokens).toEqual(want.tokens);
    expect(off.speculation).toBeUndefined();
    // Asking for the draft model of an instance that has none is the request's fault (a 400), not the instance's.
    const noDraft = runners[0].generate({ promptIds: prompt, maxTokens: 4, stopTokenIds: [], speculate: 'draft' }, () => undefined);
    await expect(noDraft).rejects.toThrow(/no draft model/);
    await expect(noDraft).rejects.toBeInstanceOf(InvalidRequestError);
    expect(runners[0].dead).toBeNull();
  } finally {
    await Promise.all(runners.map((r) => r.stop(500)));
  }
}, 60_000);

it('a runner with a draft model (RunnerInit.batch.draftModel) speculates with it by default and streams the plain tokens; one whose draft model cannot load dies naming the path', async () => {
  const model = loadInProcessModel(dir);
  const prompt = [1, 12, 23, 34, 45];
  const want = await generate(model, prompt, { maxTokens: 20, stopTokenIds: [] });
  model.dispose();
  const base = { modelDir: dir, layout: { stages: pipelineStages(2, 1), tensor: 1 }, groupId: 'test-draft', secret: 'ef'.repeat(16), listenHost: '127.0.0.1' };
  // The model as its own draft: every drafted token is confirmed.
  const runners = await startLocalInstance({ ...base, batch: { sequences: 2, prefixCacheBytes: 0, speculate: 'draft', draftModel: dir } });
  try {
    const seen: number[] = [];
    const spec = await runners[0].generate({ promptIds: prompt, maxTokens: 20, stopTokenIds: [] }, (t) => seen.push(t));
    expect(spec.tokens).toEqual(want.tokens);
    expect(seen).toEqual(want.tokens);
    expect(spec.speculation!.drafted).toBeGreaterThan(0);
    expect(spec.speculation!.accepted).toBe(spec.speculation!.drafted);
  } finally {
    await Promise.all(runners.map((r) => r.stop(500)));
  }
  const missing = join(dir, 'no-such-draft');
  await expect(startLocalInstance({ ...base, groupId: 'test-draft-missing', batch: { sequences: 2, prefixCacheBytes: 0, speculate: 'draft', draftModel: missing } })).rejects.toThrow(`draft model ${missing}`);
}, 60_000);

it("a runner speculating with 'mtp' (--speculate mtp) drafts with the checkpoint's MTP layer and streams the plain tokens; one whose checkpoint has no such layer fails to start saying so", async () => {
  const ds = join(dir, 'deepseek-mtp');
  writeRandomModel(ds, { variant: 'deepseek-v3', seed: 21, numLayers: 2, mtpLayers: 1 });
  const model = loadInProcessModel(ds);
  const prompt = [72, 101, 108, 108, 111, 44, 32, 119];
  const want = await generate(model, prompt, { maxTokens: 16, stopTokenIds: [] });
  model.dispose();
  const base = { layout: { stages: pipelineStages(2, 1), tensor: 1 }, secret: 'ef'.repeat(16), listenHost: '127.0.0.1' };
  const runners = await startLocalInstance({ ...base, modelDir: ds, groupId: 'test-mtp', batch: { sequences: 2, prefixCacheBytes: 0, speculate: 'mtp' } });
  try {
    const seen: number[] = [];
    const spec = await runners[0].generate({ promptIds: prompt, maxTokens: 16, stopTokenIds: [] }, (t) => seen.push(t));
    expect(spec.tokens).toEqual(want.tokens);
    expect(seen).toEqual(want.tokens);
    expect(spec.speculation!.drafted).toBeGreaterThan(0);
  } finally {
    await Promise.all(runners.map((r) => r.stop(500)));
  }
  await expect(startLocalInstance({ ...base, modelDir: dir, groupId: 'test-mtp-none', batch: { sequences: 2, prefixCacheBytes: 0, speculate: 'mtp' } })).rejects.toThrow(/no multi-token-prediction layer/);
}, 60_000);
