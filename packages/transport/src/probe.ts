/**
 * Link probe: one-way latency (half the median ping-pong round trip) and bulk bandwidth between
 * this process and a probe server, so the daemon can fill the planner's `links`
 * (`ClusterLink.latencyUs`, `ClusterLink.bandwidthGbps`).
 *
 * The probe runs over its own TCP connection (TCP_NODELAY) after the same HMAC handshake as the
 * data plane (purpose "probe"), so a probe server only serves clients holding the cluster secret.
 *
 * Wire after the handshake, client -> server 8-byte commands `type u8 | 0 0 0 | length u32`:
 *   PING (1): the server echoes the 8 bytes.
 *   BULK (2): `length` payload bytes follow; the server answers with 8 bytes `ACK (3) | length`
 *             once it has received all of them.
 */
import net, { type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { AuthError, ConnectError, TransportError } from './errors.js';
import { ExactReader, clientHandshake, serverHandshake } from './tcp/handshake-io.js';
import { Purpose, secretBytes } from './wire/handshake.js';

const PING = 1;
const BULK = 2;
const ACK = 3;
const CMD_BYTES = 8;
const PROBE_GROUP = 'orchard-probe';

export interface ProbeServerOptions {
  /** Address to listen on. @default '127.0.0.1' (nothing is exposed unless asked) */
  host?: string;
  /** Port; 0 picks a free one. @default 0 */
  port?: number;
  /** Shared secret clients must prove (the cluster secret). @default '' (any Orchard client) */
  secret?: Uint8Array | string;
  /** Largest bulk transfer a client may request, bytes. @default 256 MiB — bounds a client's cost */
  maxBulkBytes?: number;
  /** Drop a connection idle for this long, ms. @default 10000 */
  idleTimeoutMs?: number;
  /** Handshake deadline, ms. @default 3000 */
  handshakeTimeoutMs?: number;
  /** Connections served at once; more are refused at accept. @default unlimited */
  maxConnections?: number;
}

export interface ProbeServer {
  readonly host: string;
  readonly port: number;
  /** Stop listening and drop every probe connection. */
  close(): Promise<void>;
}

export interface ProbeLinkOptions {
  host: string;
  port: number;
  /** Must match the server's secret. @default '' */
  secret?: Uint8Array | string;
  /** Round trips for the latency median (after 5 warm-up trips). @default 50 */
  pings?: number;
  /** Bytes for the bandwidth measurement (after a 1 MiB warm-up). @default 16 MiB */
  bulkBytes?: number;
  /** Whole-probe deadline in ms; rejects with a PeerTimeoutError-like TransportError. @default 10000 */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface LinkProbeResult {
  /** One-way small-message latency, microseconds: half the median ping-pong round trip. */
  latencyUs: number;
  /** Client-to-server throughput of the bulk transfer, Gbit/s. */
  bandwidthGbps: number;
  /** Median round trip, microseconds. */
  rttUs: number;
  /** Bytes moved by the bulk measurement. */
  bulkBytes: number;
}

/** Starts a probe server; the daemon runs one next to its data-plane listener. */
export async function startProbeServer(options: ProbeServerOptions = {}): Promise<ProbeServer> {
  const secret = secretBytes(options.secret);
  const maxBulk = options.maxBulkBytes ?? 256 * 1024 * 1024;
  const idle = options.idleTimeoutMs ?? 10_000;
  const sockets = new Set<Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.setNoDelay(true);
    socket.setTimeout(idle, () => socket.destroy());
    serverHandshake(socket, {
      secret,
      timeoutMs: options.handshakeTimeoutMs ?? 3000,
      accept(hello) {
        if (hello.purpose !== Purpose.Probe || hello.groupId !== PROBE_GROUP || hello.flags !== 0) {
          throw new AuthError('not a probe client');
        }
      },
    }).then(
      ({ leftover }) => serveProbe(socket, leftover, maxBulk),
      () => socket.destroy(),
    );
  });
  const host = options.host ?? '127.0.0.1';
  if (options.maxConnections !== undefined) server.maxConnections = options.maxConnections;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    host,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** The server side after the handshake: a byte-counting state machine, no payload is kept. */
function serveProbe(socket: Socket, leftover: Buffer, maxBulk: number): void {
  const cmd = Buffer.alloc(CMD_BYTES);
  let cmdFill = 0;
  let bulkLeft = 0;
  let bulkTotal = 0;
  const onData = (chunk: Buffer) => {
    let i = 0;
    while (i < chunk.length) {
      if (bulkLeft > 0) {
        const take = Math.min(bulkLeft, chunk.length - i);
        bulkLeft -= take;
        i += take;
        if (bulkLeft === 0) {
          const ack = Buffer.alloc(CMD_BYTES);
          ack[0] = ACK;
          ack.writeUInt32BE(bulkTotal, 4);
          socket.write(ack);
        }
        continue;
      }
      const take = Math.min(CMD_BYTES - cmdFill, chunk.length - i);
      chunk.copy(cmd, cmdFill, i, i + take);
      cmdFill += take;
      i += take;
      if (cmdFill < CMD_BYTES) break;
      cmdFill = 0;
      const length = cmd.readUInt32BE(4);
      if (cmd[0] === PING) {
        socket.write(Buffer.from(cmd));
      } else if (cmd[0] === BULK && length > 0 && length <= maxBulk) {
        bulkLeft = bulkTotal = length;
      } else {
        socket.destroy();
        return;
      }
    }
  };
  socket.on('data', onData);
  if (leftover.length) onData(leftover);
  socket.resume();
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * Measures latency and bandwidth to a probe server. Rejects with `ConnectError` when the server
 * cannot be reached, `AuthError` on a secret mismatch, and a `TransportError` naming the address on
 * timeout; `signal` aborts with its reason. Always closes its connection.
 */
export async function probeLink(options: ProbeLinkOptions): Promise<LinkProbeResult> {
  const { host, port, signal } = options;
  const pings = options.pings ?? 50;
  const bulkBytes = options.bulkBytes ?? 16 * 1024 * 1024;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const address = `${host}:${port}`;
  if (!Number.isInteger(pings) || pings < 1) throw new TransportError(`probeLink: pings must be >= 1, got ${pings}`);
  if (!Number.isInteger(bulkBytes) || bulkBytes < 1 || bulkBytes > 0xffffffff) {
    throw new TransportError(`probeLink: bulkBytes must be 1..4294967295, got ${bulkBytes}`);
  }
  signal?.throwIfAborted();

  const socket = new net.Socket();
  let timer: NodeJS.Timeout | undefined;
  let onAbort = () => {};
  const stop = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TransportError(`link probe to ${address} timed out after ${timeoutMs} ms`)), timeoutMs);
    onAbort = () => reject(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  stop.catch(() => socket.destroy());

  const run = async (): Promise<LinkProbeResult> => {
    await new Promise<void>((resolve, reject) => {
      socket.once('error', (err) => reject(new ConnectError({ address }, err.message, { cause: err })));
      socket.connect({ host, port, noDelay: true }, () => resolve());
    });
    socket.setNoDelay(true);
    await clientHandshake(socket, {
      secret: secretBytes(options.secret),
      groupId: PROBE_GROUP,
      purpose: Purpose.Probe,
      clientRank: 0,
      serverRank: 0,
      flags: 0,
      timeoutMs,
    });
    const reader = new ExactReader(socket);
    socket.resume();
    const cmd = Buffer.alloc(CMD_BYTES);
    const rtts: number[] = [];
    for (let i = 0; i < pings + 5; i++) {
      cmd[0] = PING;
      cmd.writeUInt32BE(i, 4);
      const t0 = performance.now();
      socket.write(cmd);
      const echo = await reader.read(CMD_BYTES);
      const dt = (performance.now() - t0) * 1000;
      if (echo[0] !== PING || echo.readUInt32BE(4) !== i) throw new TransportError(`probe server ${address} answered garbage`);
      if (i >= 5) rtts.push(dt);
    }
    const rttUs = median(rtts);
    const bulk = async (n: number): Promise<number> => {
      const payload = Buffer.alloc(Math.min(n, 1024 * 1024));
      const head = Buffer.alloc(CMD_BYTES);
      head[0] = BULK;
      head.writeUInt32BE(n, 4);
      const t0 = performance.now();
      socket.write(head);
      for (let sent = 0; sent < n; ) {
        const len = Math.min(payload.length, n - sent);
        if (!socket.write(len === payload.length ? payload : payload.subarray(0, len))) {
          await new Promise((r) => socket.once('drain', r));
        }
        sent += len;
      }
      const ack = await reader.read(CMD_BYTES);
      if (ack[0] !== ACK || ack.readUInt32BE(4) !== n) throw new TransportError(`probe server ${address} answered garbage`);
      return performance.now() - t0;
    };
    await bulk(Math.min(bulkBytes, 1024 * 1024));
    const ms = await bulk(bulkBytes);
    // The ack's return trip is not transfer time; never let the correction dominate.
    const seconds = Math.max(ms - rttUs / 1000, ms / 2) / 1000;
    return { latencyUs: rttUs / 2, rttUs, bandwidthGbps: (bulkBytes * 8) / seconds / 1e9, bulkBytes };
  };

  try {
    return await Promise.race([run(), stop]);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    socket.destroy();
  }
}
