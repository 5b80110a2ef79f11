/**
 * Unauthenticated clients, wrong secrets and garbage frames against a real listener.
 */
import net, { type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { AuthError, PeerClosedError } from '../src/errors.js';
import { createTcpGroup } from '../src/tcp/group.js';
import { clientHandshake } from '../src/tcp/handshake-io.js';
import { listenTcp } from '../src/tcp/listener.js';
import { createLocalTcpGroups } from '../src/testing/local-tcp.js';
import { FRAME_HEADER_BYTES, KIND_DATA, encodeHeader } from '../src/wire/frame.js';
import { CHALLENGE_BYTES, Purpose, encodeHello, newNonce } from '../src/wire/handshake.js';

function connect(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => resolve(s));
    s.once('error', reject);
  });
}

/** Resolves with everything the server sent once it closes the connection (or rejects after ms). */
function untilClosed(s: Socket, ms = 5000): Promise<Buffer> {
  const got: Buffer[] = [];
  s.on('data', (d) => got.push(d));
  s.on('error', () => {});
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('server did not drop the connection')), ms);
    s.once('close', () => {
      clearTimeout(t);
      resolve(Buffer.concat(got));
    });
  });
}

/** A 2-rank group where rank 1 is played by the test through a raw socket. */
async function groupWithFakeRank1() {
  const listener = await listenTcp();
  const peers = [{ addresses: [listener.address] }, { addresses: [{ host: '127.0.0.1', port: 1 }] }];
  const groupP = createTcpGroup({ rank: 0, peers, listener, groupId: 'g', secret: 'right', timeoutMs: 3000, connectTimeoutMs: 1500 });
  return { listener, groupP, port: listener.address.port };
}

describe('data-plane authentication', () => {
  it('drops a random client that sends garbage instead of a hello, and still forms the group', async () => {
    const listener = await listenTcp();
    const peers = [{ addresses: [listener.address] }, { addresses: [{ host: '127.0.0.1', port: 1 }] }];
    const stranger = await connect(listener.address.port);
    const closed = untilClosed(stranger);
    stranger.write(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(4)));
    const groupP = createTcpGroup({ rank: 0, peers, listener, groupId: 'g', secret: 's', connectTimeoutMs: 1500 });
    expect((await closed).length).toBe(0); // not one byte of a challenge for a stranger
    // A real rank 1 can still join.
    const s1 = await connect(listener.address.port);
    await clientHandshake(s1, { secret: Buffer.from('s'), groupId: 'g', purpose: Purpose.Data, clientRank: 1, serverRank: 0, flags: 0, timeoutMs: 3000 });
    const g = await groupP;
    s1.destroy();
    await g.close();
  });

  it('a frame sent in place of the handshake is never delivered', async () => {
    const { groupP, port } = await groupWithFakeRank1();
    const s = await connect(port);
    const failed = expect(groupP).rejects.toThrow(/mesh incomplete.*rank 1/);
    const closed = untilClosed(s, 1000);
    const frame = new Uint8Array(FRAME_HEADER_BYTES + 8);
    encodeHeader(frame, 0, KIND_DATA, 0, 0, 8);
    s.write(frame);
    expect((await closed).length).toBe(0);
    await failed;
  });

  it('refuses a client with the wrong secret: no OK, connection dropped', async () => {
    const { groupP, port } = await groupWithFakeRank1();
    const failed = expect(groupP).rejects.toThrow(/mesh incomplete/);
    const s = await connect(port);
    await expect(
      clientHandshake(s, { secret: Buffer.from('wrong'), groupId: 'g', purpose: Purpose.Data, clientRank: 1, serverRank: 0, flags: 0, timeoutMs: 3000 }),
    ).rejects.toBeInstanceOf(AuthError);
    // A client that ignores the server's proof and answers with made-up bytes is dropped too.
    const s2 = await connect(port);
    const closed = untilClosed(s2);
    s2.write(encodeHello({ flags: 0, purpose: Purpose.Data, clientRank: 1, serverRank: 0, clientNonce: newNonce(), groupId: 'g' }));
    await new Promise((r) => setTimeout(r, 100));
    s2.write(Buffer.alloc(32, 7));
    const sent = await closed;
    expect(sent.length).toBe(CHALLENGE_BYTES); // the challenge, and no OK after it
    await failed;
  });

  it('refuses the wrong group id, a rank that may not dial, and the wrong purpose', async () => {
    const { groupP, port } = await groupWithFakeRank1();
    const failed = expect(groupP).rejects.toThrow(/mesh incomplete/);
    const attempts = [
      { groupId: 'other', clientRank: 1, serverRank: 0, purpose: Purpose.Data },
      { groupId: 'g', clientRank: 0, serverRank: 0, purpose: Purpose.Data },
      { groupId: 'g', clientRank: 1, serverRank: 3, purpose: Purpose.Data },
      { groupId: 'g', clientRank: 1, serverRank: 0, purpose: Purpose.Probe },
    ];
    for (const a of attempts) {
      const s = await connect(port);
      await expect(clientHandshake(s, { secret: Buffer.from('right'), flags: 0, timeoutMs: 3000, ...a }), JSON.stringify(a)).rejects.toBeInstanceOf(AuthError);
    }
    await failed;
  });
});

describe('garbage on an authenticated connection', () => {
  it('drops the connection, rejects pending receives naming the peer, and leaves the process working', async () => {
    const { groupP, port } = await groupWithFakeRank1();
    const s = await connect(port);
    await clientHandshake(s, { secret: Buffer.from('right'), groupId: 'g', purpose: Purpose.Data, clientRank: 1, serverRank: 0, flags: 0, timeoutMs: 3000 });
    const g = await groupP;
    const closed = untilClosed(s);
    const pending = g.recv(1, new Uint8Array(16)).catch((e) => e);
    s.write(Buffer.from('\x00\x01this is not a frame header at all, just noise'));
    const err = await pending;
    expect(err).toBeInstanceOf(PeerClosedError);
    expect(err.message).toMatch(/rank 1 \(127\.0\.0\.1:\d+\).*protocol error.*magic/);
    await closed;
    await g.close();
    // The process is fine: a new group works.
    const gs = await createLocalTcpGroups(2);
    const bufs = gs.map((x) => Float32Array.of(x.rank + 1));
    await Promise.all(gs.map((x, r) => x.allReduce(bufs[r])));
    expect(bufs.map((b) => b[0])).toEqual([3, 3]);
    await Promise.all(gs.map((x) => x.close()));
  });

  it('drops a connection whose frame sequence jumps (replayed or injected frames)', async () => {
    const { groupP, port } = await groupWithFakeRank1();
    const s = await connect(port);
    await clientHandshake(s, { secret: Buffer.from('right'), groupId: 'g', purpose: Purpose.Data, clientRank: 1, serverRank: 0, flags: 0, timeoutMs: 3000 });
    const g = await groupP;
    const frame = new Uint8Array(FRAME_HEADER_BYTES + 4);
    encodeHeader(frame, 0, KIND_DATA, 0, 0, 4);
    const got = new Uint8Array(4);
    const first = g.recv(1, got);
    s.write(frame);
    await first;
    const second = g.recv(1, got).catch((e) => e);
    s.write(frame); // same sequence number again
    expect((await second).message).toMatch(/sequence 0, expected 1/);
    await g.close();
    s.destroy();
  });
});
