/**
 * RDMA protocol overhead on the simulated fabric (no hardware involved).
 *
 * Baseline, measured in the same run: raw verbs ping-pong on the simulated fabric — post a RECV, post a SEND,
 * wait for the completion — at each injected one-way latency. Then the same ping-pong through the RDMA
 * protocol (RdmaLink: size classes, slab copies, completion dispatch, watchdog) and small all-reduces through
 * the mesh Group. `ratio` = protocol time / raw-verbs time at the same injected latency, and the derived
 * per-message overhead in microseconds. These numbers say how much the JavaScript protocol layer adds on
 * top of the fabric, so regressions show without hardware; they say nothing about Thunderbolt latency.
 *
 *   tsx packages/transport/bench/rdma-sim.ts [--json] [--iterations N]
 */
import { performance } from 'node:perf_hooks';
import { createRdmaGroup, type ControlChannel, type PeerLink } from '../src/rdma/index.js';
import { SimFabric } from '../src/rdma/sim-fabric.js';
import type { Handle, Verbs } from '../src/rdma/verbs.js';

export interface BenchLine {
  name: string;
  value: number;
  unit: string;
  ratio: number;
}

const args = process.argv.slice(2);
const json = args.includes('--json');
const iterArg = args.indexOf('--iterations');
const ITER = iterArg >= 0 ? Number(args[iterArg + 1]) : 400;
const LATENCIES_US = [0, 20, 100];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Raw verbs on the simulated fabric: one QP pair, a RECV always posted ahead, 4-byte SENDs. */
async function rawPingPong(latencyUs: number, iterations: number): Promise<number> {
  const fabric = new SimFabric({ mode: 'apple', latencyUs });
  const ends = ['a', 'b'].map((h, i) => {
    const v = fabric.addHost(h, [{ name: 'rdma_en1', ipv4: `10.0.0.${i + 1}` }]);
    const ctx = v.openDevice('rdma_en1');
    const pd = v.allocPd(ctx);
    const cq = v.createCq(ctx, 16);
    const slab = v.allocSlab(8192);
    const mr = v.regMr(pd, slab);
    const { qp, qpn } = v.createQp(pd, { type: 'UC', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4 });
    v.modifyQpInit(qp, 1);
    return { v, ctx, cq, mr, qp, qpn };
  });
  const [a, b] = ends as [(typeof ends)[0], (typeof ends)[0]];
  const info = (e: typeof a) => ({ lid: 0, qpn: e.qpn, psn: 0, gid: e.v.queryGid(e.ctx, 1, 1) });
  a.v.modifyQpRtr(a.qp, { port: 1, pathMtu: 4096, dest: info(b), sgidIndex: 1 });
  b.v.modifyQpRtr(b.qp, { port: 1, pathMtu: 4096, dest: info(a), sgidIndex: 1 });
  a.v.modifyQpRts(a.qp, 0);
  b.v.modifyQpRts(b.qp, 0);
  const waitRecv = async (v: Verbs, cq: Handle) => {
    for (;;) {
      const wcs = v.pollCq(cq, 8);
      if (wcs.some((w) => w.opcode === 'recv')) return;
      await v.waitCq!(cq);
    }
  };
  a.v.postRecv(a.qp, 1, a.mr, 4096, 4096);
  b.v.postRecv(b.qp, 1, b.mr, 4096, 4096);
  const times: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    a.v.postSend(a.qp, 2, a.mr, 0, 4);
    await waitRecv(b.v, b.cq);
    b.v.postRecv(b.qp, 1, b.mr, 4096, 4096);
    b.v.postSend(b.qp, 2, b.mr, 0, 4);
    await waitRecv(a.v, a.cq);
    a.v.postRecv(a.qp, 1, a.mr, 4096, 4096);
    times.push((performance.now() - t0) * 1000);
  }
  await fabric.close();
  return median(times.slice(Math.floor(iterations / 10)));
}

function memoryControl(): (rank: number) => ControlChannel {
  const boxes = new Map<string, { v?: unknown; has: boolean; w?: (v: unknown) => void }>();
  const box = (k: string) => boxes.get(k) ?? (boxes.set(k, { has: false }), boxes.get(k)!);
  return (rank) => ({
    exchange(peer, round, value) {
      const out = box(`${rank}>${peer}:${round}`);
      if (out.w) out.w(value);
      else Object.assign(out, { v: value, has: true });
      const inb = box(`${peer}>${rank}:${round}`);
      return inb.has ? Promise.resolve(inb.v) : new Promise((r) => (inb.w = r));
    },
  });
}

async function meshOnSim(size: number, latencyUs: number) {
  const fabric = new SimFabric({ mode: 'apple', latencyUs });
  const control = memoryControl();
  const verbs = [...Array(size).keys()].map((r) =>
    fabric.addHost(
      `h${r}`,
      [...Array(size).keys()].filter((p) => p !== r).map((p) => ({ name: `rdma_en${p + 1}`, ipv4: `10.${r}.${p}.1` })),
    ),
  );
  const made = await Promise.all(
    verbs.map((v, rank) =>
      createRdmaGroup({
        rank,
        size,
        verbs: v,
        deviceFor: (p) => `rdma_en${p + 1}`,
        control: control(rank),
        fallback: async (): Promise<PeerLink> => {
          throw new Error('no fallback in the benchmark');
        },
        timeoutMs: 10_000,
      }),
    ),
  );
  return { fabric, groups: made.map((m) => m.group) };
}

/**
 * 4-byte ping-pong through the protocol. `preposted`: each side's receive is posted before the message
 * it waits for is sent (what the collectives do), like the raw baseline. Otherwise the responder posts its
 * receive only when the ping is sent, and the SEND waits one extra one-way latency for the credit.
 */
async function protocolPingPong(latencyUs: number, iterations: number, preposted: boolean): Promise<number> {
  const { fabric, groups } = await meshOnSim(2, latencyUs);
  const [a, b] = groups as [(typeof groups)[0], (typeof groups)[0]];
  const out = new Uint8Array(4);
  const inA = new Uint8Array(4);
  const inB = new Uint8Array(4);
  const reply = new Uint8Array(4);
  const times: number[] = [];
  let pendingB = preposted ? b.recv(0, inB) : null;
  if (preposted) await new Promise((r) => setTimeout(r, 1 + latencyUs / 1000));
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    const back = a.recv(1, inA);
    if (preposted) {
      await a.send(1, out);
      await pendingB;
      pendingB = b.recv(0, inB); // for the next round, before this round's reply
    } else {
      await Promise.all([a.send(1, out), b.recv(0, inB)]);
    }
    await b.send(0, reply);
    await back;
    times.push((performance.now() - t0) * 1000);
    if (preposted) await new Promise((r) => setTimeout(r, latencyUs >= 50 ? 1 : 0)); // let the credit arrive
  }
  if (pendingB) void pendingB.catch(() => {});
  await Promise.all(groups.map((g) => g.close()));
  await fabric.close();
  return median(times.slice(Math.floor(iterations / 10)));
}

async function allReduceLatency(size: number, bytes: number, latencyUs: number, iterations: number): Promise<number> {
  const { fabric, groups } = await meshOnSim(size, latencyUs);
  const bufs = groups.map(() => new Float32Array(bytes / 4).fill(1));
  const times: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    await Promise.all(groups.map((g, r) => g.allReduce(bufs[r]!)));
    times.push((performance.now() - t0) * 1000);
  }
  await Promise.all(groups.map((g) => g.close()));
  await fabric.close();
  return median(times.slice(Math.floor(iterations / 10)));
}

/** Runs every line; exported so `pnpm bench:transport` can append them to its own output. */
export async function rdmaSimLines(iterations = ITER): Promise<{ baseline: Record<string, number>; lines: BenchLine[] }> {
  const baseline: Record<string, number> = {};
  const lines: BenchLine[] = [];
  // Warm-up so JIT compilation does not land in the first configuration's numbers.
  await rawPingPong(0, 100);
  await protocolPingPong(0, 100, true);
  await allReduceLatency(2, 4096, 0, 50);
  for (const lat of LATENCIES_US) {
    const raw = await rawPingPong(lat, iterations);
    baseline[`rawVerbsPingPongUs@${lat}us`] = raw;
    const proto = await protocolPingPong(lat, iterations, true);
    lines.push({ name: `rdma-sim-pingpong-4B-lat${lat}us`, value: proto, unit: 'us', ratio: proto / raw });
    lines.push({ name: `rdma-sim-overhead-per-message-lat${lat}us`, value: (proto - raw) / 2, unit: 'us', ratio: proto / raw });
    const late = await protocolPingPong(lat, iterations, false);
    lines.push({ name: `rdma-sim-pingpong-4B-late-recv-lat${lat}us`, value: late, unit: 'us', ratio: late / raw });
    const ar = await allReduceLatency(2, 4096, lat, Math.max(20, iterations / 4));
    lines.push({ name: `rdma-sim-allreduce-4KiB-2ranks-lat${lat}us`, value: ar, unit: 'us', ratio: ar / raw });
  }
  const raw0 = baseline['rawVerbsPingPongUs@0us']!;
  const round = (x: number) => Math.round(x * 100) / 100;
  const ar8 = await allReduceLatency(8, 4096, 0, Math.max(20, iterations / 8));
  lines.push({ name: 'rdma-sim-allreduce-4KiB-8ranks-lat0us', value: ar8, unit: 'us', ratio: ar8 / raw0 });
  for (const l of lines) Object.assign(l, { value: round(l.value), ratio: round(l.ratio) });
  for (const k of Object.keys(baseline)) baseline[k] = round(baseline[k]!);
  return { baseline, lines };
}

const isMain = import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('rdma-sim.ts');
if (isMain) {
  const result = await rdmaSimLines();
  if (json) console.log(JSON.stringify(result));
  else {
    console.log('RDMA protocol on the simulated fabric (JavaScript overhead; not a hardware measurement)');
    for (const [k, v] of Object.entries(result.baseline)) console.log(`  baseline ${k.padEnd(44)} ${v.toFixed(1)} us`);
    for (const l of result.lines) console.log(`  ${l.name.padEnd(53)} ${l.value.toFixed(1).padStart(8)} ${l.unit}   x${l.ratio.toFixed(2)} vs raw verbs`);
  }
}
