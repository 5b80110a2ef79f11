/**
 * The authenticated byte stream other protocols use: the right secret and protocol get a byte
 * stream, sealed when either end asks; a wrong secret, another protocol's name or a data-plane
 * client is refused on both sides; a sealed stream's bytes are unreadable on the wire and a
 * tampered record fails the stream.
 */
import net, { type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AuthError } from '../src/errors.js';
import { randomBytes } from 'node:crypto';
import { acceptAuthenticated, connectAuthenticated, type StreamEncryption } from '../src/tcp/authenticated-socket.js';
import { RECORD_MAX_BYTES } from '../src/tcp/sealed-stream.js';
import { clientHandshake } from '../src/tcp/handshake-io.js';
import { Purpose } from '../src/wire/handshake.js';

const SECRET = new Uint8Array(32).fill(7);
let server: Server | undefined;
const open = new Set<Socket>();
afterEach(async () => {
  for (const s of open) s.destroy();
  open.clear();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

/** A server accepting `protocol` under SECRET; each accepted socket echoes its bytes back. */
async function echoServer(protocol: string, encryption?: StreamEncryption): Promise<{ port: number; outcomes: Array<Promise<unknown>> }> {
  const outcomes: Array<Promise<unknown>> = [];
  server = net.createServer((socket: Socket) => {
    socket.on('error', () => {});
    open.add(socket);
    const done = acceptAuthenticated(socket, { secret: SECRET, protocol, timeoutMs: 2000, encryption }).then(({ stream, cipher }) => {
      stream.on('error', () => {});
      stream.on('data', (d) => stream.write(d));
      stream.resume();
      return cipher ?? 'plain';
    });
    done.catch(() => {});
    outcomes.push(done);
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return { port: (server!.address() as net.AddressInfo).port, outcomes };
}

describe('authenticated socket', () => {
  it('carries the caller bytes after a handshake with the right secret and protocol', async () => {
    const { port } = await echoServer('orchard-weights/1');
    const { socket, stream, cipher } = await connectAuthenticated({ host: '127.0.0.1', port, secret: SECRET, protocol: 'orchard-weights/1' });
    expect(cipher).toBeNull();
    expect(stream).toBe(socket);
    const echoed = new Promise<Buffer>((r) => socket.once('data', r));
    socket.resume();
    socket.write('hello weights');
    expect((await echoed).toString()).toBe('hello weights');
    socket.destroy();
  });

  /** Sends `bytes` through an echo and reads them back whole. */
  async function roundTrip(stream: import('node:stream').Duplex, bytes: Buffer): Promise<Buffer> {
    const parts: Buffer[] = [];
    let have = 0;
    const back = new Promise<Buffer>((resolve, reject) => {
      stream.on('data', (d: Buffer) => {
        parts.push(Buffer.from(d));
        if ((have += d.length) >= bytes.length) resolve(Buffer.concat(parts));
      });
      stream.once('error', reject);
    });
    stream.resume();
    // Odd write sizes: records split over reads and reads holding several records.
    for (let at = 0, n = 1; at < bytes.length; at += n, n = (n * 7 + 3) % 900_001) stream.write(bytes.subarray(at, at + n));
    return back;
  }

  for (const [who, client, srv] of [
    ['the client', { wants: () => true, cipher: 'chacha20-poly1305' }, undefined],
    ['the server', undefined, { wants: () => true }],
  ] as Array<[string, StreamEncryption | undefined, StreamEncryption | undefined]>) {
    it(`seals the stream when ${who} asks: bytes round-trip whole, and none of them is on the wire in clear`, async () => {
      const { port, outcomes } = await echoServer('orchard-weights/1', srv);
      // A relay between client and server records what travels.
      const wire: Buffer[] = [];
      const relay = net.createServer((inbound) => {
        open.add(inbound);
        const outbound = net.connect(port, '127.0.0.1');
        open.add(outbound);
        inbound.on('data', (d) => (wire.push(Buffer.from(d)), outbound.write(d)));
        outbound.on('data', (d) => inbound.write(d));
        inbound.on('error', () => outbound.destroy());
        outbound.on('error', () => inbound.destroy());
      });
      await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
      try {
        const { stream, cipher } = await connectAuthenticated({ host: '127.0.0.1', port: (relay.address() as net.AddressInfo).port, secret: SECRET, protocol: 'orchard-weights/1', encryption: client });
        expect(client?.cipher ? [client.cipher] : ['aes-256-gcm', 'chacha20-poly1305']).toContain(cipher);
        const marker = Buffer.from('THE-PLAINTEXT-MARKER-'.repeat(50));
        const bytes = Buffer.concat([randomBytes(RECORD_MAX_BYTES * 3 + 12345), marker]);
        expect((await roundTrip(stream, bytes)).equals(bytes)).toBe(true);
        expect(await outcomes[0]).toBe(cipher);
        expect(Buffer.concat(wire).includes(Buffer.from('THE-PLAINTEXT-MARKER-'))).toBe(false);
        stream.destroy();
      } finally {
        for (const s of open) s.destroy();
        await new Promise<void>((r) => relay.close(() => r()));
      }
    });
  }

  it('a tampered record fails the sealed stream with a named error instead of giving its bytes', async () => {
    const { port } = await echoServer('orchard-weights/1', { wants: () => true });
    let flip = false;
    const relay = net.createServer((inbound) => {
      open.add(inbound);
      const outbound = net.connect(port, '127.0.0.1');
      open.add(outbound);
      inbound.on('data', (d) => outbound.write(d));
      // Once armed, one bit of what the server sends back is flipped.
      outbound.on('data', (d) => {
        if (flip) {
          d = Buffer.from(d);
          d[d.length - 1] ^= 1;
          flip = false;
        }
        inbound.write(d);
      });
      inbound.on('error', () => outbound.destroy());
      outbound.on('error', () => inbound.destroy());
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    try {
      const { stream } = await connectAuthenticated({ host: '127.0.0.1', port: (relay.address() as net.AddressInfo).port, secret: SECRET, protocol: 'orchard-weights/1' });
      const got: Buffer[] = [];
      stream.on('data', (d: Buffer) => got.push(d));
      const failed = new Promise<Error>((r) => stream.once('error', r));
      stream.resume();
      flip = true;
      stream.write('sixteen bytes!!!');
      expect((await failed).message).toMatch(/failed authentication/);
      expect(got).toEqual([]);
    } finally {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => relay.close(() => r()));
    }
  });

  it('refuses a wrong secret, another protocol and a data-plane client', async () => {
    const { port, outcomes } = await echoServer('orchard-weights/1');
    await expect(connectAuthenticated({ host: '127.0.0.1', port, secret: new Uint8Array(32), protocol: 'orchard-weights/1' })).rejects.toThrow(AuthError);
    await expect(connectAuthenticated({ host: '127.0.0.1', port, secret: SECRET, protocol: 'something-else' })).rejects.toThrow(AuthError);
    const raw = new net.Socket();
    await new Promise<void>((r) => raw.connect(port, '127.0.0.1', r));
    await expect(
      clientHandshake(raw, { secret: SECRET, groupId: 'orchard-weights/1', purpose: Purpose.Data, clientRank: 0, serverRank: 0, flags: 0, timeoutMs: 2000 }),
    ).rejects.toThrow(AuthError);
    const results = await Promise.allSettled(outcomes);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
  });

  it('names the address when nothing listens', async () => {
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    await expect(connectAuthenticated({ host: '127.0.0.1', port, secret: SECRET, protocol: 'p' })).rejects.toThrow(`cannot connect to 127.0.0.1:${port}`);
  });
});
