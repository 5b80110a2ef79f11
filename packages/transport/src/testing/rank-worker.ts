/**
 * One rank in its own process, driven by ranks.ts over JSON lines. Commands:
 *   listen {host}                      -> {port}
 *   connect {rank, peers, groupId, secret, encrypt?, timeoutMs?, thresholdBytes?} -> {}
 *   allreduce {elements, dtype, iterations} -> {sha256, ms[], verified}
 *       data: x[i] = ((i * (rank + 3)) % 1001) - 500 (+ iteration); the result is checked against
 *       the closed-form sum, and its hash lets the parent compare ranks bit for bit.
 *   sendrecv {peer, bytes, iterations, role: 'send'|'recv', prepost?, barrier?} -> {ms[]}
 *       (barrier: false when not every rank takes part)
 *   raw-listen {host} / raw-connect {host, port} / raw-pingpong {iterations} / raw-bulk {bytes}
 *       node:net baseline for the benchmark (no framing, no auth).
 *   raw-ring-listen {host} -> {port};  raw-ring-connect {host, port};  raw-ring {bytes, iterations}
 *       -> {ms[]}: node:net ring (dial the successor, accept the predecessor), each rank streaming
 *       `bytes` to its successor while taking as many from its predecessor: what the links of a
 *       ring all-reduce carry, without framing or reduction.
 *   probe-listen {host, secret} -> {port};  probe {host, port, secret, ...} -> LinkProbeResult
 *   close -> {}
 */
import { createHash } from 'node:crypto';
import net, { type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import type { Group } from '../group.js';
import { createTcpGroup } from '../tcp/group.js';
import { listenTcp, type TcpListener } from '../tcp/listener.js';
import { probeLink, startProbeServer, type ProbeServer } from '../probe.js';

let listener: TcpListener | null = null;
let probeServer: ProbeServer | null = null;
let group: Group | null = null;
let rank = -1;
let rawServer: net.Server | null = null;
let raw: Socket | null = null;
let rawChunks: Buffer[] = [];
let rawBuffered = 0;
let rawWaiter: { n: number; resolve: () => void } | null = null;
let ringServer: net.Server | null = null;
let ringOut: Socket | null = null;
let ringIn: Socket | null = null;
let ringRx = 0;
let ringWaiter: { n: number; resolve: () => void } | null = null;

/** Waits until `n` more bytes came from the ring predecessor (they are discarded, as raw-sink does). */
function ringTake(n: number): Promise<void> {
  if (ringRx >= n) {
    ringRx -= n;
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    ringWaiter = { n, resolve };
  });
}

function reply(msg: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(msg)}\n`);
}

function fill(buf: Float32Array | Uint16Array, r: number, it: number): void {
  for (let i = 0; i < buf.length; i++) {
    const v = ((i * (r + 3)) % 1001) - 500 + it;
    buf[i] = v;
  }
}

function attachRaw(s: Socket): void {
  raw = s;
  s.setNoDelay(true);
  s.on('data', (c: Buffer) => {
    rawChunks.push(c);
    rawBuffered += c.length;
    if (rawWaiter && rawBuffered >= rawWaiter.n) {
      const w = rawWaiter;
      rawWaiter = null;
      w.resolve();
    }
  });
}

/** Waits for n raw bytes and discards them. */
function rawTake(n: number): Promise<void> {
  const consume = () => {
    let left = n;
    while (left > 0) {
      const c = rawChunks[0];
      if (c.length <= left) {
        rawChunks.shift();
        left -= c.length;
      } else {
        rawChunks[0] = c.subarray(left);
        left = 0;
      }
    }
    rawBuffered -= n;
  };
  if (rawBuffered >= n) {
    consume();
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    rawWaiter = {
      n,
      resolve: () => {
        consume();
        resolve();
      },
    };
  });
}

async function handle(m: any): Promise<Record<string, unknown>> {
  switch (m.cmd) {
    case 'listen':
      listener = await listenTcp({ host: m.host ?? '127.0.0.1' });
      return { port: listener.address.port, host: listener.address.host };
    case 'connect':
      rank = m.rank;
      group = await createTcpGroup({
        rank: m.rank,
        peers: m.peers,
        groupId: m.groupId,
        secret: m.secret,
        encrypt: m.encrypt ?? false,
        timeoutMs: m.timeoutMs,
        thresholdBytes: m.thresholdBytes,
        chunkBytes: m.chunkBytes,
        listener: listener ?? undefined,
        connectTimeoutMs: m.connectTimeoutMs ?? 15_000,
      });
      listener = null;
      return {};
    case 'allreduce': {
      const g = group!;
      const n: number = m.elements;
      const f16 = m.dtype === 'f16';
      const buf = f16 ? new Uint16Array(n) : new Float32Array(n);
      const ms: number[] = [];
      let verified = true;
      for (let it = 0; it < (m.iterations ?? 1); it++) {
        // Benchmarks (verify: false) reduce zeros, filled once, so no rank spends time between
        // iterations that its peers would count as latency.
        if (m.verify === false) {
          if (it === 0) buf.fill(0);
        } else if (f16) for (let i = 0; i < n; i++) buf[i] = 0x3c00; // 1.0
        else fill(buf, g.rank, it);
        if (m.barrier) await g.barrier();
        const t0 = performance.now();
        await g.allReduce(buf, 'sum', m.timeoutMs ? { timeoutMs: m.timeoutMs } : undefined);
        ms.push(performance.now() - t0);
        if (m.verify !== false) {
          for (let i = 0; i < n; i += m.verifyStride ?? 1) {
            let want = 0;
            if (f16) want = g.size === 2 ? 0x4000 : g.size === 3 ? 0x4200 : 0x4400;
            else for (let r = 0; r < g.size; r++) want += ((i * (r + 3)) % 1001) - 500 + it;
            if (buf[i] !== want) {
              verified = false;
              break;
            }
          }
        }
      }
      const sha256 = createHash('sha256').update(new Uint8Array(buf.buffer)).digest('hex');
      return { sha256, ms, verified };
    }
    case 'sendrecv': {
      const g = group!;
      const buf = new Uint8Array(m.bytes);
      const o = m.timeoutMs ? { timeoutMs: m.timeoutMs } : undefined;
      const ms: number[] = [];
      for (let it = 0; it < (m.iterations ?? 1); it++) {
        const early = m.role === 'recv' && m.prepost ? g.recv(m.peer, buf, o) : null;
        if (m.barrier !== false) await g.barrier();
        const t0 = performance.now();
        if (early) {
          await early;
          await g.send(m.peer, buf.subarray(0, 1), o);
        } else if (m.role === 'send') {
          await g.send(m.peer, buf, o);
          await g.recv(m.peer, buf.subarray(0, 1), o); // the receiver's ack: time covers delivery
        } else {
          await g.recv(m.peer, buf, o);
          await g.send(m.peer, buf.subarray(0, 1), o);
        }
        ms.push(performance.now() - t0);
      }
      return { ms };
    }
    case 'exchange': {
      // Group point-to-point: send `bytes` to the peer and receive as many, back to back.
      const g = group!;
      const out = new Uint8Array(m.bytes);
      const into = new Uint8Array(m.bytes);
      const ms: number[] = [];
      for (let it = 0; it < m.iterations; it++) {
        const t0 = performance.now();
        await Promise.all([g.send(m.peer, out), g.recv(m.peer, into)]);
        ms.push(performance.now() - t0);
      }
      return { ms };
    }
    case 'raw-ring-listen': {
      const accepted = new Promise<Socket>((resolve) => {
        ringServer = net.createServer((sock) => resolve(sock));
      });
      await new Promise<void>((r) => ringServer!.listen(0, m.host ?? '127.0.0.1', () => r()));
      void accepted.then((sock) => {
        ringIn = sock;
        sock.setNoDelay(true);
        sock.on('data', (c: Buffer) => {
          ringRx += c.length;
          if (ringWaiter && ringRx >= ringWaiter.n) {
            const w = ringWaiter;
            ringWaiter = null;
            ringRx -= w.n;
            w.resolve();
          }
        });
      });
      return { port: (ringServer!.address() as net.AddressInfo).port };
    }
    case 'raw-ring-connect': {
      const s = net.connect({ host: m.host, port: m.port, noDelay: true });
      await new Promise<void>((r, j) => {
        s.once('connect', () => r());
        s.once('error', j);
      });
      ringOut = s;
      return {};
    }
    case 'raw-ring': {
      const frame = Buffer.alloc(m.writeBytes ?? 64 * 1024);
      const ms: number[] = [];
      for (let i = 0; i < m.iterations; i++) {
        const t0 = performance.now();
        const received = ringTake(m.bytes);
        for (let sent = 0; sent < m.bytes; sent += frame.length) {
          const piece = m.bytes - sent < frame.length ? frame.subarray(0, m.bytes - sent) : frame;
          if (!ringOut!.write(piece)) await new Promise((r) => ringOut!.once('drain', r));
        }
        await received;
        ms.push(performance.now() - t0);
      }
      return { ms };
    }
    case 'raw-listen': {
      rawServer = net.createServer((s) => attachRaw(s));
      await new Promise<void>((r) => rawServer!.listen(0, m.host ?? '127.0.0.1', () => r()));
      return { port: (rawServer.address() as net.AddressInfo).port };
    }
    case 'raw-connect': {
      const s = net.connect({ host: m.host, port: m.port, noDelay: true });
      await new Promise<void>((r, j) => {
        s.once('connect', () => r());
        s.once('error', j);
      });
      attachRaw(s);
      return {};
    }
    case 'raw-echo': {
      // Echo `iterations` messages of `bytes` (server side of ping-pong).
      const n = m.bytes;
      const msg = Buffer.alloc(n);
      for (let i = 0; i < m.iterations; i++) {
        await rawTake(n);
        raw!.write(msg);
      }
      return {};
    }
    case 'raw-pingpong': {
      const n = m.bytes;
      const msg = Buffer.alloc(n);
      const ms: number[] = [];
      for (let i = 0; i < m.iterations; i++) {
        const t0 = performance.now();
        raw!.write(msg);
        await rawTake(n);
        ms.push(performance.now() - t0);
      }
      return { ms };
    }
    case 'raw-exchange': {
      // Both ends send `bytes` at once and wait for the other's: a raw socket's floor for a
      // 2-rank all-reduce without the reduction.
      const msg = Buffer.alloc(m.bytes);
      const ms: number[] = [];
      for (let i = 0; i < m.iterations; i++) {
        const t0 = performance.now();
        raw!.write(msg);
        await rawTake(m.bytes);
        ms.push(performance.now() - t0);
      }
      return { ms };
    }
    case 'raw-sink': {
      // Receive `bytes`, then send a 1-byte ack; repeated `iterations` times.
      for (let i = 0; i < m.iterations; i++) {
        await rawTake(m.bytes);
        raw!.write(Buffer.alloc(1));
      }
      return {};
    }
    case 'raw-bulk': {
      const frame = Buffer.alloc(m.writeBytes ?? 64 * 1024);
      const ms: number[] = [];
      for (let i = 0; i < m.iterations; i++) {
        const t0 = performance.now();
        for (let sent = 0; sent < m.bytes; sent += frame.length) {
          if (!raw!.write(frame)) await new Promise((r) => raw!.once('drain', r));
        }
        await rawTake(1);
        ms.push(performance.now() - t0);
      }
      return { ms };
    }
    case 'probe-listen': {
      probeServer = await startProbeServer({ host: m.host ?? '127.0.0.1', secret: m.secret });
      return { port: probeServer.port };
    }
    case 'probe': {
      const r = await probeLink({ host: m.host, port: m.port, secret: m.secret, pings: m.pings, bulkBytes: m.bulkBytes, timeoutMs: m.timeoutMs });
      return { ...r };
    }
    case 'close':
      await probeServer?.close();
      await group?.close();
      await listener?.close();
      raw?.destroy();
      rawServer?.close();
      ringOut?.destroy();
      ringIn?.destroy();
      ringServer?.close();
      group = null;
      return {};
    default:
      throw new Error(`unknown command ${m.cmd}`);
  }
}

createInterface({ input: process.stdin }).on('line', (line) => {
  let m: any;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  handle(m).then(
    (r) => reply({ id: m.id, ok: true, ...r }),
    (e: Error) => reply({ id: m.id, error: `${e?.name ?? 'Error'}: ${e?.message ?? String(e)}`, name: e?.name, rank }),
  );
});
process.stdin.on('end', () => process.exit(0));
