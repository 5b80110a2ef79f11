/**
 * Group life cycle: several addresses per peer, and close() releasing every handle.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createTcpGroup } from '../src/tcp/group.js';
import { listenTcp } from '../src/tcp/listener.js';
import { workerCommand } from '../src/testing/ranks.js';

async function deadPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe('TCP group life cycle', () => {
  it('tries a peer’s addresses in order and connects through the one that answers', async () => {
    const l0 = await listenTcp();
    const l1 = await listenTcp();
    const peers = [
      { addresses: [{ host: '127.0.0.1', port: await deadPort() }, l0.address] },
      { addresses: [l1.address] },
    ];
    const gs = await Promise.all([
      createTcpGroup({ rank: 0, peers, listener: l0, groupId: 'multi', secret: 'k' }),
      createTcpGroup({ rank: 1, peers, listener: l1, groupId: 'multi', secret: 'k', connectTimeoutMs: 5000 }),
    ]);
    const bufs = [Float32Array.of(1, 2), Float32Array.of(10, 20)];
    await Promise.all(gs.map((g, r) => g.allReduce(bufs[r])));
    expect([...bufs[0]]).toEqual([11, 22]);
    await Promise.all(gs.map((g) => g.close()));
  });

  it('reports a peer that never comes, naming its rank and address, within the connect timeout', async () => {
    const l0 = await listenTcp();
    const port = await deadPort();
    const peers = [{ addresses: [l0.address] }, { addresses: [{ host: '127.0.0.1', port }] }];
    const t0 = performance.now();
    const err = await createTcpGroup({ rank: 1, peers, listener: await listenTcp(), groupId: 'x', secret: 'k', connectTimeoutMs: 600 }).catch((e) => e);
    expect(performance.now() - t0).toBeLessThan(3000);
    expect(err.message).toMatch(new RegExp(`rank 0 \\(127\\.0\\.0\\.1:${l0.address.port}\\)`));
    await l0.close();
    void port;
  });

  it('close() releases every socket, timer and listener: the process exits by itself', async () => {
    const script = fileURLToPath(new URL('./fixtures/close-exits.ts', import.meta.url));
    const { command, args } = workerCommand();
    const child = spawn(command, [args[0], args[1], script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const code = await new Promise<number | null>((resolve) => {
      const t = setTimeout(() => {
        child.kill('SIGKILL');
        resolve(null);
      }, 20_000);
      child.once('exit', (c) => {
        clearTimeout(t);
        resolve(c);
      });
    });
    expect(out).toContain('closed');
    expect(code, `did not exit on its own: ${out}`).toBe(0);
  });
});
