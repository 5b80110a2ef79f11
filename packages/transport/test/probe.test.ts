import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AuthError, ConnectError, probeLink, startProbeServer, type ProbeServer } from '../src/index.js';

let server: ProbeServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('link probe', () => {
  it('measures latency and bandwidth over loopback', async () => {
    server = await startProbeServer({ secret: 'cluster-secret' });
    const r = await probeLink({ host: server.host, port: server.port, secret: 'cluster-secret', pings: 20, bulkBytes: 4 << 20 });
    expect(r.rttUs).toBeGreaterThan(0);
    expect(r.latencyUs).toBeCloseTo(r.rttUs / 2);
    // Loopback is well above 0.1 Gbit/s and below 10 Tbit/s even on a loaded 2-core box.
    expect(r.bandwidthGbps).toBeGreaterThan(0.1);
    expect(r.bandwidthGbps).toBeLessThan(10_000);
    expect(r.bulkBytes).toBe(4 << 20);
  });

  it('rejects a client with the wrong secret', async () => {
    server = await startProbeServer({ secret: 'right' });
    await expect(probeLink({ host: server.host, port: server.port, secret: 'wrong', timeoutMs: 3000 })).rejects.toBeInstanceOf(AuthError);
  });

  it('names the address when nothing listens', async () => {
    const s = net.createServer();
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
    const port = (s.address() as net.AddressInfo).port;
    await new Promise((r) => s.close(r));
    const err = await probeLink({ host: '127.0.0.1', port, timeoutMs: 2000 }).catch((e) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect(String(err.message)).toContain(`127.0.0.1:${port}`);
  });

  it('times out against a server that never answers', async () => {
    const silent = net.createServer((s) => s.on('data', () => {}));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    const port = (silent.address() as net.AddressInfo).port;
    const t0 = Date.now();
    const err = await probeLink({ host: '127.0.0.1', port, timeoutMs: 300 }).catch((e) => e);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(String(err.message)).toMatch(/timed out|no answer/);
    silent.close();
  });

  it('aborts with the signal reason', async () => {
    server = await startProbeServer();
    const ac = new AbortController();
    const reason = new Error('stop now');
    const p = probeLink({ host: server.host, port: server.port, pings: 100000, signal: ac.signal });
    setTimeout(() => ac.abort(reason), 50);
    await expect(p).rejects.toBe(reason);
  });
});
