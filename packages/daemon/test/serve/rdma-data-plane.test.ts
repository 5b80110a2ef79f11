/**
 * The runner's data-plane setup (runner/data-plane.ts) with the test-only simulated verbs
 * (ORCHARD_RDMA_SIM): each rank has its own simulated fabric whose queue pairs reach the others over
 * loopback sockets, as they would from separate runner processes; the RDMA setup rounds ride the TCP group.
 */
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { createTcpGroup, listenTcp, rdma, type Group, type LinkChoice } from '@orchard/transport';
import { createDataPlane, type DataPlane } from '../../src/runner/data-plane.js';
import { groupControlChannel } from '../../src/runner/control-channel.js';
import { cablesTo, RDMA_SIM_ENV, selectRdma, type RdmaSelection } from '../../src/runner/rdma-select.js';

let open: { planes: DataPlane[]; selections: RdmaSelection[] } | null = null;
let tcpOnly: Group[] = [];
afterEach(async () => {
  if (open) {
    await Promise.all(open.planes.map((p) => p.group.close()));
    await Promise.all(open.selections.map((s) => s.close()));
  }
  open = null;
  await Promise.all(tcpOnly.map((g) => g.close()));
  tcpOnly = [];
});

async function planes(size: number, env: NodeJS.ProcessEnv, groupId = 'dp-test'): Promise<{ planes: DataPlane[]; lines: string[][]; ms: number }> {
  const listeners = await Promise.all(Array.from({ length: size }, () => listenTcp({ host: '127.0.0.1' })));
  const peers = listeners.map((l) => ({ addresses: [l.address] }));
  const selections = await Promise.all(listeners.map((_, rank) => selectRdma(rank, peers, env[RDMA_SIM_ENV] ?? null)));
  const lines: string[][] = listeners.map(() => []);
  const t0 = performance.now();
  const made = await Promise.all(
    listeners.map((listener, rank) =>
      createDataPlane({ rank, peers, groupId, secret: new Uint8Array(32).fill(7), listener, connectTimeoutMs: 5000, setupTimeoutMs: 3000, rdma: selections[rank]!, log: (l) => lines[rank]!.push(l) }),
    ),
  );
  const ms = performance.now() - t0;
  open = { planes: made, selections };
  return { planes: made, lines, ms };
}

/** Plain TCP groups: what the runners used before RDMA, the reference for results. */
async function tcpGroups(size: number): Promise<Group[]> {
  const listeners = await Promise.all(Array.from({ length: size }, () => listenTcp({ host: '127.0.0.1' })));
  const peers = listeners.map((l) => ({ addresses: [l.address] }));
  tcpOnly = await Promise.all(listeners.map((listener, rank) => createTcpGroup({ rank, peers, groupId: 'ref', secret: new Uint8Array(32).fill(7), listener, connectTimeoutMs: 5000 })));
  return tcpOnly;
}

function rankData(rank: number, n: number): Float32Array {
  const out = new Float32Array(n);
  let x = (rank + 1) * 2654435761;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out[i] = ((x >>> 8) / (1 << 24)) * 8 - 4;
  }
  return out;
}

/** All-reduce, all-gather and point-to-point on `groups`; returns every rank's bytes. */
async function workload(groups: Group[]): Promise<string[][]> {
  // Digests: comparing the raw buffers with toEqual costs seconds.
  return (await outputs(groups)).map((bufs) => bufs.map((b) => createHash('sha256').update(b).digest('hex')));
}

async function outputs(groups: Group[]): Promise<Buffer[][]> {
  const out: Buffer[][] = groups.map(() => []);
  for (const n of [1, 777, 9000, 70_001]) {
    const bufs = groups.map((_, r) => rankData(r, n));
    await Promise.all(groups.map((g, r) => g.allReduce(bufs[r]!, 'sum', { timeoutMs: 5000 })));
    bufs.forEach((b, r) => out[r]!.push(Buffer.from(b.buffer)));
  }
  const gathered = groups.map(() => new Uint8Array(3 * groups.length));
  await Promise.all(groups.map((g, r) => g.allGather(new Uint8Array(3).fill(r + 10), gathered[r]!, { timeoutMs: 5000 })));
  gathered.forEach((b, r) => out[r]!.push(Buffer.from(b)));
  // A ring of point-to-point messages (the shard loop's hidden-state hand-off).
  const got = groups.map(() => new Uint8Array(50_000));
  await Promise.all(
    groups.flatMap((g, r) => [
      g.send((r + 1) % groups.length, new Uint8Array(50_000).fill(r + 1), { timeoutMs: 5000 }),
      g.recv((r - 1 + groups.length) % groups.length, got[r]!, { timeoutMs: 5000 }),
    ]),
  );
  got.forEach((b, r) => out[r]!.push(Buffer.from(b)));
  await Promise.all(groups.map((g) => g.barrier({ timeoutMs: 5000 })));
  return out;
}

const transports = (links: LinkChoice[]) => links.map((l) => `${l.peer}:${l.transport}`);

describe('runner data plane: RDMA per link, TCP elsewhere', () => {
  it('every link RDMA on the simulated fabric; results bit-identical to the TCP data plane', async () => {
    const { planes: made, lines } = await planes(3, { [RDMA_SIM_ENV]: '1' });
    expect(made.map((p) => transports(p.links))).toEqual([
      ['1:rdma', '2:rdma'],
      ['0:rdma', '2:rdma'],
      ['0:rdma', '1:rdma'],
    ]);
    expect(made[0]!.links[0]!.reason).toBe('rdma_sim1');
    for (const p of made) expect(p.group).toBeInstanceOf(rdma.MeshGroup);
    expect(lines[0]).toContain('data plane: link to rank 1: RDMA on rdma_sim1');
    const want = await workload(await tcpGroups(3));
    expect(await workload(made.map((p) => p.group))).toEqual(want);
  });

  it('RTR failing on the link 0 -> 1: that link runs TCP with the reason on both ends, results unchanged', async () => {
    const { planes: made, lines } = await planes(3, { [RDMA_SIM_ENV]: JSON.stringify({ failRtr: [[0, 1]] }) });
    expect(made.map((p) => transports(p.links))).toEqual([
      ['1:tcp', '2:rdma'],
      ['0:tcp', '2:rdma'],
      ['0:rdma', '1:rdma'],
    ]);
    expect(made[0]!.links[0]!.reason).toMatch(/^RTR\/RTS on rdma_sim1 failed: .*injected RTR failure/);
    expect(made[1]!.links[0]!.reason).toMatch(/^rank 0 could not finish RDMA setup/);
    expect(lines[0]!.some((l) => /link to rank 1: TCP \(RTR\/RTS on rdma_sim1 failed/.test(l))).toBe(true);
    // The TCP link stays on loopback (one machine): plain.
    expect(made[0]!.summary).toMatch(/^rank 1: TCP \(RTR.*\), rank 2: RDMA on rdma_sim2; TCP unencrypted$/);
    const want = await workload(await tcpGroups(3));
    expect(await workload(made.map((p) => p.group))).toEqual(want);
  });

  it('a rank without verbs: its links run TCP (named reason), the others keep RDMA', async () => {
    const { planes: made } = await planes(3, { [RDMA_SIM_ENV]: JSON.stringify({ noVerbs: [2] }) });
    expect(made.map((p) => transports(p.links))).toEqual([
      ['1:rdma', '2:tcp'],
      ['0:rdma', '2:tcp'],
      ['0:tcp', '1:tcp'],
    ]);
    expect(made[0]!.links[1]!.reason).toBe(`rank 2 is not RDMA-ready: RDMA unavailable: no verbs on rank 2 (${RDMA_SIM_ENV} test setting)`);
    expect(made[2]!.links[0]!.reason).toBe(`RDMA unavailable: no verbs on rank 2 (${RDMA_SIM_ENV} test setting)`);
    const want = await workload(await tcpGroups(3));
    expect(await workload(made.map((p) => p.group))).toEqual(want);
  });

  it('no verbs on any rank: the TCP group itself, one-line reason, setup within milliseconds of plain TCP', async () => {
    const { planes: made, lines, ms } = await planes(3, { [RDMA_SIM_ENV]: JSON.stringify({ noVerbs: [0, 1, 2] }) });
    for (const [rank, p] of made.entries()) {
      expect(p.links.every((l) => l.transport === 'tcp')).toBe(true);
      expect(p.group).not.toBeInstanceOf(rdma.MeshGroup); // TCP's own collectives, exactly as before
      expect(p.summary).toBe(`all links TCP (RDMA unavailable: no verbs on rank ${rank} (${RDMA_SIM_ENV} test setting)); TCP unencrypted`);
    }
    expect(lines.map((l) => l.length)).toEqual([1, 1, 1]);
    // The reference: connecting the same TCP groups without the RDMA step.
    const t0 = performance.now();
    await tcpGroups(3);
    const plain = performance.now() - t0;
    expect(ms - plain).toBeLessThan(250);
    const want = await workload(tcpOnly);
    expect(await workload(made.map((p) => p.group))).toEqual(want);
  });

  it.skipIf(rdma.addonStatus().state === 'ready')("this machine's native verbs (no addon, library or device): every link TCP with the addon's reason", async () => {
    const { planes: made } = await planes(2, {});
    const why = rdma.addonStatus().reason;
    for (const p of made) {
      expect(p.group).not.toBeInstanceOf(rdma.MeshGroup);
      expect(p.summary).toBe(`all links TCP (RDMA unavailable: ${why}); TCP unencrypted`);
    }
  });

  it('a cable is the device whose enX shares a subnet with the peer; ambiguous or none means no device', () => {
    const cidrs = new Map([
      ['en2', ['10.0.2.1/30']],
      ['en3', ['10.0.3.1/30']],
      ['en4', ['169.254.4.1/16']],
      ['en5', ['169.254.5.1/16']],
    ]);
    const peer = (...hosts: string[]) => ({ addresses: hosts.map((host) => ({ host, port: 1 })) });
    const devices = ['rdma_en2', 'rdma_en3', 'rdma_en4', 'rdma_en5'];
    expect(cablesTo(devices, cidrs, peer('192.168.1.5', '10.0.3.2', '127.0.0.1'))).toEqual(['rdma_en3']);
    expect(cablesTo(devices, cidrs, peer('169.254.9.9'))).toEqual(['rdma_en4', 'rdma_en5']);
    expect(cablesTo(devices, cidrs, peer('192.168.1.5'))).toEqual([]);
  });

  it('setup rounds over the TCP group: answered in order; a silent peer fails the round within its timeout, naming the peer', async () => {
    const [g0, g1] = await tcpGroups(2);
    const c0 = groupControlChannel(g0!, { timeoutMs: 300 });
    const c1 = groupControlChannel(g1!, { timeoutMs: 300 });
    const [a, b] = await Promise.all([c0.exchange(1, 'rdma-hello', { qpn: 7, gid: '::ffff:10.0.0.1' }), c1.exchange(0, 'rdma-hello', { qpn: 9 })]);
    expect(a).toEqual({ qpn: 9 });
    expect(b).toEqual({ qpn: 7, gid: '::ffff:10.0.0.1' });
    const t0 = performance.now();
    await expect(c0.exchange(1, 'rdma-ready', { ok: true })).rejects.toThrow(/^RDMA setup with rank 1 \(round rdma-ready\): .*rank 1/);
    expect(performance.now() - t0).toBeLessThan(2000);
  });
});
