/**
 * Ring topology (cables only between neighbours) on the simulated fabric, Apple rules: only rank±1 get
 * queue pairs; collectives go around the ring. Simulation only.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { floatToHalf as f32ToF16, halfToFloat } from '../../src/collectives/reduce.js';
import type { Group } from '../../src/group.js';
import { runGroupConformance } from '../../src/testing/conformance.js';
import { rankData, simMesh, type SimMesh } from './helpers.js';

let mesh: SimMesh | null = null;
afterEach(async () => {
  await mesh?.close();
  mesh = null;
});

/** Small integers: sums are exact in any order, so the ring's cyclic order can be checked exactly. */
function ints(rank: number, n: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => ((i * 7 + rank * 13) % 201) - 100);
}

describe('RDMA ring topology on the simulated fabric', () => {
  for (const size of [3, 5, 8]) {
    it(`${size} ranks: only neighbour links, all-reduce exact and identical, all-gather in rank order`, async () => {
      mesh = await simMesh({ size, topology: 'ring' });
      for (const [r, choices] of mesh.choices.entries()) {
        expect(choices.map((c) => c.peer).sort((a, b) => a - b)).toEqual([(r + 1) % size, (r - 1 + size) % size].sort((a, b) => a - b));
        expect(choices.every((c) => c.transport === 'rdma')).toBe(true);
      }
      for (const n of [0, 1, 7, 1023, 8193, 40_003]) {
        for (const op of ['sum', 'max'] as const) {
          const inputs = mesh.groups.map((_, r) => ints(r, n));
          const bufs = inputs.map((x) => x.slice());
          await Promise.all(mesh.groups.map((g, r) => g.allReduce(bufs[r]!, op)));
          for (let i = 0; i < n; i++) {
            let want = inputs[0]![i]!;
            for (let r = 1; r < size; r++) want = op === 'sum' ? want + inputs[r]![i]! : Math.max(want, inputs[r]![i]!);
            if (bufs[0]![i] !== want) throw new Error(`n=${n} ${op} index ${i}: ${bufs[0]![i]} != ${want}`);
          }
          for (const b of bufs) expect(Buffer.from(b.buffer).equals(Buffer.from(bufs[0]!.buffer))).toBe(true);
        }
        const rnd = mesh.groups.map((_, r) => rankData(r, n, 3));
        await Promise.all(mesh.groups.map((g, r) => g.allReduce(rnd[r]!)));
        for (const b of rnd) expect(Buffer.from(b.buffer).equals(Buffer.from(rnd[0]!.buffer)), `random n=${n}`).toBe(true);
      }
      const halves = mesh.groups.map((_, r) => Uint16Array.from(ints(r, 999), (v) => f32ToF16(v)));
      await Promise.all(mesh.groups.map((g, r) => g.allReduce(halves[r]!)));
      expect(halfToFloat(halves[0]![5]!)).toBe(mesh.groups.reduce((s, _, r) => s + ints(r, 999)[5]!, 0));
      const outs = mesh.groups.map(() => new Uint8Array(3 * size));
      await Promise.all(mesh.groups.map((g, r) => g.allGather(Uint8Array.of(r, r + 1, r + 2), outs[r]!)));
      for (const o of outs) expect(Array.from(o)).toEqual(mesh.groups.flatMap((_, r) => [r, r + 1, r + 2]));
    });
  }

  it('point-to-point to a rank with no cable is a usage error naming the neighbours', async () => {
    mesh = await simMesh({ size: 5, topology: 'ring' });
    await expect(mesh.groups[0]!.send(2, new Uint8Array(1))).rejects.toThrow(/no link to rank 2 \(ring topology: only ranks 4 and 1\)/);
  });
});

const rings: SimMesh[] = [];
afterAll(async () => {
  await Promise.all(rings.map((m) => m.close()));
});
runGroupConformance(
  'RDMA ring over the simulated fabric (Apple rules)',
  async (size): Promise<Group[]> => {
    const m = await simMesh({ size, topology: 'ring', timeoutMs: 2000, depth: 4, sizeClasses: [4096, 65_536, 262_144] });
    rings.push(m);
    return m.groups;
  },
  { sizes: [1, 2, 3, 4, 8], largeBytes: 8 << 20 },
);
