/** Chunk hashing on worker threads: the same digests as in place, the bytes handed back intact. */
import { createHash, randomBytes } from 'node:crypto';
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
});
