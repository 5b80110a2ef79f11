/**
 * The authenticated raw socket other protocols use: the right secret and protocol get a plain byte
 * stream; a wrong secret, another protocol's name or a data-plane client is refused on both sides.
 */
import net, { type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AuthError } from '../src/errors.js';
import { acceptAuthenticated, connectAuthenticated } from '../src/tcp/authenticated-socket.js';
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
async function echoServer(protocol: string): Promise<{ port: number; outcomes: Array<Promise<unknown>> }> {
  const outcomes: Array<Promise<unknown>> = [];
  server = net.createServer((socket: Socket) => {
    socket.on('error', () => {});
    open.add(socket);
    const done = acceptAuthenticated(socket, { secret: SECRET, protocol, timeoutMs: 2000 }).then(({ socket: s, leftover }) => {
      if (leftover.length) s.write(leftover);
      s.on('data', (d) => s.write(d));
      s.resume();
      return 'ok';
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
    const { socket } = await connectAuthenticated({ host: '127.0.0.1', port, secret: SECRET, protocol: 'orchard-weights/1' });
    const echoed = new Promise<Buffer>((r) => socket.once('data', r));
    socket.resume();
    socket.write('hello weights');
    expect((await echoed).toString()).toBe('hello weights');
    socket.destroy();
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
