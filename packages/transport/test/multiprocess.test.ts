/**
 * Ranks in separate processes over real loopback sockets.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startMesh, type Mesh } from '../src/testing/mesh.js';

let mesh: Mesh | null = null;
afterEach(async () => {
  await mesh?.close();
  mesh = null;
});

type Result = { sha256: string; verified: boolean; ms: number[] };

describe('TCP group across processes (loopback)', () => {
  it('3 processes: all-reduce 1, odd, below/above threshold and 64 MiB sizes, identical on every rank', async () => {
    mesh = await startMesh(3);
    // 6000 x 4 B x 2 peers <= 48 KiB (direct) < 6400 x 4 B x 2 (ring).
    for (const elements of [1, 1001, 6000, 6400, 100_003, 16 * 1024 * 1024 + 1]) {
      const rs = await mesh.all<Result>('allreduce', () => ({ elements, verifyStride: elements > 1e6 ? 997 : 1 }), 120_000);
      for (const r of rs) expect(r.verified, `elements=${elements}`).toBe(true);
      expect(new Set(rs.map((r) => r.sha256)).size, `elements=${elements}`).toBe(1);
    }
    const f16 = await mesh.all<Result>('allreduce', () => ({ elements: 70_001, dtype: 'f16' }));
    for (const r of f16) expect(r.verified).toBe(true);
    expect(new Set(f16.map((r) => r.sha256)).size).toBe(1);
  });

  it('2 processes with AES-256-GCM and 4 with ChaCha20-Poly1305 give the same sums', async () => {
    mesh = await startMesh(2, { encrypt: 'aes-256-gcm' });
    const a = await mesh.all<Result>('allreduce', () => ({ elements: 300_001, iterations: 2 }));
    for (const r of a) expect(r.verified).toBe(true);
    await mesh.close();
    mesh = await startMesh(4, { encrypt: 'chacha20-poly1305' });
    const c = await mesh.all<Result>('allreduce', () => ({ elements: 300_001 }));
    for (const r of c) expect(r.verified).toBe(true);
    expect(new Set(c.map((r) => r.sha256)).size).toBe(1);
  });

  it('killing a rank mid-all-reduce makes the others reject within the timeout, naming a peer', async () => {
    const timeoutMs = 2000;
    mesh = await startMesh(3, { timeoutMs });
    const pending = [0, 1].map((r) =>
      mesh!.ranks[r].request('allreduce', { elements: 4 * 1024 * 1024, iterations: 1000, verify: false }, 30_000).then(
        () => ({ error: null as string | null, at: performance.now() }),
        (e: Error) => ({ error: e.message, at: performance.now() }),
      ),
    );
    void mesh.ranks[2].request('allreduce', { elements: 4 * 1024 * 1024, iterations: 1000, verify: false }, 30_000).catch(() => {});
    await new Promise((r) => setTimeout(r, 500));
    const killedAt = performance.now();
    mesh.ranks[2].kill('SIGKILL');
    const results = await Promise.all(pending);
    for (const r of results) {
      expect(r.error).toMatch(/rank \d \(127\.0\.0\.1:\d+\)/);
      expect(r.at - killedAt).toBeLessThan(timeoutMs + 1500);
    }
    // The dead rank itself is named by at least one survivor.
    expect(results.some((r) => /rank 2/.test(r.error!))).toBe(true);
  });

  it('a stalled (SIGSTOPped) rank makes the others time out, naming it', async () => {
    const timeoutMs = 800;
    mesh = await startMesh(3, { timeoutMs });
    await mesh.all('allreduce', () => ({ elements: 1000 }));
    mesh.ranks[1].kill('SIGSTOP');
    try {
      const t0 = performance.now();
      const results = await Promise.all(
        [0, 2].map((r) => mesh!.ranks[r].request('allreduce', { elements: 1_000_000 }, 20_000).then(() => null, (e: Error) => e.message)),
      );
      const ms = performance.now() - t0;
      for (const msg of results) expect(msg).toMatch(/timed out after 800 ms .*rank \d|lost/);
      expect(results.some((m) => /rank 1 \(/.test(m ?? ''))).toBe(true);
      expect(ms).toBeLessThan(timeoutMs + 2500);
    } finally {
      mesh.ranks[1].kill('SIGCONT');
    }
  });
});
