/**
 * The weights data plane on loopback: a server over a registry of chunked files, links that ask it
 * for chunks (pipelined, answered out of order), a chunk still in flight answered once it arrives,
 * wrong secrets and garbage refused, the codec's limits.
 */
import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChunkedFile, chunkDigest, contentKey } from '../../src/store/chunked/chunk-file.js';
import { ChunkRegistry } from '../../src/store/chunked/registry.js';
import { startWeightsServer, type WeightsServer } from '../../src/store/peers/weights-server.js';
import { ChunkMissingError, LinkError, WeightsLink } from '../../src/store/peers/weights-link.js';
import { connectLinks } from '../../src/store/peers/pod-access.js';
import { DEFAULT_SECURITY, encryptionPolicy } from '../../src/runner/link-security.js';
import { AnswerDecoder, encodeAnswer, encodeRequest, Kind, RequestDecoder, WireError } from '../../src/store/peers/wire.js';

const SECRET = randomBytes(32);
let work: string;
let registry: ChunkRegistry;
let server: WeightsServer;
let file: ChunkedFile;
const bytes = randomBytes(3 * 1024 * 1024 + 123);
const sha = createHash('sha256').update(bytes).digest('hex');
const key = contentKey({ sha256: sha })!;

async function put(f: ChunkedFile, i: number) {
  const [s, e] = f.span(i);
  await f.writeChunk(i, bytes.subarray(s, e), chunkDigest(bytes.subarray(s, e)));
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'orchard-wire-'));
  registry = new ChunkRegistry();
  file = await registry.open(join(work, 'm', 'model.safetensors'), { key, size: bytes.length, sha256: sha, label: 'org/m: model.safetensors' });
  for (let i = 0; i < file.count; i += 2) await put(file, i);
  server = await startWeightsServer({ secret: SECRET, registry, host: '127.0.0.1', waitMs: 2000 });
});
afterAll(async () => {
  await server.close();
  await registry.closeAll();
  rmSync(work, { recursive: true, force: true });
});

const req = (chunk: number) => ({ key, chunk, chunkSize: file.chunkSize, fileSize: bytes.length });

describe('weights data plane', () => {
  it('serves every verified chunk of a partly held file, many requests in flight', async () => {
    const link = await WeightsLink.connect({ host: '127.0.0.1', port: server.port, secret: SECRET });
    const want = Array.from({ length: file.count }, (_, i) => i).filter((i) => i % 2 === 0);
    const answers = await Promise.all(want.map((i) => link.get(req(i))));
    answers.forEach((a, k) => {
      const [s, e] = file.span(want[k]);
      expect(a.bytes.equals(bytes.subarray(s, e))).toBe(true);
      expect(a.digest.equals(chunkDigest(bytes.subarray(s, e)))).toBe(true);
    });
    const err = await link.get(req(1)).catch((e) => e);
    expect(err).toBeInstanceOf(ChunkMissingError);
    expect(err.reason).toBe('not here');
    // A request that means other bytes (another chunk size) is not served either.
    await expect(link.get({ ...req(0), chunkSize: 1024 })).rejects.toThrow(ChunkMissingError);
    expect(link.closed).toBe(false);
    link.close();
  });

  it('links are sealed when either end wants it, every chunk arriving whole; the default rule keeps a loopback link plain', async () => {
    const sealedServer = await startWeightsServer({ secret: SECRET, registry, host: '127.0.0.1', encryption: () => ({ wants: () => true }) });
    try {
      const want = Array.from({ length: file.count }, (_, i) => i).filter((i) => i % 2 === 0);
      for (const [port, encryption] of [
        [server.port, { wants: () => true, cipher: 'chacha20-poly1305' as const }],
        [sealedServer.port, undefined],
      ] as const) {
        const link = await WeightsLink.connect({ host: '127.0.0.1', port, secret: SECRET, encryption });
        expect(link.cipher).toBe(encryption?.cipher ?? link.cipher);
        expect(link.cipher).not.toBeNull();
        const answers = await Promise.all(want.map((i) => link.get(req(i))));
        answers.forEach((a, k) => {
          const [s, e] = file.span(want[k]);
          expect(a.bytes.equals(bytes.subarray(s, e))).toBe(true);
        });
        link.close();
      }
      // The daemon's rule (runner/link-security.ts): a link that never leaves the machine stays plain.
      const plain = await WeightsLink.connect({ host: '127.0.0.1', port: server.port, secret: SECRET, encryption: encryptionPolicy(DEFAULT_SECURITY) });
      expect(plain.cipher).toBeNull();
      plain.close();
    } finally {
      await sealedServer.close();
    }
  });

  it('a chunk being fetched here is served once it arrives, without holding up the others', async () => {
    const link = await WeightsLink.connect({ host: '127.0.0.1', port: server.port, secret: SECRET });
    registry.fetching(key, [1]);
    const late = link.get(req(1));
    const early = await link.get(req(0));
    expect(early.bytes.byteLength).toBe(file.chunkSize);
    await new Promise((r) => setTimeout(r, 100));
    await put(file, 1);
    registry.settle(key, 1, true);
    const got = await late;
    expect(got.bytes.equals(bytes.subarray(file.chunkSize, 2 * file.chunkSize))).toBe(true);
    // One given up by this node is answered "not here" at once.
    registry.fetching(key, [3]);
    const gone = link.get(req(3));
    registry.settle(key, 3, false);
    await expect(gone).rejects.toThrow(/not here/);
    link.close();
  });

  it('refuses a wrong secret; garbage after the handshake closes only that link', async () => {
    await expect(WeightsLink.connect({ host: '127.0.0.1', port: server.port, secret: randomBytes(32) })).rejects.toThrow(/prove/);
    const ok = await WeightsLink.connect({ host: '127.0.0.1', port: server.port, secret: SECRET });
    const raw = new net.Socket();
    await new Promise<void>((r) => raw.connect(server.port, '127.0.0.1', r));
    raw.write(Buffer.alloc(200, 0xee));
    await new Promise((r) => raw.once('close', r));
    expect((await ok.get(req(0))).bytes.byteLength).toBe(file.chunkSize);
    ok.close();
    await expect(ok.get(req(0))).rejects.toThrow(LinkError);
  });

  it('a server that goes away fails the outstanding requests with LinkError', async () => {
    const reg = new ChunkRegistry();
    const f = await reg.open(join(work, 'gone', 'model.safetensors'), { key, size: bytes.length, label: 'x' });
    reg.fetching(key, [0]);
    const s = await startWeightsServer({ secret: SECRET, registry: reg, host: '127.0.0.1', waitMs: 10_000 });
    const link = await WeightsLink.connect({ host: '127.0.0.1', port: s.port, secret: SECRET });
    const pending = link.get({ key, chunk: 0, chunkSize: f.chunkSize, fileSize: bytes.length });
    await new Promise((r) => setTimeout(r, 50));
    await s.close();
    await expect(pending).rejects.toThrow(LinkError);
    await reg.closeAll();
  });
});

describe('links to a peer', () => {
  it('one link per path: addresses reached from the same local address are one cable; loopback only when nothing else answers', async () => {
    const s = await startWeightsServer({ secret: SECRET, registry, host: '0.0.0.0' });
    try {
      const lan = Object.values(os.networkInterfaces()).flat().find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
      const signal = new AbortController().signal;
      // 127.0.0.1 and 127.0.0.2 both leave from 127.0.0.1: the same path.
      const loop = await connectLinks([{ host: '127.0.0.1', port: s.port }, { host: '127.0.0.2', port: s.port }], SECRET, signal);
      expect(loop).toHaveLength(1);
      loop.forEach((l) => l.close());
      if (lan) {
        const links = await connectLinks([{ host: lan, port: s.port }, { host: '127.0.0.1', port: s.port }], SECRET, signal);
        expect(links.map((l) => l.address)).toEqual([`${lan}:${s.port}`]);
        expect((await links[0].get(req(0))).bytes.byteLength).toBe(file.chunkSize);
        links.forEach((l) => l.close());
      }
      // A peer whose secret does not match gives no link at all.
      expect(await connectLinks([{ host: '127.0.0.1', port: s.port }], randomBytes(32), signal)).toEqual([]);
    } finally {
      await s.close();
    }
  });
});

describe('weights wire codec', () => {
  it('round-trips requests and answers split at any byte', () => {
    const got: unknown[] = [];
    const d = new RequestDecoder((r) => got.push(r));
    const r1 = encodeRequest({ id: 7, key, chunk: 3, chunkSize: 65536, fileSize: 2 ** 40 });
    const r2 = encodeRequest({ id: 8, key: 'git:abc', chunk: 0, chunkSize: 65536, fileSize: 10 });
    const all = Buffer.concat([r1, r2]);
    for (let i = 0; i < all.length; i += 5) d.push(all.subarray(i, i + 5));
    expect(got).toEqual([
      { id: 7, key, chunk: 3, chunkSize: 65536, fileSize: 2 ** 40 },
      { id: 8, key: 'git:abc', chunk: 0, chunkSize: 65536, fileSize: 10 },
    ]);
    const answers: Array<[number, number, string]> = [];
    const a = new AnswerDecoder((h, body) => answers.push([h.id, h.kind, body.toString()]));
    const stream = Buffer.concat([encodeAnswer({ kind: Kind.Missing, id: 1, length: 0 }), encodeAnswer({ kind: Kind.Chunk, id: 2, length: 5 }), Buffer.from('hello')]);
    for (let i = 0; i < stream.length; i += 7) a.push(stream.subarray(i, i + 7));
    expect(answers).toEqual([
      [1, Kind.Missing, ''],
      [2, Kind.Chunk, 'hello'],
    ]);
  });

  it('rejects foreign bytes and oversized bodies', () => {
    expect(() => new RequestDecoder(() => {}).push(Buffer.alloc(30, 1))).toThrow(WireError);
    const big = encodeAnswer({ kind: Kind.Chunk, id: 1, length: 0 });
    big.writeUInt32BE(64 * 1024 * 1024, 8);
    expect(() => new AnswerDecoder(() => {}).push(big)).toThrow(/too large/);
    expect(() => encodeRequest({ id: 1, key: 'k'.repeat(300), chunk: 0, chunkSize: 1, fileSize: 1 })).toThrow(/at most 255/);
  });
});
