import { describe, expect, it } from 'vitest';
import { PeerClosedError, PeerTimeoutError } from '../src/errors.js';
import { createSimFabric, createSimGroup } from '../src/sim/fabric.js';
import { runGroupConformance } from '../src/testing/conformance.js';

runGroupConformance('simulated fabric', async (size) => createSimGroup(size, { timeoutMs: 2000 }));

describe('simulated fabric specifics', () => {
  it('all-reduce stays right when a group reuses a buffer, switches buffers, views and dtypes', async () => {
    // The direct algorithm keeps its views between calls while the buffer is the same.
    for (const size of [2, 3]) {
      const gs = createSimGroup(size, { timeoutMs: 2000 });
      const bigs = gs.map(() => new Float32Array(5000));
      const plan: Array<(r: number) => Float32Array | Uint16Array> = [
        (r) => bigs[r].subarray(0, 1000),
        (r) => bigs[r].subarray(0, 1000), // same views again
        () => new Float32Array(1000), // another buffer, same size
        (r) => bigs[r].subarray(7, 1007), // same memory, another offset
        () => new Float32Array(3000), // larger: the staging grows
        () => new Uint16Array(1000),
      ];
      for (let step = 0; step < plan.length; step++) {
        const bufs = gs.map((_, r) => plan[step](r));
        bufs.forEach((b, r) => {
          for (let i = 0; i < b.length; i++) b[i] = b instanceof Uint16Array ? 0x3c00 : i * (r + 1) + step;
        });
        await Promise.all(gs.map((g, r) => g.allReduce(bufs[r])));
        for (const b of bufs) {
          for (let i = 0; i < b.length; i++) {
            let want = 0;
            for (let r = 0; r < size; r++) want += i * (r + 1) + step;
            if (b instanceof Uint16Array) expect(b[i]).toBe(size === 2 ? 0x4000 : 0x4200);
            else if (b[i] !== want) throw new Error(`size ${size} step ${step} index ${i}: ${b[i]} != ${want}`);
          }
        }
      }
      await Promise.all(gs.map((g) => g.close()));
    }
  });

  it('bandwidth and latency shape the transfer time', async () => {
    // 1 MiB at 0.5 Gbit/s is ~16.8 ms; with 20 ms latency a send+recv takes >= ~36 ms.
    const [a, b] = createSimGroup(2, { bandwidthGbps: 0.5, latencyUs: 20_000 });
    const buf = new Uint8Array(1 << 20);
    const t0 = performance.now();
    await Promise.all([a.send(1, buf), b.recv(0, new Uint8Array(1 << 20))]);
    const ms = performance.now() - t0;
    expect(ms).toBeGreaterThanOrEqual(35);
    expect(ms).toBeLessThan(1000);
    await Promise.all([a.close(), b.close()]);
  });

  it('a crashed rank makes the others reject promptly with an error naming it', async () => {
    const fabric = createSimFabric(3, { timeoutMs: 5000, failures: [{ rank: 2, mode: 'crash', afterMessages: 1 }] });
    const t0 = performance.now();
    const results = await Promise.allSettled(fabric.groups.map((g) => g.allReduce(new Float32Array(100_000))));
    expect(performance.now() - t0).toBeLessThan(2000);
    for (const r of results) expect(r.status).toBe('rejected');
    const msgs = results.map((r) => (r as PromiseRejectedResult).reason);
    expect(msgs.some((e) => e instanceof PeerClosedError && /rank 2/.test(e.message))).toBe(true);
    await Promise.all(fabric.groups.map((g) => g.close()));
  });

  it('a stalled rank makes the others time out, naming a peer', async () => {
    const fabric = createSimFabric(3, { timeoutMs: 300 });
    fabric.stall(1);
    const t0 = performance.now();
    const results = await Promise.allSettled([0, 2].map((r) => fabric.groups[r].allReduce(new Float32Array(10))));
    expect(performance.now() - t0).toBeLessThan(2000);
    for (const r of results) {
      expect(r.status).toBe('rejected');
      expect((r as PromiseRejectedResult).reason.message).toMatch(/rank \d/);
    }
    expect(results.some((r) => (r as PromiseRejectedResult).reason instanceof PeerTimeoutError)).toBe(true);
    await Promise.all(fabric.groups.map((g) => g.close()));
  });
});
