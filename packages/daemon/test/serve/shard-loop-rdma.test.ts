/**
 * The shard loop's real traffic (headers, hidden states between stages, stage all-reduces, several
 * sequences in flight) over the runner data plane on the simulated RDMA fabric, with one link fallen back
 * to TCP: greedy tokens must equal the unsplit model's.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel, pipelineStages } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { listenTcp } from '../../src/runner/transport.js';
import { createDataPlane } from '../../src/runner/data-plane.js';
import { RDMA_SIM_ENV, selectRdma } from '../../src/runner/rdma-select.js';
import { loadRankShard, startRank } from '../../src/runner/local.js';
import type { InstanceLayout } from '@orchard/engine';

let dir: string;
const prompt = [1, 40, 50, 60, 70, 80, 90];

beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-loop-rdma-'));
  writeRandomModel(dir, { numLayers: 4, hiddenSize: 64, numHeads: 4, numKvHeads: 2, seed: 11 });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('shard loop over the RDMA data plane (simulated fabric)', () => {
  it('2 stages x tensor 2, link 1 <-> 3 on TCP after a failed RTR: two concurrent requests give the unsplit tokens', async () => {
    const layout: InstanceLayout = { stages: pipelineStages(4, 2), tensor: 2 };
    const size = 4;
    const listeners = await Promise.all(Array.from({ length: size }, () => listenTcp({ host: '127.0.0.1' })));
    const peers = listeners.map((l) => ({ addresses: [l.address] }));
    const env = { [RDMA_SIM_ENV]: JSON.stringify({ failRtr: [[1, 3]] }) };
    const selections = await Promise.all(listeners.map((_, rank) => selectRdma(rank, peers, env[RDMA_SIM_ENV] ?? null)));
    const planes = await Promise.all(
      listeners.map((listener, rank) => createDataPlane({ rank, peers, groupId: 'loop', secret: new Uint8Array(32).fill(1), listener, connectTimeoutMs: 5000, rdma: selections[rank]! })),
    );
    try {
      expect(planes[1]!.links.map((l) => `${l.peer}:${l.transport}`)).toEqual(['0:rdma', '2:rdma', '3:tcp']);
      const groups = planes.map((p) => p.group);
      const ranks = groups.map((g) => startRank(g, layout, loadRankShard(dir, layout, g.rank, g, { maxBatch: 4 }), { stepMs: 5000 }));
      const driver = ranks[0]!.driver!;
      const single = () => loadInProcessModel(dir, { maxBatch: 4 });
      const want = await generate(single(), prompt, { maxTokens: 10, stopTokenIds: [] });
      const want2 = await generate(single(), prompt.slice(0, 3), { maxTokens: 6, stopTokenIds: [] });
      const [a, b] = await Promise.all([
        driver.generate({ promptIds: prompt, maxTokens: 10, stopTokenIds: [] }, () => true),
        driver.generate({ promptIds: prompt.slice(0, 3), maxTokens: 6, stopTokenIds: [] }, () => true),
      ]);
      expect(a.tokens).toEqual(want.tokens);
      expect(b.tokens).toEqual(want2.tokens);
      await driver.stop();
      await Promise.all(ranks.map((r) => r.done));
    } finally {
      await Promise.all(planes.map((p) => p.group.close()));
      await Promise.all(selections.map((s) => s.close()));
    }
  }, 30_000);
});
