/** The in-process all-reduce: fixed rank-order sums, identical results on every rank, whatever the arrival order. */
import { describe, expect, it } from 'vitest';
import { createInProcessAllReduce } from '../src/index.js';

describe('createInProcessAllReduce', () => {
  it('sums ((b0 + b1) + b2) + b3 in f32 and gives every rank the same bits, whatever order ranks arrive in', async () => {
    // Values chosen so f32 addition order matters: 1e8 + 1 - 1e8 depends on grouping.
    const inputs = [[1e8, 0.1], [1, 0.2], [-1e8, 0.3], [1, 0.4]];
    const expected = Float32Array.from([0, 0]);
    for (const v of inputs) for (let i = 0; i < 2; i++) expected[i] += Math.fround(v[i]);
    for (const order of [[0, 1, 2, 3], [3, 1, 0, 2]]) {
      const reduce = createInProcessAllReduce(4);
      const bufs = inputs.map((v) => Float32Array.from(v));
      await Promise.all(order.map((r) => reduce[r](bufs[r])));
      for (const b of bufs) expect(Array.from(b)).toEqual(Array.from(expected));
    }
    expect(expected[0]).toBe(1); // (1e8 + 1) rounds to 1e8 in f32; a different order would give 2 or 0
  });

  it('runs round after round, and rejects mismatched lengths and double entry', async () => {
    const reduce = createInProcessAllReduce(2);
    for (let round = 1; round <= 3; round++) {
      const a = Float32Array.from([round]);
      const b = Float32Array.from([10 * round]);
      await Promise.all([reduce[0](a), reduce[1](b)]);
      expect([a[0], b[0]]).toEqual([11 * round, 11 * round]);
    }
    await expect(Promise.all([reduce[0](new Float32Array(2)), reduce[1](new Float32Array(3))])).rejects.toThrow(/rank 1 sent 3 values, rank 0 sent 2/);
    const first = reduce[0](new Float32Array(1));
    await expect(reduce[0](new Float32Array(1))).rejects.toThrow(/rank 0 entered twice/);
    await Promise.all([first, reduce[1](new Float32Array(1))]);
  });
});
