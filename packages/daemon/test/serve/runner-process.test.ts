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
});
