/**
 * The transport benchmark: raw node:net baseline and the TCP group, measured in the same run,
 * between 2 and 3 processes on loopback. Shared by `pnpm bench:transport` and
 * `orchard bench transport [--json]`.
 *
 * JSON contract (stable): {"baseline":{"pingPongUs":..,"bulkMBps":..},"lines":[{"name","value","unit","ratio"}...]}
 *   latency lines (unit "us"):  ratio = median latency / raw ping-pong RTT   (target for 4 KiB: <= 1.5)
 *   throughput lines ("MB/s"):  ratio = throughput / raw bulk throughput    (targets: transfer >= 0.85,
 *                                                                            ring busbw >= 0.7)
 * Bulk baseline and transfer are each the better of a measurement before and one after the lines
 * between them.
 * Bus bandwidth of an all-reduce of B bytes over n ranks taking t seconds: 2(n-1)/n * B / t.
 * The line raw-exchange-4KiB-2ranks (raw sockets, both ends sending 4 KiB at once, in batches
 * interleaved with the 2-rank 4 KiB all-reduce's, slowest rank's median) is the floor a 2-rank
 * all-reduce can reach on the same machine, for reference. Likewise raw-ring-64MiB-3ranks-busbw:
 * 3 processes in a node:net ring, each streaming what one link of the 64 MiB ring all-reduce carries
 * (2(n-1)/n x 64 MiB) while receiving as much, measured right before that all-reduce: the ceiling
 * of its bus bandwidth on this machine (no framing, no reduction).
 * The raw ping-pong runs in batches interleaved with the latency-bound measurements (<= 64 KiB),
 * and the baseline RTT is the median over all of them, so on a shared machine both sides of each
 * ratio see the same load. Bulk baseline: the better of a run before and one after (conservative).
 */
import { startMesh, type Mesh } from '../src/testing/mesh.js';
import { killRanks, spawnRanks } from '../src/testing/ranks.js';

export interface BenchLine {
  name: string;
  value: number;
  unit: 'us' | 'MB/s';
  ratio: number;
}

export interface TransportBenchResult {
  baseline: { pingPongUs: number; bulkMBps: number };
  lines: BenchLine[];
}

export interface TransportBenchOptions {
  /** Fewer iterations (for smoke runs). @default false */
  quick?: boolean;
  /** Include encrypted transfers (cost of AES-GCM / ChaCha20-Poly1305). @default true */
  encryption?: boolean;
  /** Progress messages (to stderr in the CLI). */
  log?: (line: string) => void;
  /**
   * Append the RDMA protocol lines measured on the simulated fabric (bench/rdma-sim.ts, by the
   * RDMA work). Their ratios are against raw verbs on that fabric, not against the TCP baseline.
   * @default false
   */
  rdmaSim?: boolean;
}

const KiB = 1024;
const MiB = 1024 * 1024;
const BULK_BYTES = 64 * MiB;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const round = (x: number, digits = 3) => Number(x.toPrecision(digits + 2));

/**
 * Raw node:net between two processes, kept for the whole run: 4-byte ping-pong, 4 KiB exchange
 * (both ends at once) and 64 MiB bulk.
 */
interface RawPair {
  pingPong(iterations: number): Promise<number[]>;
  /** ms of each exchange, per rank. */
  exchange(iterations: number): Promise<number[][]>;
  /** MB/s: the faster of 64 KiB writes and one 64 MiB write, so ratios never flatter the data plane. */
  bulk(iterations: number): Promise<number>;
  close(): void;
}

async function rawPair(): Promise<RawPair> {
  const procs = await spawnRanks(2);
  const { port } = await procs[1].request<{ port: number }>('raw-listen', {});
  await procs[0].request('raw-connect', { host: '127.0.0.1', port });
  return {
    async pingPong(iterations) {
      const echo = procs[1].request('raw-echo', { bytes: 4, iterations }, 120_000);
      const pp = await procs[0].request<{ ms: number[] }>('raw-pingpong', { bytes: 4, iterations }, 120_000);
      await echo;
      return pp.ms;
    },
    async exchange(iterations) {
      const ex = await Promise.all(procs.map((p) => p.request<{ ms: number[] }>('raw-exchange', { bytes: 4 * KiB, iterations }, 120_000)));
      return ex.map((r) => r.ms);
    },
    async bulk(iterations) {
      let bulkMs = Infinity;
      for (const writeBytes of [64 * KiB, BULK_BYTES]) {
        const sink = procs[1].request('raw-sink', { bytes: BULK_BYTES, iterations: iterations + 1 }, 120_000);
        const bulk = await procs[0].request<{ ms: number[] }>('raw-bulk', { bytes: BULK_BYTES, iterations: iterations + 1, writeBytes }, 120_000);
        await sink;
        bulkMs = Math.min(bulkMs, median(bulk.ms.slice(1))); // first transfer is warm-up
      }
      return BULK_BYTES / 1e6 / (bulkMs / 1000);
    },
    close: () => killRanks(procs),
  };
}

/** A node:net ring of `n` processes (each dials its successor); see raw-ring in rank-worker.ts. */
async function rawRing(n: number): Promise<{ busbw(bytes: number, iterations: number): Promise<number>; close(): void }> {
  const procs = await spawnRanks(n);
  try {
    const ports = await Promise.all(procs.map((p) => p.request<{ port: number }>('raw-ring-listen', {})));
    await Promise.all(procs.map((p, r) => p.request('raw-ring-connect', { host: '127.0.0.1', port: ports[(r + 1) % n].port })));
  } catch (err) {
    killRanks(procs);
    throw err;
  }
  return {
    /** MB/s of one link while all links carry 2(n-1)/n x `bytes`: the bus bandwidth of a ring with nothing else to do. */
    async busbw(bytes, iterations) {
      const perLink = Math.floor(((2 * (n - 1)) / n) * bytes);
      const rs = await Promise.all(procs.map((p) => p.request<{ ms: number[] }>('raw-ring', { bytes: perLink, iterations: iterations + 1 }, 120_000)));
      // Slowest rank per round, first round is warm-up (as for the all-reduce).
      const ms = rs[0].ms.map((_, i) => Math.max(...rs.map((r) => r.ms[i]))).slice(1);
      return perLink / 1e6 / (median(ms) / 1000);
    },
    close: () => killRanks(procs),
  };
}

/**
 * All-reduce latency, as OSU's osu_allreduce runs it: operations back to back, but every one
 * timed on every rank; the result is the slowest rank's median after warm-up. (A barrier before
 * each operation would add its own exit skew, about one one-way latency, to the slower rank.)
 *
 * On a shared machine the load changes from second to second, so the iterations run in batches
 * alternating with batches of raw ping-pong (`rawSamples` collects those): the baseline RTT and
 * the all-reduce then sample the same conditions. `floor` also runs a batch of the raw 4 KiB
 * exchange before each batch (per-rank samples), for the raw floor line.
 *
 * Warm-up for those interleaved measurements is the same pattern, discarded: `warmup` operations
 * in 5 batches, each after a ping-pong (and exchange) batch of its own. Latencies here keep
 * falling for the first second or so of such traffic, for the raw sockets too (measured: ping-pong
 * 34 -> 26 us, raw exchange 45 -> 29 us, all-reduce 57 -> 31 us over four rounds of 5 batches),
 * so a warm-up of all-reduces alone, back to back, left the first batches sampling that transient.
 */
async function allReduceMs(
  mesh: Mesh,
  bytes: number,
  iterations: number,
  warmup: number,
  raw?: RawPair,
  rawSamples?: number[],
  dtype: 'f32' | 'f16' = 'f32',
  floor?: { pair: RawPair; samples: number[][] },
): Promise<number> {
  const batches = raw ? Math.min(5, iterations) : 1;
  // Interleaved: 5 warm-up batches first; alone: the warm-up leads the one batch.
  const warmBatches = raw ? 5 : 0;
  const per: number[][] = mesh.ranks.map(() => []);
  for (let b = 0; b < warmBatches + batches; b++) {
    const warm = b < warmBatches;
    const n = warm ? Math.ceil(warmup / warmBatches) : Math.ceil(iterations / batches);
    if (raw && rawSamples) {
      const rtt = await raw.pingPong(Math.max(50, n) + 10);
      if (!warm) rawSamples.push(...rtt.slice(10));
    }
    if (floor) {
      const ex = await floor.pair.exchange(n + 10);
      if (!warm) ex.forEach((ms, i) => floor.samples[i].push(...ms.slice(10)));
    }
    const lead = !raw && b === 0 ? warmup : 0;
    const rs = await mesh.all<{ ms: number[] }>(
      'allreduce',
      () => ({ elements: bytes / (dtype === 'f16' ? 2 : 4), dtype, iterations: n + lead, verify: false }),
      300_000,
    );
    if (!warm) rs.forEach((r, i) => per[i].push(...r.ms.slice(lead)));
  }
  return Math.max(...per.map((ms) => median(ms)));
}

/**
 * One-way transfer rank 0 -> rank 1, timed from the send to the receiver's 1-byte ack. The
 * receiver posts its receive before the sender starts (as a pipeline stage does, and as the raw
 * baseline's receiver is always reading).
 */
async function transferMBps(mesh: Mesh, bytes: number, iterations: number): Promise<number> {
  const [tx] = await Promise.all([
    mesh.ranks[0].request<{ ms: number[] }>('sendrecv', { peer: 1, bytes, iterations: iterations + 1, role: 'send' }, 300_000),
    mesh.ranks[1].request('sendrecv', { peer: 0, bytes, iterations: iterations + 1, role: 'recv', prepost: true }, 300_000),
  ]);
  return bytes / 1e6 / (median(tx.ms.slice(1)) / 1000);
}

export async function runTransportBench(options: TransportBenchOptions = {}): Promise<TransportBenchResult> {
  const quick = options.quick ?? false;
  const log = options.log ?? (() => {});
  const lines: BenchLine[] = [];
  // Baseline: raw sockets between two processes of this same run. RTT = median of all raw
  // ping-pong batches, which are interleaved with the latency measurements; bulk = the better of
  // a measurement before and one after the group measurements (conservative on a shared machine).
  log('baseline: raw node:net between 2 processes');
  const raw = await rawPair();
  // The exchange floor runs on a pair of its own: an exchange leaves its two processes spread over
  // the cores, which would change where the ping-pong pair's next batch runs.
  const rawEx = await rawPair().catch((err) => {
    raw.close();
    throw err;
  });
  const rawRtt: number[] = [];
  try {
    // Warm-ups, only logged: the RTT baseline is sampled next to the all-reduces (allReduceMs),
    // after the same warm-up they get (the first second of traffic here is slower).
    const firstRtt = (await raw.pingPong(quick ? 300 : 2000)).slice(100);
    await rawEx.exchange(quick ? 300 : 2000);
    const bulkBefore = await raw.bulk(quick ? 1 : 3);
    const baseline = { pingPongUs: median(firstRtt) * 1000, bulkMBps: bulkBefore };
    log(`  ping-pong ${baseline.pingPongUs.toFixed(1)} us, bulk ${baseline.bulkMBps.toFixed(0)} MB/s`);
    // Filled in next to allreduce-4KiB-2ranks, sampled in the same batches.
    const exchangeLine: BenchLine = { name: 'raw-exchange-4KiB-2ranks', value: 0, unit: 'us', ratio: 0 };
    lines.push(exchangeLine);
    const latency = (name: string, ms: number) => lines.push({ name, value: round(ms * 1000), unit: 'us', ratio: 0 });
    const throughput = (name: string, mbps: number) => lines.push({ name, value: round(mbps), unit: 'MB/s', ratio: 0 });

    const sizes: Array<[string, number, number]> = [
      ['4KiB', 4 * KiB, quick ? 100 : 1000],
      ['64KiB', 64 * KiB, quick ? 50 : 300],
      ['1MiB', MiB, quick ? 10 : 50],
      ['16MiB', 16 * MiB, quick ? 3 : 8],
    ];
    for (const ranks of [2, 3]) {
      log(`TCP group, ${ranks} processes`);
      const mesh = await startMesh(ranks, { timeoutMs: 30_000 });
      try {
        // The transfer, like the bulk baseline it is divided by, is the better of a measurement
        // before and one after the large all-reduce lines (seconds apart), so a load burst on a
        // shared machine cannot decide the ratio from one side only. (Not before the latency
        // lines: those run first on a fresh mesh, before any 64 MiB buffer has come and gone.)
        let transferBefore = 0;
        for (const [label, bytes, iterations] of sizes) {
          if (ranks === 2 && bytes >= MiB && transferBefore === 0) transferBefore = await transferMBps(mesh, BULK_BYTES, quick ? 2 : 4);
          // Latency-bound sizes: sample the same load as the RTT, and warm up long enough for V8 to
          // optimise the whole path (a few thousand operations), as a serving process would be.
          const small = bytes <= 64 * KiB;
          const warmup = small ? (quick ? 300 : 2000) : Math.max(2, Math.floor(iterations / 10));
          // The raw exchange floor is aggregated as the all-reduce is: the slowest rank's median.
          // (The ranks' iterations are offset, so a per-iteration max would pair one rank's long
          // iteration with the other's: ~45% higher, measured here.)
          const floor = ranks === 2 && bytes === 4 * KiB ? { pair: rawEx, samples: [[], []] } : undefined;
          const ms = await allReduceMs(mesh, bytes, iterations, warmup, small ? raw : undefined, rawRtt, 'f32', floor);
          if (floor) exchangeLine.value = round(Math.max(...floor.samples.map((e) => median(e))) * 1000);
          latency(`allreduce-${label}-${ranks}ranks`, ms);
          if (bytes >= MiB) throughput(`allreduce-${label}-${ranks}ranks-busbw`, ((2 * (ranks - 1)) / ranks) * (bytes / 1e6) / (ms / 1000));
          log(`  allreduce ${label}: ${(ms * 1000).toFixed(1)} us`);
        }
        // f16 (what tensor-parallel engines exchange): a hidden state of 4096 halves.
        latency(`allreduce-8KiB-f16-${ranks}ranks`, await allReduceMs(mesh, 8 * KiB, quick ? 100 : 1000, quick ? 300 : 2000, raw, rawRtt, 'f16'));
        if (ranks === 3) {
          const ring = await rawRing(3);
          try {
            throughput('raw-ring-64MiB-3ranks-busbw', await ring.busbw(64 * MiB, quick ? 2 : 4));
          } finally {
            ring.close();
          }
        }
        const ms64 = await allReduceMs(mesh, 64 * MiB, quick ? 2 : 4, 1);
        const busbw = ((2 * (ranks - 1)) / ranks) * ((64 * MiB) / 1e6) / (ms64 / 1000);
        throughput(ranks === 3 ? 'ring-allreduce-64MiB-3ranks-busbw' : 'allreduce-64MiB-2ranks-busbw', busbw);
        log(`  allreduce 64MiB: ${ms64.toFixed(1)} ms, bus bandwidth ${busbw.toFixed(0)} MB/s`);
        if (ranks === 2) {
          const mbps = Math.max(transferBefore, await transferMBps(mesh, BULK_BYTES, quick ? 2 : 4));
          throughput('transfer-64MiB', mbps);
          log(`  transfer 64MiB: ${mbps.toFixed(0)} MB/s`);
        }
      } finally {
        await mesh.close();
      }
    }
    if (options.encryption ?? true) {
      for (const cipher of ['aes-256-gcm', 'chacha20-poly1305'] as const) {
        log(`TCP group, 2 processes, ${cipher}`);
        const mesh = await startMesh(2, { timeoutMs: 30_000, encrypt: cipher });
        try {
          const mbps = await transferMBps(mesh, BULK_BYTES, quick ? 2 : 3);
          throughput(`transfer-64MiB-${cipher}`, mbps);
          latency(`allreduce-4KiB-2ranks-${cipher}`, await allReduceMs(mesh, 4 * KiB, quick ? 100 : 500, quick ? 300 : 2000, raw, rawRtt));
          log(`  transfer 64MiB: ${mbps.toFixed(0)} MB/s`);
        } finally {
          await mesh.close();
        }
      }
    }
    log('bulk baseline again');
    baseline.bulkMBps = Math.max(bulkBefore, await raw.bulk(quick ? 1 : 3));
    baseline.pingPongUs = median(rawRtt) * 1000;
    log(`  ping-pong ${baseline.pingPongUs.toFixed(1)} us (all batches), bulk ${baseline.bulkMBps.toFixed(0)} MB/s`);
    for (const l of lines) {
      l.ratio = round(l.unit === 'us' ? l.value / baseline.pingPongUs : l.value / baseline.bulkMBps);
    }
    if (options.rdmaSim) {
      log('RDMA protocol on the simulated fabric (ratios vs raw verbs on that fabric)');
      const { rdmaSimLines } = await import('./rdma-sim.js');
      const sim = await rdmaSimLines(quick ? 100 : 400);
      for (const l of sim.lines) lines.push({ name: l.name, value: l.value, unit: 'us', ratio: l.ratio });
    }
    return { baseline: { pingPongUs: round(baseline.pingPongUs), bulkMBps: round(baseline.bulkMBps) }, lines };
  } finally {
    raw.close();
    rawEx.close();
  }
}

/** Targets from the issue, for the human-readable table. */
export const TARGETS: Record<string, string> = {
  'allreduce-4KiB-2ranks': '<= 1.5',
  'transfer-64MiB': '>= 0.85',
  'ring-allreduce-64MiB-3ranks-busbw': '>= 0.7',
  'raw-exchange-4KiB-2ranks': '(raw floor, for reference)',
  'raw-ring-64MiB-3ranks-busbw': '(raw ceiling, for reference)',
};

export function formatTable(r: TransportBenchResult): string {
  const out = [
    `baseline (raw node:net, same run): ping-pong RTT ${r.baseline.pingPongUs} us, bulk ${r.baseline.bulkMBps} MB/s`,
    '',
    `${'name'.padEnd(42)} ${'value'.padStart(12)} ${'unit'.padEnd(5)} ${'ratio'.padStart(8)}  target`,
  ];
  for (const l of r.lines) {
    out.push(`${l.name.padEnd(42)} ${String(l.value).padStart(12)} ${l.unit.padEnd(5)} ${String(l.ratio).padStart(8)}  ${TARGETS[l.name] ?? ''}`);
  }
  out.push('', 'latency ratios are against the raw ping-pong RTT; throughput ratios against raw bulk throughput;');
  out.push('rdma-sim-* lines (with --rdma-sim) against raw verbs on the simulated fabric.');
  return out.join('\n');
}
