/**
 * Collectives of the RDMA Group on the simulated fabric in Apple mode (UC, frame-count rule, credit flow).
 * Verified here only against the simulation, not against Thunderbolt hardware.
 */
import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { floatToHalf as f32ToF16, halfToFloat as f16ToF32 } from '../../src/collectives/reduce.js';
import { referenceReduce, rankData, simMesh, within, type SimMesh } from './helpers.js';

let mesh: SimMesh | null = null;
afterEach(async () => {
  await mesh?.close();
  mesh = null;
});

// 32 KiB is the direct/reduce-scatter switch: 8192 f32 elements.
const SIZES = [0, 1, 7, 1023, 8192, 8193, 40_003];

describe('RDMA group on the simulated fabric (Apple rules)', () => {
  for (let size = 2; size <= 8; size++) {
    it(`all-reduce sum over ${size} ranks: every size edge case, bit-identical on every rank`, async () => {
      mesh = await simMesh({ size });
      expect(mesh.choices.flat().every((c) => c.transport === 'rdma')).toBe(true);
      for (const n of SIZES) {
        const inputs = [...Array(size).keys()].map((r) => rankData(r, n, n));
        const bufs = inputs.map((x) => new Float32Array(x));
        await within(Promise.all(mesh.groups.map((g, r) => g.allReduce(bufs[r]!, 'sum'))), 20_000, `allReduce n=${n}`);
        const want = referenceReduce(inputs, 'sum');
        for (let r = 0; r < size; r++) {
          expect(Buffer.from(bufs[r]!.buffer).equals(Buffer.from(want.buffer)), `rank ${r}, n=${n}`).toBe(true);
        }
      }
    });
  }

  it('max and min over 3 ranks, both algorithms', async () => {
    mesh = await simMesh({ size: 3 });
    for (const op of ['max', 'min'] as const) {
      for (const n of [5, 9000]) {
        const inputs = [0, 1, 2].map((r) => rankData(r, n, 7));
        const bufs = inputs.map((x) => new Float32Array(x));
        await Promise.all(mesh.groups.map((g, r) => g.allReduce(bufs[r]!, op)));
        const want = referenceReduce(inputs, op);
        for (const b of bufs) expect(Array.from(b)).toEqual(Array.from(want));
      }
    }
  });

  it('f16 all-reduce (Uint16Array) accumulates in f32 in rank order and rounds once', async () => {
    mesh = await simMesh({ size: 4 });
    for (const n of [3, 20_001]) {
      const halves = [0, 1, 2, 3].map((r) => Uint16Array.from(rankData(r, n, 3), (v) => f32ToF16(v)));
      const bufs = halves.map((h) => new Uint16Array(h));
      await Promise.all(mesh.groups.map((g, r) => g.allReduce(bufs[r]!, 'sum')));
      const want = new Uint16Array(n);
      for (let i = 0; i < n; i++) {
        let acc = Math.fround(f16ToF32(halves[0]![i]!));
        for (let r = 1; r < 4; r++) acc = Math.fround(acc + f16ToF32(halves[r]![i]!));
        want[i] = f32ToF16(acc);
      }
      for (const b of bufs) expect(Buffer.from(b.buffer).equals(Buffer.from(want.buffer))).toBe(true);
    }
  });

  it('all-gather and barrier over 5 ranks, including empty and odd sizes', async () => {
    mesh = await simMesh({ size: 5 });
    for (const n of [0, 1, 4097, 70_001]) {
      const inputs = [...Array(5).keys()].map((r) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + r * 7) & 0xff));
      const outs = inputs.map(() => new Uint8Array(n * 5));
      await Promise.all(mesh.groups.map((g, r) => g.allGather(inputs[r]!, outs[r]!)));
      const want = Buffer.concat(inputs.map((x) => Buffer.from(x)));
      for (const o of outs) expect(Buffer.from(o).equals(want)).toBe(true);
    }
    await within(Promise.all(mesh.groups.map((g) => g.barrier())), 5000, 'barrier');
    await expect(mesh.groups[0]!.allGather(new Uint8Array(3), new Uint8Array(14))).rejects.toThrow(/expected 3 x 5 = 15/);
  });

  it('send/recv: empty, one byte, exact frame edges, and messages far above the largest size class', async () => {
    mesh = await simMesh({ size: 2 });
    const [a, b] = mesh.groups as [NonNullable<SimMesh['groups'][0]>, NonNullable<SimMesh['groups'][0]>];
    for (const n of [0, 1, 4095, 4096, 4097, 65_536, 65_537, 1_000_003]) {
      const msg = Uint8Array.from({ length: n }, (_, i) => (i * 13 + n) & 0xff);
      const got = new Uint8Array(n);
      await Promise.all([a.send(1, msg), b.recv(0, got)]);
      expect(Buffer.from(got).equals(Buffer.from(msg)), `n=${n}`).toBe(true);
    }
    // Up to `depth` (2) chunks can be sent ahead of the receiver: send resolves once the bytes are in the
    // registered slab. A third waits for a free send buffer, i.e. for the receiver. Order is FIFO.
    const msgs = [10, 5000, 3].map((n, k) => new Uint8Array(n).fill(k + 1));
    await a.send(1, msgs[0]!);
    await a.send(1, msgs[1]!);
    let thirdSent = false;
    const third = a.send(1, msgs[2]!).then(() => (thirdSent = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(thirdSent).toBe(false);
    for (const m of msgs) {
      const got = new Uint8Array(m.length);
      await b.recv(0, got);
      expect(got).toEqual(m);
    }
    await third;
    await expect(a.send(0, new Uint8Array(1))).rejects.toThrow(/peer must be a rank in 0..1 other than this rank \(0\), got 0/);
  });

  it("macOS 26.2's 4 KiB-only size class still moves large messages (many 1-frame work requests)", async () => {
    mesh = await simMesh({ size: 3, sizeClasses: [4096] });
    const n = 30_000;
    const inputs = [0, 1, 2].map((r) => rankData(r, n, 11));
    const bufs = inputs.map((x) => new Float32Array(x));
    await Promise.all(mesh.groups.map((g, r) => g.allReduce(bufs[r]!, 'sum')));
    const want = referenceReduce(inputs, 'sum');
    for (const b of bufs) expect(Buffer.from(b.buffer).equals(Buffer.from(want.buffer))).toBe(true);
  });

  it('close lets sends that already resolved reach the peer before the queue pair goes away', async () => {
    mesh = await simMesh({ size: 2 });
    const [a, b] = mesh.groups;
    const msg = new Uint8Array(100).fill(9);
    await a!.send(1, msg); // resolved: in the slab, waiting for the peer's receive (credit)
    const closing = a!.close();
    const got = new Uint8Array(100);
    await within(b!.recv(0, got), 3000, 'recv after the sender closed');
    await closing;
    expect(got).toEqual(msg);
  });

  it('one long-lived abort signal over many operations leaves no listeners behind; an aborted one rejects with its reason', async () => {
    mesh = await simMesh({ size: 2 });
    const [a, b] = mesh.groups;
    const ac = new AbortController();
    for (let i = 0; i < 50; i++) {
      await Promise.all([a!.send(1, new Uint8Array(8), { signal: ac.signal }), b!.recv(0, new Uint8Array(8), { signal: ac.signal })]);
    }
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
    const reason = new Error('gave up');
    const pending = b!.recv(0, new Uint8Array(8), { signal: ac.signal });
    ac.abort(reason);
    await expect(pending).rejects.toBe(reason);
    const already = AbortSignal.abort(reason);
    await expect(a!.recv(1, new Uint8Array(8), { signal: already })).rejects.toBe(reason);
  });

  it('size-1 group makes every collective a no-op', async () => {
    mesh = await simMesh({ size: 1 });
    const g = mesh.groups[0]!;
    const buf = new Float32Array([1, 2, 3]);
    await g.allReduce(buf);
    await g.barrier();
    const out = new Uint8Array(3);
    await g.allGather(new Uint8Array([4, 5, 6]), out);
    expect(Array.from(buf)).toEqual([1, 2, 3]);
    expect(Array.from(out)).toEqual([4, 5, 6]);
  });

  it('Linux mode (RC queue pairs) runs the same protocol', async () => {
    mesh = await simMesh({ size: 3, mode: 'linux' });
    const n = 12_345;
    const inputs = [0, 1, 2].map((r) => rankData(r, n, 5));
    const bufs = inputs.map((x) => new Float32Array(x));
    await Promise.all(mesh.groups.map((g, r) => g.allReduce(bufs[r]!, 'sum')));
    const want = referenceReduce(inputs, 'sum');
    for (const b of bufs) expect(Array.from(b)).toEqual(Array.from(want));
  });
});
