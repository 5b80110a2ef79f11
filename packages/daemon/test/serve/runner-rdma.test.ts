/**
 * Runner processes with the test-only simulated verbs (ORCHARD_RDMA_SIM): each runner's queue pairs reach
 * the other process over loopback sockets. Tokens must be the unsplit model's, over RDMA links as over a link
 * whose RDMA setup failed (TCP), and each runner reports its per-link choice to the daemon side.
 */
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
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-runner-rdma-'));
  writeRandomModel(dir, { numLayers: 2, hiddenSize: 64, seed: 5 });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function run(sim: string) {
  const runners = await startLocalInstance(
    { modelDir: dir, layout: { stages: pipelineStages(2, 1), tensor: 2 }, groupId: `rdma-${sim.length}`, secret: 'cd'.repeat(16), listenHost: '127.0.0.1', stepMs: 3000, rdmaSim: sim },
  );
  try {
    const out = await runners[0]!.generate({ promptIds: prompt, maxTokens: 8, stopTokenIds: [] }, () => undefined);
    return { tokens: out.tokens, links: runners.map((r) => r.links), dataPlane: runners.map((r) => r.dataPlane) };
  } finally {
    await Promise.all(runners.map((r) => r.stop(500)));
  }
}

describe('runner processes on the simulated RDMA fabric', () => {
  it('tensor parallel 2: RDMA link gives the unsplit tokens; a failed RTR falls back to TCP, same tokens, reason reported', async () => {
    const want = await generate(loadInProcessModel(dir), prompt, { maxTokens: 8, stopTokenIds: [] });
    const [viaRdma, viaFallback] = await Promise.all([run('1'), run(JSON.stringify({ failRtr: [[1, 0]] }))]);
    expect(viaRdma.links).toEqual([[{ peer: 1, transport: 'rdma', reason: 'rdma_sim1' }], [{ peer: 0, transport: 'rdma', reason: 'rdma_sim0' }]]);
    expect(viaRdma.dataPlane).toEqual(['rank 1: RDMA on rdma_sim1', 'rank 0: RDMA on rdma_sim0']);
    expect(viaRdma.tokens).toEqual(want.tokens);
    expect(viaFallback.links.flat().map((l) => l.transport)).toEqual(['tcp', 'tcp']);
    expect(viaFallback.links[1]![0]!.reason).toMatch(/^RTR\/RTS on rdma_sim0 failed: .*injected RTR failure/);
    expect(viaFallback.links[0]![0]!.reason).toMatch(/^rank 1 could not finish RDMA setup/);
    expect(viaFallback.dataPlane[0]).toMatch(/^all links TCP \(rank 1 could not finish RDMA setup/);
    expect(viaFallback.tokens).toEqual(want.tokens);
  }, 60_000);
});
