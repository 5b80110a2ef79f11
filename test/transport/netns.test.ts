/**
 * The TCP data plane between real network stacks: three hosts in their own network namespaces,
 * joined by a bridge. Skips when not root (namespaces need CAP_SYS_ADMIN).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMesh, type Mesh } from '@orchard/transport/testing';
import { spawnRanks, killRanks } from '../../packages/transport/src/testing/ranks.js';
import { createTestNet, netnsAvailable, type TestNet } from '../harness/netns.js';

describe.skipIf(!netnsAvailable())('TCP group across network namespaces', () => {
  let net: TestNet;
  let mesh: Mesh | undefined;
  beforeAll(async () => {
    net = await createTestNet({ hosts: 3, multicast: false });
  });
  afterAll(async () => {
    await mesh?.close();
    await net?.destroy();
  });

  it('forms an authenticated mesh over the bridge and all-reduces correctly, identical on every host', async () => {
    mesh = await startMesh(3, {
      hosts: net.hosts.map((h) => h.ip),
      spawner: (i, command, args) => net.hosts[i].spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] }),
      timeoutMs: 1500,
    });
    for (const elements of [7, 100_003, 4 * 1024 * 1024 + 3]) {
      const rs = await mesh.all<{ verified: boolean; sha256: string }>('allreduce', () => ({ elements, verifyStride: 101 }), 60_000);
      for (const r of rs) expect(r.verified, `elements=${elements}`).toBe(true);
      expect(new Set(rs.map((r) => r.sha256)).size).toBe(1);
    }
  });

  it('probes the link between two namespaces', async () => {
    const b = net.hosts[1];
    const procs = await spawnRanks(2, { spawner: (i, command, args) => net.hosts[i].spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] }) });
    try {
      const { port } = await procs[1].request<{ port: number }>('probe-listen', { host: b.ip, secret: 'k' });
      const r = await procs[0].request<{ latencyUs: number; bandwidthGbps: number }>('probe', { host: b.ip, port, secret: 'k', pings: 20, bulkBytes: 4 << 20 });
      expect(r.latencyUs).toBeGreaterThan(0);
      expect(r.bandwidthGbps).toBeGreaterThan(0.05);
      const wrong = await procs[0].request('probe', { host: b.ip, port, secret: 'nope', timeoutMs: 3000 }).catch((e: Error) => e);
      expect(String((wrong as Error).message)).toMatch(/AuthError/);
    } finally {
      killRanks(procs);
    }
  });

  it('a slow link (tc shaping to 40 Mbit/s) is not mistaken for a dead peer: a transfer far longer than the timeout completes', async () => {
    expect(mesh).toBeDefined();
    const host = net.hosts[0];
    host.exec('tc', ['qdisc', 'add', 'dev', 'eth0', 'root', 'tbf', 'rate', '40mbit', 'burst', '32kbit', 'latency', '400ms']);
    try {
      // ~5 s at 40 Mbit/s against a 1.5 s stall timeout; far more than the kernel's send buffer
      // can swallow, so the send itself lasts several timeouts. (The timeout must still exceed
      // the time the kernel needs to drain its send buffer, ~0.8 s here, before the ack can come.)
      const bytes = 24 * 1024 * 1024;
      const timeoutMs = 1500;
      const t0 = performance.now();
      await Promise.all([
        mesh!.ranks[0].request('sendrecv', { peer: 1, bytes, role: 'send', barrier: false, timeoutMs }, 60_000),
        mesh!.ranks[1].request('sendrecv', { peer: 0, bytes, role: 'recv', prepost: true, barrier: false, timeoutMs }, 60_000),
      ]);
      expect(performance.now() - t0).toBeGreaterThan(3000);
    } finally {
      host.exec('tc', ['qdisc', 'del', 'dev', 'eth0', 'root']);
    }
  });

  it('a host whose link goes down makes the others reject within the timeout, naming it', async () => {
    expect(mesh).toBeDefined();
    // The mesh must be healthy first, or this would pass on an earlier failure.
    const ok = await mesh!.all<{ verified: boolean }>('allreduce', () => ({ elements: 1000 }));
    expect(ok.every((r) => r.verified)).toBe(true);
    net.setLink(2, false);
    try {
      const t0 = performance.now();
      const results = await Promise.all(
        [0, 1].map((r) => mesh!.ranks[r].request('allreduce', { elements: 1_000_000 }, 20_000).then(() => null, (e: Error) => e.message)),
      );
      const ms = performance.now() - t0;
      for (const m of results) expect(m).toMatch(/rank \d \(10\.250\.\d+\.\d+:\d+\)/);
      expect(results.some((m) => m?.includes(`rank 2 (${net.hosts[2].ip}:`))).toBe(true);
      expect(ms).toBeLessThan(1500 + 3000);
    } finally {
      net.setLink(2, true);
    }
  });
});
