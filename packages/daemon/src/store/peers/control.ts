/**
 * `/orchard/weights/1`: the control half of sharing weights, over libp2p (so only pod members — the
 * pod's key — can ask). One JSON line each way:
 *
 *   have {key}                        → what this node holds of the file (verified chunks with their
 *                                       digests, chunks in flight), its weights endpoints and the
 *                                       secret that opens them (the bytes then move over the data
 *                                       plane, weights-server.ts)
 *   claim {key, size, chunks, failed} → the hub ledger's answer (only the pod's coordinator keeps it)
 *   listing {repo}                    → this node's listing of a model (files, sizes, hashes, commit)
 *
 * Chunk sets travel as runs ([[first, end), ...]).
 */
import type { Stream } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import { z } from 'zod';
import type { OrchardNode } from '../../node/create-node.js';
import type { Availability } from '../chunked/registry.js';
import type { HubRepo } from '../hub.js';

export const WEIGHTS_CONTROL_PROTOCOL = '/orchard/weights/1';
const TIMEOUT_MS = 10_000;
/** Availability of a large file (a digest per chunk) fits easily; anything longer is refused. */
const MAX_LINE = 8 * 1024 * 1024;
const MAX_CHUNKS = 1 << 22;

const runs = z.array(z.tuple([z.number().int().min(0).max(MAX_CHUNKS), z.number().int().min(0).max(MAX_CHUNKS)])).max(1 << 16);
const key = z.string().min(4).max(200);
const endpoint = z.object({ host: z.string().min(1).max(64), port: z.number().int().min(1).max(65535) });

export const requestSchema = z.discriminatedUnion('op', [
  z.object({ op: z.literal('have'), key }),
  z.object({ op: z.literal('claim'), key, size: z.number().int().min(0), chunks: runs, failed: z.array(z.string().max(128)).max(64) }),
  z.object({ op: z.literal('listing'), repo: z.string().min(3).max(200) }),
]);
export type ControlRequest = z.infer<typeof requestSchema>;

export const availabilitySchema = z.object({
  key,
  size: z.number().int().min(0),
  chunkSize: z.number().int().min(1),
  verified: runs,
  digests: z.array(z.string().regex(/^[0-9a-f]{64}$/)).max(MAX_CHUNKS),
  fetching: runs,
  complete: z.boolean(),
});

export const haveAnswerSchema = z.object({
  ok: z.literal(true),
  availability: availabilitySchema,
  endpoints: z.array(endpoint).max(16),
  /** base64 of the weights server's secret. */
  secret: z.string().min(16).max(128),
});
export type HaveAnswer = z.infer<typeof haveAnswerSchema>;

export const claimAnswerSchema = z.object({
  ok: z.literal(true),
  granted: runs,
  elsewhere: z.array(z.object({ node: z.string().min(1).max(128), chunks: runs })).max(256),
});
export type ClaimWire = z.infer<typeof claimAnswerSchema>;

export const listingAnswerSchema = z.object({
  ok: z.literal(true),
  listing: z.object({
    repo: z.string(),
    commit: z.string().min(1).max(100),
    files: z.array(z.object({ path: z.string().min(1).max(500), size: z.number().int().min(0), sha256: z.string().optional(), gitSha1: z.string().optional() })).max(10_000),
  }),
});

export type ControlAnswer = HaveAnswer | ClaimWire | z.infer<typeof listingAnswerSchema> | { ok: false; error: string };

export interface ControlHandlers {
  have(key: string): Promise<{ availability: Availability; endpoints: Array<{ host: string; port: number }>; secret: string } | undefined>;
  /** Undefined: this node does not keep the ledger. */
  claim(from: string, req: Extract<ControlRequest, { op: 'claim' }>): Promise<Omit<ClaimWire, 'ok'> | undefined>;
  listing(repo: string): Promise<HubRepo | undefined>;
}

const enc = new TextEncoder();

async function readLine(stream: Stream): Promise<string> {
  const dec = new TextDecoder();
  let text = '';
  for await (const piece of stream) {
    text += dec.decode(piece instanceof Uint8Array ? piece : piece.subarray(), { stream: true });
    const nl = text.indexOf('\n');
    if (nl >= 0) return text.slice(0, nl);
    if (text.length > MAX_LINE) throw new Error('message too long');
  }
  throw new Error('the peer closed the stream early');
}

async function sendLine(stream: Stream, value: unknown): Promise<void> {
  if (!stream.send(enc.encode(`${JSON.stringify(value)}\n`))) await stream.onDrain({ signal: AbortSignal.timeout(TIMEOUT_MS) });
}

export async function serveWeightsControl(node: OrchardNode, h: ControlHandlers): Promise<void> {
  await node.handle(
    WEIGHTS_CONTROL_PROTOCOL,
    async (stream: Stream, connection) => {
      const from = connection.remotePeer.toString();
      try {
        const parsed = requestSchema.safeParse(JSON.parse(await readLine(stream)));
        if (!parsed.success) return await sendLine(stream, { ok: false, error: `bad request: ${parsed.error.issues[0]?.message}` });
        const req = parsed.data;
        if (req.op === 'have') {
          const a = await h.have(req.key);
          await sendLine(stream, a ? { ok: true, ...a } : { ok: false, error: 'not here' });
        } else if (req.op === 'claim') {
          const a = await h.claim(from, req);
          await sendLine(stream, a ? { ok: true, ...a } : { ok: false, error: 'not the coordinator' });
        } else {
          const listing = await h.listing(req.repo);
          await sendLine(stream, listing ? { ok: true, listing } : { ok: false, error: 'not here' });
        }
      } catch {
        /* a broken request or a peer that went away */
      } finally {
        await stream.close().catch(() => stream.abort(new Error('close failed')));
      }
    },
    { maxInboundStreams: 128 },
  );
}

/** Asks `peer` one question; the answer is checked against `schema` (undefined for "not here"). */
export async function askWeightsControl<T>(node: OrchardNode, peer: string, req: ControlRequest, schema: z.ZodType<T>, signal?: AbortSignal): Promise<T | undefined> {
  const s = signal ? AbortSignal.any([signal, AbortSignal.timeout(TIMEOUT_MS)]) : AbortSignal.timeout(TIMEOUT_MS);
  const stream = await node.dialProtocol(peerIdFromString(peer), WEIGHTS_CONTROL_PROTOCOL, { signal: s });
  try {
    await sendLine(stream, req);
    const raw = JSON.parse(await readLine(stream)) as { ok?: unknown };
    if (raw.ok !== true) return undefined;
    const parsed = schema.safeParse(raw);
    if (!parsed.success) throw new Error(`peer ${peer} answered ${req.op} with a malformed message (${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message})`);
    return parsed.data;
  } finally {
    await stream.close().catch(() => stream.abort(new Error('close failed')));
  }
}
