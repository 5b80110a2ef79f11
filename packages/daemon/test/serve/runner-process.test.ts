import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel, pipelineStages } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { startLocalInstance } from '../../src/runner/runner-process.js';

let dir: string;
const prompt = [1, 33, 44, 55, 66, 77];

beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-runner-'));
  writeRandomModel(dir, { numLayers: 4, hiddenSize: 64, seed: 3 });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('runner processes over TCP', () => {
  it('a 2-stage pipeline in two processes streams the unsplit greedy tokens; killing a stage fails the next request fast', async () => {
    const want = await generate(loadInProcessModel(dir), prompt, { maxTokens: 10, stopTokenIds: [] });
    const runners = await startLocalInstance({ modelDir: dir, layout: { stages: pipelineStages(4, 2), tensor: 1 }, groupId: 'test-1', secret: 'ab'.repeat(16), listenHost: '127.0.0.1', stepMs: 3000 });
    try {
      const seen: number[] = [];
      const out = await runners[0].generate({ promptIds: prompt, maxTokens: 10, stopTokenIds: [] }, (t) => seen.push(t));
      expect(out.tokens).toEqual(want.tokens);
      expect(seen).toEqual(want.tokens);
      runners[1].child.kill('SIGKILL');
      const t0 = Date.now();
      await expect(runners[0].generate({ promptIds: prompt, maxTokens: 50, stopTokenIds: [] }, () => undefined)).rejects.toThrow();
      expect(Date.now() - t0).toBeLessThan(5000);
    } finally {
      await Promise.all(runners.map((r) => r.stop(500)));
    }
  }, 60_000);

  it('a one-process instance serves 8 concurrent requests, each with its tokens alone, refuses a ninth, and ends a cancelled one with abort', async () => {
    const single = loadInProcessModel(dir);
    const prompts = Array.from({ length: 8 }, (_, i) => prompt.map((t) => (t + i * 13) % 256).slice(0, 3 + (i % 4)));
    const want: number[][] = [];
    for (const p of prompts) want.push((await generate(single, p, { maxTokens: 12, stopTokenIds: [] })).tokens);
    const runners = await startLocalInstance({ modelDir: dir, layout: { stages: pipelineStages(4, 1), tensor: 1 }, groupId: 'test-2', secret: 'cd'.repeat(16), listenHost: '127.0.0.1' });
    try {
      // The tokens of a step (8 sequences) reach the daemon as one message, not one each (token-batch.ts).
      let tokenMessages = 0;
      const count = (m: unknown) => void ((m as { type: string }).type.startsWith('token') && tokenMessages++);
      runners[0].child.on('message', count);
      const outs = await Promise.all(prompts.map((p) => runners[0].generate({ promptIds: p, maxTokens: 12, stopTokenIds: [] }, () => undefined)));
      runners[0].child.off('message', count);
      expect(outs.map((o) => o.tokens)).toEqual(want);
      expect(tokenMessages).toBeGreaterThan(0);
      expect(tokenMessages).toBeLessThanOrEqual(8 * 12 / 4);
      // A ninth at once is refused by the runner (the daemon's executor queues it instead).
      const nine = [...prompts, prompt].map((p) => runners[0].generate({ promptIds: p, maxTokens: 200, stopTokenIds: [] }, () => undefined));
      await expect(nine[8]).rejects.toThrow(/all 8 sequence slots are busy/);
      // Cancelling one (the client went away) ends it with abort; the instance serves on.
      const abort = new AbortController();
      await Promise.allSettled(nine.slice(0, 8));
      const long = runners[0].generate({ promptIds: prompt, maxTokens: 500, stopTokenIds: [] }, () => abort.abort(), abort.signal);
      expect((await long).finishReason).toBe('abort');
      const again = await runners[0].generate({ promptIds: prompts[1], maxTokens: 12, stopTokenIds: [] }, () => undefined);
      expect(again.tokens).toEqual(want[1]);
    } finally {
      await Promise.all(runners.map((r) => r.stop(500)));
    }
  }, 60_000);

  it('a lone stream of fast steps reaches the daemon in fewer token messages than tokens, all of them in order; tokenIntervalMs 0 sends one per step', async () => {
    const want = (await generate(loadInProcessModel(dir), prompt, { maxTokens: 60, stopTokenIds: [] })).tokens;
    const messagesFor = async (tokenIntervalMs?: number) => {
      const runners = await startLocalInstance({ modelDir: dir, layout: { stages: pipelineStages(4, 1), tensor: 1 }, groupId: 'test-3', secret: 'ef'.repeat(16), listenHost: '127.0.0.1', ...(tokenIntervalMs === undefined ? {} : { tokenIntervalMs }) });
      try {
        let messages = 0;
        const count = (m: unknown) => void ((m as { type: string }).type.startsWith('token') && messages++);
        runners[0].child.on('message', count);
        const seen: number[] = [];
        const out = await runners[0].generate({ promptIds: prompt, maxTokens: 60, stopTokenIds: [] }, (t) => seen.push(t));
        expect(out.tokens).toEqual(want);
        expect(seen).toEqual(want);
        return messages;
      } finally {
        await Promise.all(runners.map((r) => r.stop(500)));
      }
    };
    // A step of this model takes well under the 2 ms between messages.
    expect(await messagesFor()).toBeLessThan(60);
    expect(await messagesFor(0)).toBe(60);
  }, 60_000);
});
