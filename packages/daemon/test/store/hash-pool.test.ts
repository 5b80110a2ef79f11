/**
 * Chunk hashing on worker threads: the same digests as in place, the bytes handed back intact; an idle
 * pool lets its process exit, a busy one keeps it alive until the digest arrives.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { HashPool } from '../../src/store/chunked/hash-pool.js';

describe('hash pool', () => {
  it('hashes large chunks on workers and small or shared ones in place, returning the same bytes', async () => {
    const pool = new HashPool(2);
    try {
      const chunks = [randomBytes(1000), ...Array.from({ length: 12 }, (_, i) => Buffer.from(randomBytes((1 << 20) + i)))];
      const copies = chunks.map((c) => Buffer.from(c));
      const slice = Buffer.from(randomBytes(2 << 20)).subarray(1024, (1 << 20) + 1024);
      const sliceCopy = Buffer.from(slice);
      const results = await Promise.all([...chunks, slice].map((c) => pool.digest(c)));
      [...copies, sliceCopy].forEach((want, i) => {
        expect(results[i].digest.equals(createHash('sha256').update(want).digest()), `chunk ${i}`).toBe(true);
        expect(results[i].bytes.equals(want), `chunk ${i} bytes`).toBe(true);
      });
      // A chunk moved to a worker is detached here: the returned buffer is the one to use.
      expect(chunks[1].byteLength).toBe(0);
      expect(slice.byteLength).toBe(1 << 20);
    } finally {
      await pool.close();
    }
  });

  it('a process whose only pending work is a digest waits for it, then exits on its own (nothing left open)', () => {
    const pool = fileURLToPath(new URL('../../src/store/chunked/hash-pool.ts', import.meta.url));
    // No timer, socket or await at top level keeps this process alive: only the worker's job does.
    const script = `
      import { HashPool } from ${JSON.stringify(pool)};
      const pool = new HashPool(1);
      const first = Buffer.from(new ArrayBuffer(4 << 20));
      pool.digest(first).then(({ digest }) => {
        console.log('first', digest.toString('hex').slice(0, 8));
        const second = Buffer.from(new ArrayBuffer(1 << 20));
        pool.digest(second).then(({ digest }) => console.log('second', digest.toString('hex').slice(0, 8)));
      });`;
    const started = Date.now();
    const dir = mkdtempSync(join(tmpdir(), 'hash-pool-'));
    const file = join(dir, 'hash-then-idle.mjs');
    writeFileSync(file, script);
    const r = spawnSync(process.execPath, ['--import', 'tsx', file], { encoding: 'utf8', timeout: 20_000 });
    rmSync(dir, { recursive: true, force: true });
    expect(r.signal, 'still running after 20 s: the pool kept the process alive').toBeNull();
    expect(r.status, r.stderr).toBe(0);
    const zeros = (n: number) => createHash('sha256').update(Buffer.alloc(n)).digest('hex').slice(0, 8);
    expect(r.stdout.trim().split('\n')).toEqual([`first ${zeros(4 << 20)}`, `second ${zeros(1 << 20)}`]);
    expect(Date.now() - started).toBeLessThan(20_000);
  });
});

