/**
 * The weights data plane's server: peers that proved the pod's weights secret (the transport's HMAC
 * handshake) ask for chunks by file key; any verified chunk of a file this node holds, complete or
 * partly, is served, and a chunk this node is fetching right now is served as soon as it arrives.
 * TCP on every interface, so each cable to a peer is a link of its own; sealed when either end
 * wants it (by default every link but a direct cable).
 */
import net, { type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { acceptAuthenticated, type StreamEncryption } from '@orchard/transport';
import type { ChunkRegistry } from '../chunked/registry.js';
import { encodeAnswer, Kind, RequestDecoder, WEIGHTS_PROTOCOL, type ChunkRequest } from './wire.js';

export interface WeightsServerOptions {
  secret: Uint8Array;
  registry: ChunkRegistry;
  /** @default '0.0.0.0' */
  host?: string;
  /** @default 0 (any free port; peers learn it over libp2p) */
  port?: number;
  /** How long a request for a chunk still being fetched here waits before "still fetching". @default 20000 */
  waitMs?: number;
  /** Requests one connection may have unanswered; more closes it (a misbehaving client). @default 256 */
  maxOutstanding?: number;
  /** Told about every chunk served: the client's address and the bytes. */
  onServed?: (remote: string, bytes: number) => void;
  /** Whether this end wants a connection encrypted (the client may ask too); asked per connection. @default never */
  encryption?: () => StreamEncryption;
}

export interface WeightsServer {
  port: number;
  close(): Promise<void>;
}

export async function startWeightsServer(o: WeightsServerOptions): Promise<WeightsServer> {
  const sockets = new Set<Socket>();
  const waitMs = o.waitMs ?? 20_000;
  const maxOutstanding = o.maxOutstanding ?? 256;
  const server = net.createServer((raw) => {
    sockets.add(raw);
    raw.once('close', () => sockets.delete(raw));
    raw.on('error', () => raw.destroy());
    acceptAuthenticated(raw, { secret: o.secret, protocol: WEIGHTS_PROTOCOL, encryption: o.encryption?.() }).then(
      ({ stream }) => {
        raw.setNoDelay(true);
        serveConnection(stream, `${raw.remoteAddress}:${raw.remotePort}`, o, waitMs, maxOutstanding);
      },
      () => raw.destroy(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 0, o.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Resolves when the stream can take more (or is gone), leaving no listener behind. */
function drained(socket: Duplex): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      socket.off('drain', done);
      socket.off('close', done);
      resolve();
    };
    socket.on('drain', done);
    socket.on('close', done);
  });
}

function serveConnection(socket: Duplex, remote: string, o: WeightsServerOptions, waitMs: number, maxOutstanding: number): void {
  let outstanding = 0;
  // Answers go out one at a time, each whole, waiting for the socket to drain between them.
  let writing: Promise<void> = Promise.resolve();
  const send = (head: Buffer, body: Uint8Array) => {
    writing = writing.then(async () => {
      if (socket.destroyed) return;
      socket.write(head);
      if (!socket.write(body)) await drained(socket);
    });
    return writing;
  };
  const answer = async (r: ChunkRequest): Promise<void> => {
    const missing = (why: string) => {
      const body = Buffer.from(why, 'utf8');
      return send(encodeAnswer({ kind: Kind.Missing, id: r.id, length: body.length }), body);
    };
    const file = await o.registry.lookup(r.key);
    if (!file || file.info.size !== r.fileSize || file.chunkSize !== r.chunkSize || r.chunk >= file.count) return missing('not here');
    if (!file.has(r.chunk)) {
      if (!o.registry.isFetching(r.key, r.chunk)) return missing('not here');
      if (!(await o.registry.whenReady(r.key, r.chunk, waitMs))) return missing(o.registry.isFetching(r.key, r.chunk) ? 'still fetching' : 'not here');
    }
    const bytes = await file.readChunk(r.chunk).catch(() => undefined);
    if (!bytes) return missing('not here');
    await send(encodeAnswer({ kind: Kind.Chunk, id: r.id, length: bytes.byteLength, digest: file.digest(r.chunk) }), bytes);
    o.onServed?.(remote, bytes.byteLength);
  };
  const decoder = new RequestDecoder((r) => {
    if (++outstanding > maxOutstanding) return socket.destroy();
    answer(r)
      .catch(() => socket.destroy())
      .finally(() => outstanding--);
  });
  const onData = (d: Buffer) => {
    try {
      decoder.push(d);
    } catch {
      socket.destroy();
    }
  };
  socket.on('data', onData);
  socket.on('error', () => socket.destroy());
  socket.resume();
}
