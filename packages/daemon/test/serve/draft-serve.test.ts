/**
 * `--speculate draft --draft-model DIR` through a serving daemon: the option reaches the instance's
 * runner, which drafts with it (a request asking `draft` of an instance without one is a 400, see
 * dialects/serve-tools.test.ts), and the answers are the plain ones, greedy and seeded sampling.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { writeRandomModel } from '@orchard/engine/testing';
import type { Orchard } from '../../src/orchard.js';
import { api, startServingDaemon, waitFor } from './in-process-pod.js';

const MODEL = 'test-org/draft-target';
let daemon: Orchard;
let dataDir: string;
let draftDir: string;

beforeAll(async () => {
  draftDir = mkdtempSync(join(os.tmpdir(), 'orchard-draft-serve-'));
  // Same tokenizer as the target (the random models' default), other weights, one layer.
  writeRandomModel(draftDir, { numLayers: 1, hiddenSize: 32, numHeads: 2, numKvHeads: 1, seed: 2 });
  ({ daemon, dataDir } = await startServingDaemon({ tmpPrefix: 'orchard-draft-serve-', bootstrap: [], model: { repo: MODEL, options: { numLayers: 2, hiddenSize: 64, seed: 9 } }, flags: { speculate: 'draft', draftModel: draftDir } }));
  await waitFor('the node with its profile', () => daemon.daemon.cluster().nodes.length === 1 || undefined, 30_000, 100);
}, 60_000);
afterAll(async () => {
  await daemon?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(draftDir, { recursive: true, force: true });
});

const complete = async (body: Record<string, unknown>) => {
  const r = await api(daemon, '/v1/completions', { method: 'POST', body: JSON.stringify({ model: MODEL, prompt: 'abc abc abc', max_tokens: 16, ...body }) });
  return { status: r.status, body: (await r.json()) as { choices: { text: string }[]; usage: unknown } };
};

it('a daemon started with --speculate draft --draft-model answers what plain decode answers (greedy and seeded sampling)', async () => {
  for (const sampling of [{ temperature: 0 }, { temperature: 0.8, seed: 4 }]) {
    const drafted = await complete(sampling);
    expect(drafted.status, JSON.stringify(drafted.body)).toBe(200);
    const plain = await complete({ ...sampling, speculate: 'off' });
    expect(plain.status).toBe(200);
    expect(drafted.body.choices[0].text).toBe(plain.body.choices[0].text);
    expect(drafted.body.usage).toEqual(plain.body.usage);
  }
  // Asked for by name too (the daemon's default is already draft).
  expect((await complete({ temperature: 0, speculate: 'draft' })).status).toBe(200);
}, 120_000);

it("the node's profile says what its draft model and prefix cache keep outside the plan, and the planner is offered that much less", () => {
  const self = Object.values(daemon.daemon.replica.state.nodes)[0].profile!;
  // the draft's weights and K/V on top of the 64 MiB prefix cache
  expect(self.reservedBytes).toBeGreaterThan(64 * 2 ** 20);
  const offered = daemon.daemon.cluster().nodes[0].availableBytes;
  expect(offered).toBeLessThanOrEqual(Math.max(0, self.memory.availableBytes - self.reservedBytes!));
});
