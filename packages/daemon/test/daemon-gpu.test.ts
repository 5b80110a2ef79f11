/**
 * A daemon whose runners use the GPU (lavapipe here, allowed explicitly through the environment, as
 * `orchard start --backend gpu --allow-software-gpu` sets it): its profile carries the GPU and the
 * planner's cluster JSON gives the measured GPU copy bandwidth as the node's memory bandwidth.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/config/options.js';
import { startOrchard } from '../src/orchard.js';
import { openTestGpu } from './gpu-env.js';

const { ctx: probe, skip } = await openTestGpu();
probe?.destroy();

describe.skipIf(!!skip)(`daemon with GPU runners${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('reports the GPU in its profile and its copy bandwidth in the cluster JSON', async () => {
    const dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-daemon-gpu-'));
    const options = resolveOptions({ dataDir, apiPort: '0', listen: ['/ip4/127.0.0.1/tcp/0'], mdns: false, backend: 'gpu', allowSoftwareGpu: true }, {});
    const node = await startOrchard(options, pino({ level: 'silent' }), { serving: false, dashboard: false });
    const { daemon } = node;
    try {
      const backend = daemon.engineBackend!;
      expect(backend.kind).toBe('gpu');
      expect(backend.gpu!.adapter).toMatch(/llvmpipe|lavapipe/);
      const base = `http://127.0.0.1:${node.apiPort}`;
      let cluster: any;
      const deadline = Date.now() + 15_000;
      while (Date.now() < deadline) {
        cluster = await (await fetch(`${base}/api/cluster`)).json();
        if (cluster.nodes.length === 1) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      const self = daemon.replica.state.nodes[daemon.node.peerId.toString()].profile!;
      expect(self.gpu).toEqual(backend.gpu);
      const gpuGBps = backend.gpu!.copyBandwidthGBps;
      // The cluster JSON rounds to a few significant digits.
      expect(Math.abs(cluster.nodes[0].memoryBandwidthGBps / gpuGBps - 1)).toBeLessThan(0.01);
      expect(Math.abs(cluster.nodes[0].memoryBandwidthGBps - self.capability!.memoryBandwidthGBps)).toBeGreaterThan(0.01);
    } finally {
      await node.stop();
    }
  }, 60_000);
});
