/**
 * The simulated fabric enforces Apple's RDMA-over-Thunderbolt rules at the verbs level. These are the rules
 * as documented (TN3205, MLX JACCL, llama.cpp); the simulation has not been compared with hardware.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SimFabric } from '../../src/rdma/sim-fabric.js';
import { APPLE_MAX_MESSAGE_BYTES, WcStatus, type Handle, type Verbs, type WorkCompletion } from '../../src/rdma/verbs.js';

interface End {
  verbs: Verbs;
  ctx: Handle;
  pd: Handle;
  cq: Handle;
  mr: Handle;
  slab: Uint8Array;
  qp: Handle;
  qpn: number;
}

let fabric: SimFabric;
afterEach(async () => {
  await fabric?.close();
});

function end(verbs: Verbs, name: string, type: 'UC' | 'RC' = 'UC'): End {
  const ctx = verbs.openDevice(name);
  const pd = verbs.allocPd(ctx);
  const cq = verbs.createCq(ctx, 64);
  const slab = verbs.allocSlab(1 << 20);
  const mr = verbs.regMr(pd, slab);
  const { qp, qpn } = verbs.createQp(pd, { type, sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16 });
  return { verbs, ctx, pd, cq, mr, slab: slab.bytes, qp, qpn };
}

function connect(a: End, b: End): void {
  for (const e of [a, b]) e.verbs.modifyQpInit(e.qp, 1);
  const info = (e: End) => ({ lid: e.verbs.queryPort(e.ctx, 1).lid, qpn: e.qpn, psn: 1, gid: e.verbs.queryGid(e.ctx, 1, 1) });
  a.verbs.modifyQpRtr(a.qp, { port: 1, pathMtu: 4096, dest: info(b), sgidIndex: 1 });
  b.verbs.modifyQpRtr(b.qp, { port: 1, pathMtu: 4096, dest: info(a), sgidIndex: 1 });
  a.verbs.modifyQpRts(a.qp, 1);
  b.verbs.modifyQpRts(b.qp, 1);
}

function pair(mode: 'apple' | 'linux' = 'apple', latencyUs = 0): [End, End] {
  fabric = new SimFabric({ mode, latencyUs });
  const va = fabric.addHost('a', [{ name: 'rdma_en1', ipv4: '10.0.0.1' }]);
  const vb = fabric.addHost('b', [{ name: 'rdma_en1', ipv4: '10.0.0.2' }]);
  const type = mode === 'apple' ? 'UC' : 'RC';
  const a = end(va, 'rdma_en1', type);
  const b = end(vb, 'rdma_en1', type);
  connect(a, b);
  return [a, b];
}

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));
function poll(e: End): WorkCompletion[] {
  return e.verbs.pollCq(e.cq, 100);
}
/** Collects completions until `n` arrived or 2 s passed (timer order is not a delivery guarantee under load). */
async function completions(e: End, n: number): Promise<WorkCompletion[]> {
  const got: WorkCompletion[] = [];
  const deadline = performance.now() + 2000;
  while (got.length < n && performance.now() < deadline) {
    got.push(...poll(e));
    if (got.length < n) await tick(1);
  }
  return got;
}

describe('simulated fabric: Apple rules', () => {
  it('accepts only UC queue pairs, at most 10 per device', () => {
    fabric = new SimFabric({ mode: 'apple' });
    const v = fabric.addHost('a', [{ name: 'rdma_en1', ipv4: '10.0.0.1' }]);
    const ctx = v.openDevice('rdma_en1');
    const pd = v.allocPd(ctx);
    const cq = v.createCq(ctx, 8);
    expect(() => v.createQp(pd, { type: 'RC', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4 })).toThrow(/only UC/);
    for (let i = 0; i < 10; i++) v.createQp(pd, { type: 'UC', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4 });
    expect(() => v.createQp(pd, { type: 'UC', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4 })).toThrow(/at most 10 queue pairs/);
    expect(() => v.createQp(pd, { type: 'UC', sendCq: cq, recvCq: cq, maxSendWr: 4096, maxRecvWr: 4 })).toThrow();
  });

  it('registers only page-aligned slabs, and only ~100 of them', () => {
    fabric = new SimFabric({ mode: 'apple' });
    const v = fabric.addHost('a', [{ name: 'rdma_en1', ipv4: '10.0.0.1' }]);
    const pd = v.allocPd(v.openDevice('rdma_en1'));
    expect(() => v.regMr(pd, { bytes: new Uint8Array(4096) })).toThrow(/page-aligned/);
    const slab = v.allocSlab(1);
    expect(slab.bytes.byteLength).toBe(4096);
    for (let i = 0; i < 100; i++) v.regMr(pd, v.allocSlab(4096));
    expect(() => v.regMr(pd, slab)).toThrow(/100 memory registrations/);
  });

  it('refuses messages above 16,773,120 bytes', () => {
    const [a] = pair();
    const big = a.verbs.allocSlab(APPLE_MAX_MESSAGE_BYTES + 4096);
    const mr = a.verbs.regMr(a.pd, big);
    expect(() => a.verbs.postSend(a.qp, 1, mr, 0, APPLE_MAX_MESSAGE_BYTES + 1)).toThrow(/16773120-byte limit/);
    a.verbs.postSend(a.qp, 2, mr, 0, APPLE_MAX_MESSAGE_BYTES); // the limit itself is fine
  });

  it('a SEND waits until the peer posts a RECV (credit flow), then both complete', async () => {
    const [a, b] = pair();
    a.slab.set([1, 2, 3], 0);
    a.verbs.postSend(a.qp, 7, a.mr, 0, 3);
    await tick();
    expect(poll(a)).toEqual([]);
    b.verbs.postRecv(b.qp, 9, b.mr, 100, 4096);
    expect(await completions(a, 1)).toMatchObject([{ wrId: 7, status: WcStatus.SUCCESS, opcode: 'send' }]);
    expect(await completions(b, 1)).toMatchObject([{ wrId: 9, status: WcStatus.SUCCESS, opcode: 'recv', byteLen: 3 }]);
    expect(Array.from(b.slab.subarray(100, 103))).toEqual([1, 2, 3]);
  });

  it('SEND and RECV covering different frame counts fail on both sides, and the QP flushes', async () => {
    const [a, b] = pair();
    b.verbs.postRecv(b.qp, 1, b.mr, 0, 4096); // 1 frame
    b.verbs.postRecv(b.qp, 2, b.mr, 4096, 4096);
    a.verbs.postSend(a.qp, 3, a.mr, 0, 4097); // 2 frames
    expect(await completions(a, 1)).toMatchObject([{ wrId: 3, status: WcStatus.REM_INV_REQ_ERR }]);
    expect(await completions(b, 2)).toMatchObject([
      { wrId: 1, status: WcStatus.LOC_LEN_ERR },
      { wrId: 2, status: WcStatus.WR_FLUSH_ERR },
    ]);
  });

  it('the same mismatch is accepted by rdma-core semantics when the RECV is large enough', async () => {
    const [a, b] = pair('linux');
    b.verbs.postRecv(b.qp, 1, b.mr, 0, 8192);
    a.verbs.postSend(a.qp, 2, a.mr, 0, 10);
    expect(await completions(b, 1)).toMatchObject([{ wrId: 1, status: WcStatus.SUCCESS, byteLen: 10 }]);
  });

  it('delivers in FIFO order per queue pair', async () => {
    const [a, b] = pair();
    for (let i = 0; i < 5; i++) b.verbs.postRecv(b.qp, 100 + i, b.mr, i * 4096, 4096);
    for (let i = 0; i < 5; i++) {
      a.slab[i * 4096] = i + 1;
      a.verbs.postSend(a.qp, i, a.mr, i * 4096, 1);
    }
    expect((await completions(b, 5)).map((c) => c.wrId)).toEqual([100, 101, 102, 103, 104]);
    expect([0, 1, 2, 3, 4].map((i) => b.slab[i * 4096])).toEqual([1, 2, 3, 4, 5]);
  });

  it('a send completion means "left this host", not "arrived"', async () => {
    const [a, b] = pair('apple', 30_000);
    b.verbs.postRecv(b.qp, 1, b.mr, 0, 4096);
    while (fabric.qp(a.qpn).pendingCredits === 0) await tick(1); // the credit needs one latency to arrive
    a.verbs.postSend(a.qp, 2, a.mr, 0, 8);
    const sentAt = performance.now();
    expect(poll(a)).toMatchObject([{ wrId: 2, status: WcStatus.SUCCESS }]);
    expect(poll(b)).toEqual([]);
    expect(await completions(b, 1)).toMatchObject([{ wrId: 1, status: WcStatus.SUCCESS }]);
    expect(performance.now() - sentAt).toBeGreaterThanOrEqual(25);
  });

  it('injected error completions move the queue pair to ERR', async () => {
    const [a, b] = pair();
    fabric.injectErrorCompletion(b.qpn, 'recv', WcStatus.LOC_PROT_ERR);
    b.verbs.postRecv(b.qp, 1, b.mr, 0, 4096);
    b.verbs.postRecv(b.qp, 2, b.mr, 0, 4096);
    a.verbs.postSend(a.qp, 3, a.mr, 0, 10);
    expect(await completions(b, 2)).toMatchObject([
      { wrId: 1, status: WcStatus.LOC_PROT_ERR },
      { wrId: 2, status: WcStatus.WR_FLUSH_ERR },
    ]);
  });

  it('a stalled queue pair completes nothing until resumed', async () => {
    const [a, b] = pair();
    fabric.stall(a.qpn);
    b.verbs.postRecv(b.qp, 1, b.mr, 0, 4096);
    a.verbs.postSend(a.qp, 2, a.mr, 0, 10);
    await tick(20);
    expect(poll(a)).toEqual([]);
    expect(poll(b)).toEqual([]);
    fabric.resume(a.qpn);
    expect(await completions(b, 1)).toHaveLength(1);
  });

  it('port loss: UC goes silent, RC reports retry exhaustion', async () => {
    let [a, b] = pair('apple');
    fabric.setPortState('b', 'rdma_en1', 'DOWN');
    b.verbs.postRecv(b.qp, 1, b.mr, 0, 4096);
    a.verbs.postSend(a.qp, 2, a.mr, 0, 10);
    await tick(30);
    expect(poll(a)).toEqual([]);
    expect(a.verbs.queryPort(a.ctx, 1).state).toBe('ACTIVE');
    expect(b.verbs.queryPort(b.ctx, 1).state).toBe('DOWN');
    await fabric.close();
    [a, b] = pair('linux');
    b.verbs.postRecv(b.qp, 1, b.mr, 0, 4096);
    fabric.killHost('b');
    a.verbs.postSend(a.qp, 2, a.mr, 0, 10);
    expect(await completions(a, 1)).toMatchObject([{ wrId: 2, status: WcStatus.RETRY_EXC_ERR }]);
  });

  it('RTR needs an IPv4-mapped GID, and a retried RTR wedges the port', () => {
    fabric = new SimFabric({ mode: 'apple' });
    const va = fabric.addHost('a', [{ name: 'rdma_en1' }]); // enX without IPv4: no ::ffff: GID
    const vb = fabric.addHost('b', [{ name: 'rdma_en1', ipv4: '10.0.0.2' }]);
    const a = end(va, 'rdma_en1');
    const b = end(vb, 'rdma_en1');
    a.verbs.modifyQpInit(a.qp, 1);
    const dest = { lid: 0, qpn: b.qpn, psn: 1, gid: vb.queryGid(b.ctx, 1, 1) };
    expect(() => a.verbs.modifyQpRtr(a.qp, { port: 1, pathMtu: 4096, dest, sgidIndex: 1 })).toThrow(/IPv4-mapped GID/);
    expect(va.queryPort(a.ctx, 1).state).toBe('ACTIVE');
    expect(() => a.verbs.modifyQpRtr(a.qp, { port: 1, pathMtu: 4096, dest, sgidIndex: 1 })).toThrow(/wedged/);
    expect(va.queryPort(a.ctx, 1).state).toBe('DOWN');
  });

  it('the IPv4-mapped GID can sit at index 2', () => {
    fabric = new SimFabric({ mode: 'apple' });
    const v = fabric.addHost('a', [{ name: 'rdma_en1', ipv4: '10.0.0.9', ipv4GidIndex: 2 }]);
    const ctx = v.openDevice('rdma_en1');
    expect(v.queryGid(ctx, 1, 1)).toBe('');
    expect(v.queryGid(ctx, 1, 2)).toBe('::ffff:10.0.0.9');
  });
});
