/**
 * Encrypted data-plane connections: negotiation (either end asking is enough, the dialer's cipher,
 * no silent downgrade), per-connection policies, large frames sealed and opened in pieces, order
 * of queued frames, and tampering caught before a receive completes.
 */
import net, { type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createTcpGroup, type EncryptionPolicy, type LinkEnds, type TcpGroup, type TcpGroupOptions } from '../src/tcp/group.js';
import { ExactReader, clientHandshake } from '../src/tcp/handshake-io.js';
import { listenTcp } from '../src/tcp/listener.js';
import { AEAD_PIECE_BYTES, FrameSealer, fastestCipher } from '../src/wire/aead.js';
import { FRAME_HEADER_BYTES, KIND_DATA, encodeHeader } from '../src/wire/frame.js';
import {
  FLAG_ENCRYPT,
  HELLO_FIXED_BYTES,
  Purpose,
  cipherFlag,
  encodeChallenge,
  newNonce,
  parseHelloFixed,
  serverProof,
} from '../src/wire/handshake.js';

type Encrypt = TcpGroupOptions['encrypt'];

/** `encrypt[r]` for rank r; every rank on loopback. */
async function groups(encrypt: Encrypt[]): Promise<TcpGroup[]> {
  const listeners = await Promise.all(encrypt.map(() => listenTcp()));
  const peers = listeners.map((l) => ({ addresses: [l.address] }));
  return Promise.all(
    listeners.map((listener, rank) => createTcpGroup({ rank, peers, listener, groupId: 'enc', secret: 'enc-secret', encrypt: encrypt[rank], timeoutMs: 20_000 })),
  );
}

const closeAll = (gs: TcpGroup[]) => Promise.all(gs.map((g) => g.close()));

function pattern(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (i * 31 + seed * 7 + (i >> 11)) & 255;
  return out;
}

function connect(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => resolve(s));
    s.once('error', reject);
  });
}

describe('encryption negotiation', () => {
  it('either end asking is enough, with the cipher the dialing end proposes', async () => {
    // Rank 1 dials rank 0. Only the acceptor asks: the dialer's default proposal (AES-256-GCM) is used.
    let gs = await groups(['chacha20-poly1305', false]);
    expect(gs.map((g) => g.encryption)).toEqual([[null, 'aes-256-gcm'], ['aes-256-gcm', null]]);
    await closeAll(gs);
    // Only the dialer asks.
    gs = await groups([false, 'chacha20-poly1305']);
    expect(gs.map((g) => g.encryption)).toEqual([[null, 'chacha20-poly1305'], ['chacha20-poly1305', null]]);
    await closeAll(gs);
    // Neither asks: plain.
    gs = await groups([false, false]);
    expect(gs.map((g) => g.encryption)).toEqual([[null, null], [null, null]]);
    await closeAll(gs);
  });

  it('a policy decides per connection from its two ends', async () => {
    const seen: (LinkEnds & { rank: number })[] = [];
    // Every rank wants its links to rank 2 encrypted (as if rank 2 were across a routed network).
    const policy = (rank: number): EncryptionPolicy => ({
      cipher: 'chacha20-poly1305',
      wants: (l) => {
        seen.push({ ...l, rank });
        return rank === 2 || l.peer === 2;
      },
    });
    const gs = await groups([policy(0), policy(1), policy(2)]);
    expect(gs.map((g) => g.encryption)).toEqual([
      [null, null, 'chacha20-poly1305'],
      [null, null, 'chacha20-poly1305'],
      ['chacha20-poly1305', 'chacha20-poly1305', null],
    ]);
    // Each dialer decides for its connections (1->0, 2->0, 2->1); an acceptor is asked only when the
    // dialer did not already ask (0 about 1).
    expect(seen.map((l) => `${l.rank}->${l.peer}`).sort()).toEqual(['0->1', '1->0', '2->0', '2->1']);
    for (const l of seen) expect([l.localAddress, l.remoteAddress]).toEqual(['127.0.0.1', '127.0.0.1']);
    // Mixed links carry the same collectives.
    const bufs = gs.map((g) => Float32Array.from({ length: AEAD_PIECE_BYTES + 17 }, (_, i) => (i % 97) * (g.rank + 1)));
    await Promise.all(gs.map((g, r) => g.allReduce(bufs[r])));
    for (const b of bufs) for (const i of [0, 1, 96, 97, b.length - 1]) expect(b[i]).toBe((i % 97) * 6);
    await closeAll(gs);
  });

  it("a policy's default cipher is the one measured fastest on this machine", async () => {
    const gs = await groups([false, { wants: () => true }]);
    expect(gs[0].encryption[1]).toBe(fastestCipher());
    await closeAll(gs);
  });

  it('a client that asks for encryption refuses a server answering plain', async () => {
    const secret = Buffer.from('s');
    const server = net.createServer(async (sock) => {
      // A key holder that ignores the request: proves itself over a "plain" answer.
      const reader = new ExactReader(sock);
      const fixed = await reader.read(HELLO_FIXED_BYTES);
      const hello = Buffer.concat([fixed, await reader.read(parseHelloFixed(fixed).idLength)]);
      const nonce = newNonce();
      sock.write(encodeChallenge(0, nonce, serverProof(secret, hello, 0, nonce)));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const s = await connect((server.address() as net.AddressInfo).port);
    const flags = FLAG_ENCRYPT | cipherFlag('aes-256-gcm');
    await expect(clientHandshake(s, { secret, groupId: 'g', purpose: Purpose.Data, clientRank: 1, serverRank: 0, flags, timeoutMs: 3000 })).rejects.toThrow(
      /server would not encrypt the connection/,
    );
    s.destroy();
    server.close();
  });
});

describe('encrypted frames', () => {
  for (const cipher of ['aes-256-gcm', 'chacha20-poly1305'] as const) {
    it(`${cipher}: frames sent back to back (large ones in pieces, small ones between) arrive whole and in order`, async () => {
      const gs = await groups([cipher, cipher]);
      const sizes = [2 * AEAD_PIECE_BYTES + 3, 10, 0, 3 * 1024 * 1024 + 1, 4096, 64 * 1024, 1];
      const sent = sizes.map((n, i) => pattern(n, i));
      // Nothing awaited between sends: the later small frames must not overtake the large ones.
      const sends = sent.map((b) => gs[0].send(1, b));
      const got = sizes.map((n) => new Uint8Array(n));
      for (const g of got) await gs[1].recv(0, g);
      await Promise.all(sends);
      got.forEach((g, i) => expect(Buffer.from(g).equals(Buffer.from(sent[i])), `frame ${i} (${sizes[i]} bytes)`).toBe(true));
      // And the other way, with a receive posted after the frame started arriving.
      const big = pattern(2 * 1024 * 1024, 9);
      const back = gs[1].send(0, big);
      await new Promise((r) => setTimeout(r, 20));
      const into = new Uint8Array(big.length);
      await gs[0].recv(1, into);
      await back;
      expect(Buffer.from(into).equals(Buffer.from(big))).toBe(true);
      await closeAll(gs);
    });
  }

  it('a tampered ciphertext byte fails the receive (never resolves it) and the connection', async () => {
    const listener = await listenTcp();
    const peers = [{ addresses: [listener.address] }, { addresses: [{ host: '127.0.0.1', port: 1 }] }];
    const groupP = createTcpGroup({ rank: 0, peers, listener, groupId: 'g', secret: 'right', encrypt: 'aes-256-gcm', timeoutMs: 5000 });
    const s = await connect(listener.address.port);
    const hs = await clientHandshake(s, {
      secret: Buffer.from('right'),
      groupId: 'g',
      purpose: Purpose.Data,
      clientRank: 1,
      serverRank: 0,
      flags: FLAG_ENCRYPT | cipherFlag('aes-256-gcm'),
      timeoutMs: 3000,
    });
    const g = await groupP;
    expect(hs.encryption?.cipher).toBe('aes-256-gcm');
    const n = 3 * AEAD_PIECE_BYTES;
    const header = new Uint8Array(FRAME_HEADER_BYTES);
    encodeHeader(header, 0, KIND_DATA, 0, 0, n);
    const [ct, tag] = new FrameSealer('aes-256-gcm', hs.encryption!.keys.clientToServer).seal(0, header, pattern(n, 1));
    ct[n - 100] ^= 1;
    const pending = g.recv(1, new Uint8Array(n)).then(
      () => 'resolved',
      (e: Error) => e.message,
    );
    s.write(Buffer.concat([header, ct, tag]));
    expect(await pending).toMatch(/rank 1 .*failed authentication/);
    s.destroy();
    await g.close();
  });

  it('refuses a client whose hello is not version 2', async () => {
    const listener = await listenTcp();
    const peers = [{ addresses: [listener.address] }, { addresses: [{ host: '127.0.0.1', port: 1 }] }];
    const groupP = createTcpGroup({ rank: 0, peers, listener, groupId: 'g', secret: 'x', connectTimeoutMs: 800 });
    const failed = expect(groupP).rejects.toThrow(/mesh incomplete/);
    const s = await connect(listener.address.port);
    const closed = new Promise<number>((resolve) => {
      let n = 0;
      s.on('data', (d) => (n += d.length));
      s.on('close', () => resolve(n));
    });
    s.write(Buffer.from('ORC1'));
    expect(await closed).toBe(0);
    await failed;
  });
});
