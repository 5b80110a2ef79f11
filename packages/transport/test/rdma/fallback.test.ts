/**
 * Per-link fallback: where RDMA setup fails on a link, that link uses the fallback (here an in-memory
 * stand-in for TCP) and collectives stay correct. RTR is never retried (the simulated port would wedge).
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Group } from '../../src/group.js';
import { connectRdmaMesh, linkOverGroup, RdmaSetupError, SimFabric } from '../../src/rdma/index.js';
import { createLocalTcpGroups } from '../../src/testing/local-tcp.js';
import { deviceName, memoryControl, memoryFallbacks, rankData, referenceReduce, simMesh, type SimMesh } from './helpers.js';

let mesh: SimMesh | null = null;
let tcp: Group[] = [];
afterEach(async () => {
  await mesh?.close();
  mesh = null;
  await Promise.all(tcp.map((g) => g.close()));
  tcp = [];
});

async function checkAllReduce(m: SimMesh): Promise<void> {
  const size = m.groups.length;
  for (const n of [3, 9000, 50_001]) {
    const inputs = m.groups.map((_, r) => rankData(r, n, n));
    const bufs = inputs.map((x) => new Float32Array(x));
    await Promise.all(m.groups.map((g, r) => g.allReduce(bufs[r]!)));
    const want = Buffer.from(referenceReduce(inputs, 'sum').buffer);
    for (let r = 0; r < size; r++) expect(Buffer.from(bufs[r]!.buffer).equals(want), `rank ${r} n=${n}`).toBe(true);
  }
  const outs = m.groups.map(() => new Uint8Array(4 * size));
  await Promise.all(m.groups.map((g, r) => g.allGather(new Uint8Array(4).fill(r + 1), outs[r]!)));
  for (const o of outs) expect(Array.from(o)).toEqual(m.groups.flatMap((_, r) => [r + 1, r + 1, r + 1, r + 1]));
}

describe('RDMA setup failure on one link falls back for that link only', () => {
  it('RTR refused on rank 0 -> 1: both ends use the fallback, the rest stays RDMA, results correct', async () => {
    mesh = await simMesh({
      size: 4,
      beforeConnect: (f) => f.failNextRtr('host0', deviceName(1), 'GID vanished'),
    });
    const c0 = mesh.choices[0]!.find((c) => c.peer === 1)!;
    const c1 = mesh.choices[1]!.find((c) => c.peer === 0)!;
    expect(c0).toMatchObject({ transport: 'fallback' });
    expect(c0.reason).toMatch(/RTR\/RTS on rdma_en2 failed: EINVAL: rdma_en2: GID vanished/);
    expect(c1).toMatchObject({ transport: 'fallback' });
    expect(c1.reason).toMatch(/rank 0 could not finish RDMA setup/);
    const others = mesh.choices.flat().filter((c) => c !== c0 && c !== c1);
    expect(others).toHaveLength(10);
    for (const c of others) expect(c.transport).toBe('rdma');
    // Not retried: a second RTR would have wedged the port (the simulation takes it DOWN).
    expect(mesh.fabric.device('host0', deviceName(1)).portState).toBe('ACTIVE');
    expect(mesh.groups[0]!.transports()).toEqual(['self', 'fallback', 'rdma', 'rdma']);
    await checkAllReduce(mesh);
  });

  it('the failed link runs over the real TCP transport (loopback) and results stay correct', async () => {
    tcp = await createLocalTcpGroups(3, { timeoutMs: 5000 });
    mesh = await simMesh({
      size: 3,
      beforeConnect: (f) => f.failNextRtr('host2', deviceName(0)),
      fallbackFor: (rank) => async (peer) => linkOverGroup(tcp[rank]!, peer),
    });
    expect(mesh.groups.map((g) => g.transports())).toEqual([
      ['self', 'rdma', 'tcp'],
      ['rdma', 'self', 'rdma'],
      ['tcp', 'rdma', 'self'],
    ]);
    await checkAllReduce(mesh);
  });

  it("Apple's 10-queue-pair limit: with one device serving 11 peers, the 11th link falls back", async () => {
    mesh = await simMesh({ size: 12, singleDevice: true, sizeClasses: [4096], depth: 2 });
    for (const choices of mesh.choices) {
      const fallback = choices.filter((c) => c.transport === 'fallback');
      expect(fallback.length).toBeGreaterThanOrEqual(1);
      expect(choices.filter((c) => c.transport === 'rdma').length).toBeLessThanOrEqual(10);
    }
    expect(mesh.choices.flat().some((c) => /at most 10 queue pairs/.test(c.reason))).toBe(true);
    await checkAllReduce(mesh);
  });

  it('a cable whose enX has no IPv4 address falls back with that reason', async () => {
    mesh = await simMesh({
      size: 3,
      devices: (r, p, spec) => (r === 2 && p === 0 ? { name: spec.name } : spec),
    });
    const c = mesh.choices[2]!.find((x) => x.peer === 0)!;
    expect(c.transport).toBe('fallback');
    expect(c.reason).toMatch(/no IPv4-mapped GID: give the paired enX an IPv4 address/);
    expect(mesh.choices[0]!.find((x) => x.peer === 2)!.reason).toMatch(/rank 2 is not RDMA-ready/);
    await checkAllReduce(mesh);
  });

  it('a port that is not ACTIVE (RDMA not enabled at the far end) falls back', async () => {
    mesh = await simMesh({
      size: 2,
      devices: (r, _p, spec) => (r === 1 ? { ...spec, portState: 'DOWN' } : spec),
    });
    expect(mesh.choices[1]![0]!.reason).toMatch(/port 1 is DOWN .*rdma_ctl/);
    expect(mesh.choices.flat().every((c) => c.transport === 'fallback')).toBe(true);
    await checkAllReduce(mesh);
  });

  it('refuses size classes above Apple\'s message limit and depths below double buffering', async () => {
    await expect(simMesh({ size: 2, sizeClasses: [4096, 16_773_120 + 4096] })).rejects.toThrow(/exceeds the library's 16773120-byte message limit/);
    await expect(simMesh({ size: 2, depth: 1 })).rejects.toThrow(/depth must be an integer >= 2/);
    await expect(simMesh({ size: 2, sizeClasses: [5000] })).rejects.toThrow(/not a positive multiple of 4096/);
  });

  it('a peer that never answers on the control plane fails setup within the setup timeout, naming it', async () => {
    const fabric = new SimFabric();
    const verbs = fabric.addHost('h0', [{ name: 'rdma_en2', ipv4: '10.0.1.1' }]);
    const t0 = performance.now();
    const err = await connectRdmaMesh({
      rank: 0,
      size: 2,
      verbs,
      deviceFor: () => 'rdma_en2',
      control: { exchange: () => new Promise(() => {}) },
      fallback: async () => {
        throw new Error('not reached');
      },
      setupTimeoutMs: 200,
    }).catch((e) => e);
    expect(err).toBeInstanceOf(RdmaSetupError);
    expect(err.message).toMatch(/RDMA setup with rank 1 \(rdma_en2\): no answer within 200 ms/);
    expect(performance.now() - t0).toBeLessThan(3000);
    // Everything it had opened was released.
    expect(fabric.queuePairs()).toHaveLength(0);
    expect(fabric.device('h0', 'rdma_en2').mrCount).toBe(0);
  });

  it('a rank without the addon (no verbs library) runs every link on the fallback', async () => {
    mesh = await simMesh({ size: 3, verbsFor: (r, v) => (r === 1 ? null : v) });
    expect(mesh.choices[1]!.map((c) => c.transport)).toEqual(['fallback', 'fallback']);
    expect(mesh.choices[1]![0]!.reason).toMatch(/RDMA addon not built/);
    expect(mesh.choices[0]!.map((c) => c.transport)).toEqual(['fallback', 'rdma']);
    await checkAllReduce(mesh);
  });

  it('no device for a peer: the caller\'s reason (e.g. an ambiguous cable) is the link\'s reason, on the fallback', async () => {
    const fabric = new SimFabric();
    const control = memoryControl();
    const fallbacks = memoryFallbacks();
    const made = await Promise.all(
      [0, 1].map((rank) =>
        connectRdmaMesh({
          rank,
          size: 2,
          verbs: fabric.addHost(`h${rank}`, [{ name: 'rdma_en2', ipv4: `10.0.${rank}.1` }]),
          deviceFor: () => undefined,
          noDeviceReason: (peer) => (rank === 0 ? `rdma_en2, rdma_en3 all share a subnet with rank ${peer}` : undefined),
          control: control(rank),
          fallback: fallbacks.forRank(rank),
        }),
      ),
    );
    expect(made[0]!.choices).toEqual([{ peer: 1, transport: 'fallback', reason: 'rdma_en2, rdma_en3 all share a subnet with rank 1' }]);
    expect(made[1]!.choices).toEqual([{ peer: 0, transport: 'fallback', reason: 'no RDMA device reaches rank 0' }]);
    await Promise.all(made.map((m) => m.close()));
    await fabric.close();
  });
});
