/**
 * Served MTP drafting (runner/mtp-draft.ts) in a one-rank instance's batch driver, on a random
 * DeepSeek-V3-shaped checkpoint written with its multi-token-prediction layer:
 * - requests speculating with `mtp` beside a plain one and a prompt-lookup one get plain decode's
 *   tokens, greedy and seeded sampling (a random MTP layer's drafts are mostly rejected: the policy
 *   stops drafting then, with probes; the acceptance is printed, not asserted);
 * - what the drafters are given is right: every hidden row a drafter is confirmed with equals the
 *   model's own final hidden state at that position (the in-process model's finalHidden over the whole
 *   sequence), and the positions run from 0 without a gap;
 * - `mtp` on a driver without the layer is the request's error.
 */
import { join } from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel, MtpDrafter, MtpHead, pipelineStages, type GenerateResult } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { BatchDriver } from '../../src/runner/batch-driver.js';
import { loadRankShard } from '../../src/runner/local.js';
import { createSimGroup } from '../../src/runner/transport.js';
import type { GenerateRequest } from '../../src/runner/requests.js';

let dir: string;
let head: MtpHead;
const layout = { stages: pipelineStages(2, 1), tensor: 1 };
const PROMPT = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 10, 72, 101, 108];

beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-mtp-serve-'));
  writeRandomModel(dir, { variant: 'deepseek-v3', seed: 21, numLayers: 2, mtpLayers: 1 });
  head = MtpHead.load(dir, { maxBatch: 16 });
});
afterAll(() => {
  head.dispose();
  rmSync(dir, { recursive: true, force: true });
});

function driverOf(mtp?: MtpHead): BatchDriver {
  const [group] = createSimGroup(1);
  return new BatchDriver(loadRankShard(dir, layout, 0, group, { maxBatch: 16 }), { mtp, speculate: 'mtp' });
}

describe('MTP drafting in the batch driver', () => {
  it('plain tokens beside other requests (greedy, seeded sampling); drafters confirmed with the model’s own final hidden states', async () => {
    const confirms: { drafter: MtpDrafter; from: number; rows: Float32Array }[] = [];
    const D = head.config.hiddenSize;
    // Every confirm the driver makes, recorded on its way to the drafter.
    const real = MtpDrafter.prototype.confirm;
    MtpDrafter.prototype.confirm = function (this: MtpDrafter, from: number, hidden: Float32Array, n: number) {
      confirms.push({ drafter: this, from, rows: hidden.slice(0, n * D) });
      return real.call(this, from, hidden, n);
    };
    try {
      const driver = driverOf(head);
      const reqs: GenerateRequest[] = [
        { promptIds: PROMPT, maxTokens: 20, stopTokenIds: [] },
        { promptIds: PROMPT.slice(3), maxTokens: 18, stopTokenIds: [], temperature: 0.8, topK: 30, seed: 7 },
        { promptIds: PROMPT.slice(0, 9), maxTokens: 16, stopTokenIds: [], speculate: 'off' },
        { promptIds: [...PROMPT, ...PROMPT], maxTokens: 16, stopTokenIds: [], speculate: 'prompt-lookup' },
      ];
      const model = loadInProcessModel(dir, { maxBatch: 64 });
      const want: GenerateResult[] = [];
      for (const r of reqs) want.push(await generate(model, r.promptIds, { maxTokens: r.maxTokens, stopTokenIds: [], temperature: r.temperature, topK: r.topK, seed: r.seed }));
      const got = await Promise.all(reqs.map((r) => driver.generate(r, () => true)));
      got.forEach((o, i) => expect(o.tokens, `request ${i}`).toEqual(want[i].tokens));
      console.log(`mtp drafts (random layer): ${got.slice(0, 2).map((o) => `${o.speculation!.accepted}/${o.speculation!.drafted}`).join(', ')} accepted`);
      expect(got[0].speculation!.drafted).toBeGreaterThan(0);
      expect(got[2].speculation).toBeUndefined();
      await driver.stop();

      // Per drafter: positions from 0 on without gaps, each row the model's own final hidden state there.
      const byDrafter = new Map<MtpDrafter, { from: number; rows: Float32Array }[]>();
      for (const c of confirms) byDrafter.set(c.drafter, [...(byDrafter.get(c.drafter) ?? []), c]);
      expect(byDrafter.size).toBe(2);
      let checked = 0;
      for (const calls of byDrafter.values()) {
        let at = 0;
        for (const c of calls) {
          expect(c.from).toBe(at);
          at += c.rows.length / D;
        }
        // A finished sequence's cache holds its prompt and every token but the last: so many rows were confirmed.
        const j = [0, 1].find((k) => reqs[k].promptIds.length + got[k].tokens.length - 1 === at);
        expect(j, `a drafter confirmed ${at} rows`).toBeDefined();
        const seq = [...reqs[j!].promptIds, ...got[j!].tokens];
        const session = model.newSession();
        await session.forward(seq.slice(0, at));
        const ref = session.finalHidden!(at);
        let worst = 0;
        for (const c of calls) for (let k = 0; k < c.rows.length; k++) worst = Math.max(worst, Math.abs(c.rows[k] - ref[c.from * D + k]));
        expect(worst).toBeLessThan(1e-3);
        checked += at;
        session.dispose?.();
      }
      expect(checked).toBeGreaterThan(PROMPT.length);
      model.dispose();
    } finally {
      MtpDrafter.prototype.confirm = real;
    }
  });

  it("a request speculating with 'mtp' on a driver without the layer is that request's error", async () => {
    const driver = driverOf(undefined);
    await expect(driver.generate({ promptIds: PROMPT, maxTokens: 4, stopTokenIds: [] }, () => true)).rejects.toThrow(/speculate 'mtp'.*no multi-token-prediction layer/);
    await driver.stop();
  });
});
