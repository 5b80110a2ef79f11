import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/config/options.js';
import { startOrchard } from '../src/orchard.js';
import { writeClusterKey } from '../src/identity/cluster-key.js';

describe('Daemon in process', () => {
  it('starts on loopback, serves its routes behind the token, lists itself, and stops cleanly', async () => {
    const dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-daemon-'));
    const options = resolveOptions({ dataDir, apiPort: '0', listen: ['/ip4/127.0.0.1/tcp/0'], mdns: false, apiToken: 'tok' }, {});
    const node = await startOrchard(options, pino({ level: 'silent' }), { serving: false, dashboard: false });
    const { daemon } = node;
    const base = `http://127.0.0.1:${node.apiPort}`;
    try {
      const auth = { authorization: 'Bearer tok' };
      expect((await fetch(`${base}/api/status`)).status).toBe(401);
      expect(((await (await fetch(`${base}/api/status`, { headers: auth })).json()) as { self: unknown }).self).toMatchObject({ peerId: daemon.node.peerId.toString(), apiPort: node.apiPort });
      const deadline = Date.now() + 15_000;
      let cluster: any;
      while (Date.now() < deadline) {
        cluster = await (await fetch(`${base}/api/cluster`, { headers: auth })).json();
        if (cluster.nodes.length === 1) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(cluster.mode).toBe('open');
      expect(cluster.nodes[0].id).toBe(daemon.node.peerId.toString());
      expect(cluster.coordinator).toBe(daemon.node.peerId.toString());
      expect(cluster.nodes[0].memoryBandwidthGBps).toBeGreaterThan(0);
    } finally {
      await node.stop();
    }
    await expect(fetch(`${base}/healthz`)).rejects.toThrow();
  });

  it('in a private pod the link-probe port is open only where pod members reach it (here: none yet, so 127.0.0.1 alone)', async () => {
    const dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-daemon-'));
    const keyFile = join(dataDir, 'pod.key');
    writeClusterKey(keyFile);
    const options = resolveOptions({ dataDir, apiPort: '0', listen: ['/ip4/127.0.0.1/tcp/0'], mdns: false, clusterKey: keyFile }, {});
    const node = await startOrchard(options, pino({ level: 'silent' }), { serving: false, dashboard: false });
    try {
      const self = node.daemon.status().self;
      expect(self.probeAddresses).toEqual(['127.0.0.1']);
      // Another address of this machine (Linux routes 127/8 to lo): closed, where before every address was open.
      const open = await new Promise<boolean>((resolve) => {
        const s = net.connect({ host: '127.0.0.2', port: self.probePort });
        s.once('connect', () => (s.destroy(), resolve(true)));
        s.once('error', () => resolve(false));
      });
      expect(open).toBe(false);
    } finally {
      await node.stop();
    }
  });
});
