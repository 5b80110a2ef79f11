/**
 * `/orchard/chunks/1`: peers fetch model bytes from each other (content-addressed 4 MiB chunks of
 * complete store files, verified by their CID on arrival) so a pod downloads from the hub once.
 * Wire: one JSON line request {op: 'manifest', sha256} | {op: 'chunk', cid} | {op: 'models'};
 * answer: one JSON line ({ok: true, ...} or {ok: false, error}), for a chunk followed by its bytes.
 */
import type { Stream } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import { z } from 'zod';
import type { OrchardNode } from '../../node/create-node.js';
import type { ChunkSource, FileManifest } from '../chunks.js';
import type { ModelStore } from '../store.js';

export const CHUNKS_PROTOCOL = '/orchard/chunks/1';
const TIMEOUT_MS = 30_000;
const MAX_CHUNK = 16 * 1024 * 1024;

const requestSchema = z.discriminatedUnion('op', [
  z.object({ op: z.literal('manifest'), sha256: z.string().regex(/^[0-9a-f]{64}$/) }),
  z.object({ op: z.literal('chunk'), cid: z.string().min(8).max(128) }),
  z.object({ op: z.literal('models') }),
]);

const enc = new TextEncoder();

/** Reads a JSON line, then (optionally) exactly `bodyBytes(header)` more bytes. */
async function readAnswer(stream: Stream, bodyBytes: (header: any) => number): Promise<{ header: any; body: Uint8Array | null }> {
  let buf = new Uint8Array(0);
  let header: any = null;
  let want = -1;
  for await (const piece of stream) {
    const chunk = piece instanceof Uint8Array ? piece : piece.subarray();
    const next = new Uint8Array(buf.length + chunk.length);
    next.set(buf);
    next.set(chunk, buf.length);
    buf = next;
    if (header === null) {
      const nl = buf.indexOf(10);
      if (nl < 0) {
        if (buf.length > 1 << 20) throw new Error('answer header too long');
        continue;
      }
      header = JSON.parse(new TextDecoder().decode(buf.subarray(0, nl)));
      buf = buf.subarray(nl + 1);
      want = header.ok ? bodyBytes(header) : 0;
      if (want > MAX_CHUNK) throw new Error(`chunk of ${want} bytes is too large`);
    }
    if (header !== null && buf.length >= want) return { header, body: want > 0 ? buf.subarray(0, want) : null };
  }
  if (header !== null && want === 0) return { header, body: null };
  throw new Error('the peer closed the stream early');
}

export async function serveChunks(node: OrchardNode, store: ModelStore): Promise<void> {
  const local = store.localChunkSource();
  await node.handle(
    CHUNKS_PROTOCOL,
    async (stream: Stream) => {
      try {
        let line = '';
        for await (const piece of stream) {
          line += new TextDecoder().decode(piece instanceof Uint8Array ? piece : piece.subarray());
          if (line.includes('\n') || line.length > 4096) break;
        }
        const parsed = requestSchema.safeParse(JSON.parse(line.split('\n')[0]));
        if (!parsed.success) {
          stream.send(enc.encode(JSON.stringify({ ok: false, error: 'bad request' }) + '\n'));
          return;
        }
        const req = parsed.data;
        if (req.op === 'models') {
          const models = (await store.list()).filter((m) => Object.values(m.files).every((f) => f.complete)).map((m) => m.repo);
          stream.send(enc.encode(JSON.stringify({ ok: true, models }) + '\n'));
        } else if (req.op === 'manifest') {
          const manifest = await local.manifest(req.sha256);
          stream.send(enc.encode(JSON.stringify(manifest ? { ok: true, manifest } : { ok: false, error: 'not here' }) + '\n'));
        } else {
          const bytes = await local.chunk(req.cid).catch(() => null);
          if (!bytes) stream.send(enc.encode(JSON.stringify({ ok: false, error: 'not here' }) + '\n'));
          else {
            stream.send(enc.encode(JSON.stringify({ ok: true, length: bytes.byteLength }) + '\n'));
            if (!stream.send(bytes)) await stream.onDrain({ signal: AbortSignal.timeout(TIMEOUT_MS) });
          }
        }
      } catch {
        /* a broken request or a peer that went away */
      } finally {
        await stream.close().catch(() => stream.abort(new Error('close failed')));
      }
    },
    { maxInboundStreams: 64 },
  );
}

async function ask(node: OrchardNode, peer: string, req: z.infer<typeof requestSchema>, signal?: AbortSignal) {
  const s = signal ? AbortSignal.any([signal, AbortSignal.timeout(TIMEOUT_MS)]) : AbortSignal.timeout(TIMEOUT_MS);
  const stream = await node.dialProtocol(peerIdFromString(peer), CHUNKS_PROTOCOL, { signal: s });
  try {
    stream.send(enc.encode(JSON.stringify(req) + '\n'));
    return await readAnswer(stream, (h) => (req.op === 'chunk' ? Number(h.length) : 0));
  } finally {
    await stream.close().catch(() => stream.abort(new Error('close failed')));
  }
}

/** A peer's store as a chunk source (for `ModelStore.pull({ peers })`). */
export function peerChunkSource(node: OrchardNode, peer: string): ChunkSource {
  return {
    name: `peer ${peer}`,
    async manifest(sha256, signal) {
      const { header } = await ask(node, peer, { op: 'manifest', sha256 }, signal);
      return header.ok ? (header.manifest as FileManifest) : undefined;
    },
    async chunk(cid, signal) {
      const { header, body } = await ask(node, peer, { op: 'chunk', cid }, signal);
      if (!header.ok || !body) throw new Error(`peer ${peer} has no chunk ${cid}`);
      return body;
    },
  };
}

/** Complete models a peer holds in its store. */
export async function peerModels(node: OrchardNode, peer: string): Promise<string[]> {
  const { header } = await ask(node, peer, { op: 'models' });
  return header.ok && Array.isArray(header.models) ? header.models.filter((m: unknown) => typeof m === 'string') : [];
}
