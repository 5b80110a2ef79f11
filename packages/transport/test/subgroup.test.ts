/**
 * Sub-groups (`Group.subgroup`) on the backends with tagged messages: the simulated fabric and real
 * loopback TCP. Both get sub-groups from exchange-group.ts (rank mapping + a tag namespace per member
 * set); the RDMA mesh group's sub-groups are tested in rdma/subgroup.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { GroupClosedError, UsageError } from '../src/errors.js';
import type { Group } from '../src/group.js';
import { createSimFabric, createSimGroup } from '../src/sim/fabric.js';
import { createLocalTcpGroups } from '../src/testing/local-tcp.js';

/** Deterministic floats of every magnitude, so a sum in another order would differ in its bits. */
function data(seed: number, n: number): Float32Array {
  const out = new Float32Array(n);
  let x = seed * 2654435761 + 12345;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out[i] = ((x >>> 8) / (1 << 24) - 0.5) * 10 ** ((x % 7) - 3);
  }
  return out;
}

/** The sum every member must end with: contributions added in member order, in f32. */
function reference(inputs: Float32Array[]): Float32Array {
  const acc = new Float32Array(inputs[0]);
  for (let k = 1; k < inputs.length; k++) for (let i = 0; i < acc.length; i++) acc[i] += inputs[k][i];
  return acc;
}

function same(a: ArrayBufferView, b: ArrayBufferView): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

const backends: Array<[string, (size: number) => Promise<Group[]>]> = [
  ['simulated fabric', async (size) => createSimGroup(size, { timeoutMs: 3000 })],
  ['tcp (loopback)', (size) => createLocalTcpGroups(size, { timeoutMs: 3000 })],
];

describe.each(backends)('sub-groups: %s', (_name, make) => {
  let open: Group[] = [];
  const groups = async (size: number) => {
    const gs = await make(size);
    open.push(...gs);
    return gs;
  };
  afterEach(async () => {
    await Promise.allSettled(open.map((g) => g.close()));
    open = [];
  });

  it('{0,1} and {2,3} all-reduce while the parent sends on the same links: right sums, same bits per sub-group, no cross-talk', async () => {
    const gs = await groups(4);
    const pairs = [
      [0, 1],
      [2, 3],
    ];
    const subs = gs.map((g) => g.subgroup(pairs[g.rank >> 1]));
    expect(subs.map((s) => [s.rank, s.size])).toEqual([
      [0, 2],
      [1, 2],
      [0, 2],
      [1, 2],
    ]);
    // Both algorithms' sizes; parent messages of the same byte length on the same links, so a receive
    // matched to the wrong traffic would show as wrong data rather than a size error.
    for (const n of [1, 256, 5000, 300_000]) {
      const inputs = gs.map((g) => data(g.rank + 10 * n, n));
      const bufs = inputs.map((x) => new Float32Array(x));
      const parentMsgs = gs.map((g) => data(100 + g.rank, n));
      const parentGot = gs.map(() => new Float32Array(n));
      const ops: Promise<void>[] = [];
      for (const g of gs) {
        // 0 <-> 1 and 2 <-> 3 share a link with the sub-groups; 0 -> 2 and 3 -> 1 cross them.
        const partner = g.rank ^ 1;
        ops.push(g.send(partner, parentMsgs[g.rank]), g.recv(partner, parentGot[g.rank]));
        ops.push(subs[g.rank].allReduce(bufs[g.rank]));
      }
      ops.push(gs[0].send(2, parentMsgs[0]), gs[3].send(1, parentMsgs[3]));
      const cross = [new Float32Array(n), new Float32Array(n)];
      ops.push(gs[2].recv(0, cross[0]), gs[1].recv(3, cross[1]));
      await Promise.all(ops);
      for (const [a, b] of pairs) {
        const want = reference([inputs[a], inputs[b]]);
        expect(same(bufs[a], want), `n=${n}: rank ${a}`).toBe(true);
        expect(same(bufs[b], want), `n=${n}: rank ${b}`).toBe(true);
      }
      for (const g of gs) expect(same(parentGot[g.rank], parentMsgs[g.rank ^ 1]), `n=${n}: parent message to ${g.rank}`).toBe(true);
      expect(same(cross[0], parentMsgs[0])).toBe(true);
      expect(same(cross[1], parentMsgs[3])).toBe(true);
    }
  });

  it('overlapping sub-groups and the parent run collectives at once, each in its own namespace', async () => {
    const gs = await groups(4);
    const trio = [0, 1, 3];
    const n = 20_000; // ring on 3 and 4 ranks, direct on 2
    const inputs = gs.map((g) => ({ pair: data(g.rank + 1, n), trio: data(g.rank + 2, n), all: data(g.rank + 3, n) }));
    const copy = () => inputs.map((x) => ({ pair: new Float32Array(x.pair), trio: new Float32Array(x.trio), all: new Float32Array(x.all) }));
    // Alone first: what each all-reduce gives without other traffic (the ring's fixed order is not 0, 1, 2, ...).
    const alone = copy();
    await Promise.all(gs.map((g) => g.allReduce(alone[g.rank].all)));
    await Promise.all(trio.map((r) => gs[r].subgroup(trio).allReduce(alone[r].trio)));
    await Promise.all([0, 1].map((r) => gs[r].subgroup([0, 1]).allReduce(alone[r].pair)));
    const bufs = copy();
    const ops: Promise<void>[] = [];
    for (const g of gs) {
      const b = bufs[g.rank];
      ops.push(g.allReduce(b.all));
      if (trio.includes(g.rank)) ops.push(g.subgroup(trio).allReduce(b.trio));
      if (g.rank < 2) ops.push(g.subgroup([0, 1]).allReduce(b.pair));
      if (g.rank < 2) ops.push(g.subgroup([0, 1]).barrier());
    }
    await Promise.all(ops);
    // Inputs reach 500 in magnitude: f32 sums of 4 of them in another order differ by well under 1e-3.
    const near = (got: Float32Array, want: Float32Array) => got.every((v, i) => Math.abs(v - want[i]) <= 1e-3);
    for (const g of gs) {
      const [b, a] = [bufs[g.rank], alone[g.rank]];
      expect(same(b.all, a.all) && same(b.all, alone[0].all), `parent, rank ${g.rank}`).toBe(true);
      expect(near(b.all, reference(inputs.map((x) => x.all))), `parent sum, rank ${g.rank}`).toBe(true);
      if (trio.includes(g.rank)) {
        expect(same(b.trio, a.trio) && same(b.trio, alone[0].trio), `trio, rank ${g.rank}`).toBe(true);
        expect(near(b.trio, reference(trio.map((r) => inputs[r].trio))), `trio sum, rank ${g.rank}`).toBe(true);
      }
      if (g.rank < 2) expect(same(b.pair, reference([inputs[0].pair, inputs[1].pair])), `pair, rank ${g.rank}`).toBe(true);
    }
    // All-gather and point-to-point inside a sub-group use its own ranks.
    const outs = trio.map(() => new Uint8Array(3 * 4));
    await Promise.all(trio.map((r, i) => gs[r].subgroup(trio).allGather(Uint8Array.of(r, r, r, r), outs[i])));
    for (const o of outs) expect(Array.from(o)).toEqual([0, 0, 0, 0, 1, 1, 1, 1, 3, 3, 3, 3]);
    const got = new Uint8Array(2);
    await Promise.all([gs[3].subgroup(trio).send(0, Uint8Array.of(7, 8)), gs[0].subgroup(trio).recv(2, got)]);
    expect(Array.from(got)).toEqual([7, 8]);
  });

  it('rejects bad member lists with a message naming the value', async () => {
    const gs = await groups(4);
    const g = gs[1];
    expect(() => g.subgroup([])).toThrow(UsageError);
    expect(() => g.subgroup([])).toThrow(/non-empty array/);
    expect(() => g.subgroup([1, 4])).toThrow(/member 4 is not a rank in 0..3 \(members \[1, 4\]\)/);
    expect(() => g.subgroup([-1, 1])).toThrow(/member -1 is not a rank/);
    expect(() => g.subgroup([0.5, 1])).toThrow(/member 0.5 is not a rank/);
    expect(() => g.subgroup([1, 1])).toThrow(/ascending and distinct, got 1 after 1/);
    expect(() => g.subgroup([2, 1])).toThrow(/ascending and distinct, got 1 after 2/);
    expect(() => g.subgroup([0, 2])).toThrow(/members \[0, 2\] do not include this rank \(1\)/);
    // Ranks of a sub-group are its own: rank 1 of the parent is rank 0 of {1,2,3}.
    expect(() => g.subgroup([1, 2, 3]).subgroup([1, 2])).toThrow(/members \[1, 2\] do not include this rank \(0\)/);
  });

  it('a sub-group of one rank is a no-op; the same list gives the same object, also from a sub-group', async () => {
    const gs = await groups(3);
    const solo = gs[2].subgroup([2]);
    expect([solo.rank, solo.size]).toEqual([0, 1]);
    const buf = new Float32Array([1.5, -2, 3]);
    await solo.allReduce(buf);
    await solo.barrier();
    const out = new Uint8Array(2);
    await solo.allGather(Uint8Array.of(4, 5), out);
    expect(Array.from(buf)).toEqual([1.5, -2, 3]);
    expect(Array.from(out)).toEqual([4, 5]);
    await expect(solo.send(0, new Uint8Array(1))).rejects.toThrow(/peer must be a rank in 0..0 other than this rank \(0\), got 0/);
    expect(gs[2].subgroup([2])).toBe(solo);
    expect(gs[1].subgroup([1, 2])).toBe(gs[1].subgroup([1, 2]));
    expect(gs[1].subgroup([0, 1, 2]).subgroup([1, 2])).toBe(gs[1].subgroup([1, 2]));
  });

  it('closing a sub-group fails its pending operations and leaves the parent usable', async () => {
    const gs = await groups(2);
    const subs = gs.map((g) => g.subgroup([0, 1]));
    const pending = subs[1].recv(0, new Uint8Array(4));
    const reduce = subs[0].allReduce(new Float32Array(8));
    await subs[0].close();
    await subs[1].close();
    await expect(pending).rejects.toThrow(GroupClosedError);
    await expect(reduce).rejects.toThrow(GroupClosedError);
    await expect(subs[0].barrier()).rejects.toThrow(/closed/);
    // The parent's links are untouched.
    const got = new Uint8Array(3);
    await Promise.all([gs[0].send(1, Uint8Array.of(1, 2, 3)), gs[1].recv(0, got)]);
    expect(Array.from(got)).toEqual([1, 2, 3]);
    const bufs = [new Float32Array([1, 2]), new Float32Array([10, 20])];
    await Promise.all(gs.map((g, r) => g.allReduce(bufs[r])));
    expect(Array.from(bufs[1])).toEqual([11, 22]);
    // A closed member set stays closed on this group (messages of its last operations may still arrive);
    // other member sets still make sub-groups.
    expect(gs[0].subgroup([0, 1])).toBe(subs[0]);
    const solo = gs[0].subgroup([0]);
    await solo.allReduce(new Float32Array(1));
  });

  it('closing the parent fails the sub-group, pending and later operations', async () => {
    const gs = await groups(2);
    const sub = gs[0].subgroup([0, 1]);
    const pending = sub.allReduce(new Float32Array(4));
    await gs[0].close();
    await expect(pending).rejects.toThrow();
    await expect(sub.allReduce(new Float32Array(4))).rejects.toThrow(/parent group was closed/);
    expect(() => gs[0].subgroup([0, 1])).toThrow(GroupClosedError);
  });
});

describe('sub-groups: failures', () => {
  it('a parent that fails (a peer crashed mid-collective) fails its sub-groups, pending and later operations', async () => {
    const fabric = createSimFabric(3, { timeoutMs: 3000 });
    const gs = fabric.groups;
    const sub = gs[0].subgroup([0, 1]);
    const pending = sub.allReduce(new Float32Array(4)); // rank 1 never joins
    fabric.kill(2);
    await expect(gs[0].allReduce(new Float32Array(4))).rejects.toThrow();
    await expect(pending).rejects.toThrow(/parent group failed/);
    await expect(sub.barrier()).rejects.toThrow(/parent group failed/);
    await Promise.all(gs.map((g) => g.close()));
  });
});

describe('sub-groups: groups of more than 16 ranks', () => {
  it('consecutive ranks get sub-groups that all-reduce side by side; other sets and groups over 128 ranks are refused, saying why', async () => {
    const gs = createSimGroup(20, { timeoutMs: 3000 });
    try {
      // A 2-stage x 10-tensor layout: ranks 0..9 and 10..19, as the runner asks for them.
      const stages = [Array.from({ length: 10 }, (_, i) => i), Array.from({ length: 10 }, (_, i) => 10 + i)];
      const subs = gs.map((g) => g.subgroup(stages[g.rank < 10 ? 0 : 1]));
      expect(subs[13].rank).toBe(3);
      expect(subs[13].size).toBe(10);
      const inputs = gs.map((g) => data(g.rank, 777));
      const bufs = inputs.map((x) => new Float32Array(x));
      await Promise.all(subs.map((s, r) => s.allReduce(bufs[r])));
      const want = [reference(inputs.slice(0, 10)), reference(inputs.slice(10))];
      for (let r = 0; r < 20; r++) expect(same(bufs[r], want[r < 10 ? 0 : 1])).toBe(true);
      // [0, 1] and [0, 1, 2] share their first rank: distinct sets still get distinct tags.
      const pairs = [gs[0].subgroup([0, 1]), gs[1].subgroup([0, 1])];
      const triples = [0, 1, 2].map((r) => gs[r].subgroup([0, 1, 2]));
      const p = [data(1, 64), data(2, 64)].map((x) => new Float32Array(x));
      const t = [data(3, 64), data(4, 64), data(5, 64)].map((x) => new Float32Array(x));
      const [pIn, tIn] = [p.map((x) => new Float32Array(x)), t.map((x) => new Float32Array(x))];
      await Promise.all([...pairs.map((g, i) => g.allReduce(p[i])), ...triples.map((g, i) => g.allReduce(t[i]))]);
      expect(same(p[1], reference(pIn))).toBe(true);
      expect(same(t[2], reference(tIn))).toBe(true);
      expect(() => gs[0].subgroup([0, 2])).toThrow(/more than 16 ranks \(this one has 20\) a sub-group's ranks must be consecutive, got \[0, 2\]/);
    } finally {
      await Promise.all(gs.map((g) => g.close()));
    }
    const big = createSimGroup(129);
    try {
      expect(() => big[0].subgroup([0, 1])).toThrow(/at most 128 ranks have sub-groups .* this one has 129/);
    } finally {
      await Promise.all(big.map((g) => g.close()));
    }
  });
});
