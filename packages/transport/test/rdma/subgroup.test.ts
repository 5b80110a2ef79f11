/**
 * Sub-groups of the RDMA mesh group on the simulated fabric. RDMA links carry no tags: a sub-group shares
 * its parent's links and keeps apart from the parent's messages by order only (mesh-group.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { UsageError } from '../../src/errors.js';
import { referenceReduce, rankData, simMesh, within, type SimMesh } from './helpers.js';

let mesh: SimMesh | null = null;
afterEach(async () => {
  await mesh?.close();
  mesh = null;
});

describe('RDMA mesh group: sub-groups', () => {
  it('{0,1} and {2,3} all-reduce at once while the parent sends across them: right sums, same bits per pair', async () => {
    mesh = await simMesh({ size: 4 });
    const gs = mesh.groups;
    for (const n of [1, 1000, 40_003]) {
      const inputs = gs.map((g) => rankData(g.rank, n, n));
      const bufs = inputs.map((x) => new Float32Array(x));
      const msg = rankData(9, n, 1);
      const got = new Float32Array(n);
      const ops = gs.map((g) => g.subgroup(g.rank < 2 ? [0, 1] : [2, 3]).allReduce(bufs[g.rank]!));
      ops.push(gs[0]!.send(2, msg), gs[2]!.recv(0, got));
      await within(Promise.all(ops), 10_000, `n=${n}`);
      for (const [a, b] of [
        [0, 1],
        [2, 3],
      ] as const) {
        const want = referenceReduce([inputs[a]!, inputs[b]!], 'sum');
        expect(Buffer.from(bufs[a]!.buffer).equals(Buffer.from(want.buffer)), `n=${n}, rank ${a}`).toBe(true);
        expect(Buffer.from(bufs[b]!.buffer).equals(Buffer.from(want.buffer)), `n=${n}, rank ${b}`).toBe(true);
      }
      expect(Array.from(got)).toEqual(Array.from(msg));
    }
  });

  it('on a shared link, parent and sub-group messages issued in the same order on both ends', async () => {
    mesh = await simMesh({ size: 2 });
    const [a, b] = mesh.groups;
    const header = Uint8Array.of(1, 2, 3);
    const got = new Uint8Array(3);
    const bufs = [new Float32Array([1, 2]), new Float32Array([3, 4])];
    await within(
      Promise.all([a!.send(1, header), a!.subgroup([0, 1]).allReduce(bufs[0]!), b!.recv(0, got), b!.subgroup([0, 1]).allReduce(bufs[1]!)]),
      5000,
      'header then all-reduce',
    );
    expect(Array.from(got)).toEqual([1, 2, 3]);
    expect(Array.from(bufs[0]!)).toEqual([4, 6]);
    expect(Array.from(bufs[1]!)).toEqual([4, 6]);
  });

  it('member checks, one-rank no-op, the same object per list, closing leaves the parent usable', async () => {
    mesh = await simMesh({ size: 3 });
    const gs = mesh.groups;
    expect(() => gs[1]!.subgroup([0, 2])).toThrow(/members \[0, 2\] do not include this rank \(1\)/);
    expect(() => gs[1]!.subgroup([1, 3])).toThrow(UsageError);
    const solo = gs[2]!.subgroup([2]);
    const one = new Float32Array([5]);
    await solo.allReduce(one);
    expect(Array.from(one)).toEqual([5]);
    const subs = [gs[1]!.subgroup([1, 2]), gs[2]!.subgroup([1, 2])];
    expect(gs[1]!.subgroup([1, 2])).toBe(subs[0]);
    await Promise.all(subs.map((s) => s.close()));
    await expect(subs[0]!.barrier()).rejects.toThrow(/closed/);
    const inputs = [0, 1, 2].map((r) => rankData(r, 100));
    const bufs = inputs.map((x) => new Float32Array(x));
    await within(Promise.all(gs.map((g, r) => g.allReduce(bufs[r]!))), 5000, 'parent after sub-group close');
    expect(Array.from(bufs[2]!)).toEqual(Array.from(referenceReduce(inputs, 'sum')));
  });

  it('ring topology: a sub-group whose members have no link between them is refused', async () => {
    mesh = await simMesh({ size: 4, topology: 'ring' });
    expect(() => mesh!.groups[0]!.subgroup([0, 2])).toThrow(/members \[0, 2\] are not linked to each other in this ring/);
    const pair = mesh.groups.slice(0, 2).map((g) => g.subgroup([0, 1]));
    const bufs = [new Float32Array([1]), new Float32Array([2])];
    await within(Promise.all(pair.map((s, r) => s.allReduce(bufs[r]!))), 5000, 'ring neighbours');
    expect(Array.from(bufs[0]!)).toEqual([3]);
  });
});
