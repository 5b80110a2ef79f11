/**
 * Serving messages on their own gossip topic (not part of the replicated log): data-plane endpoints,
 * instance status (readiness and load, from the node driving it), failures, and requests to the
 * coordinator. Untrusted input: validated here, dropped when malformed.
 */
import { z } from 'zod';
import { modelDescriptionSchema } from '../models/description.js';
import { requestedPlacementSchema } from '../state/placed-plan.js';

export const SERVE_TOPIC = 'orchard/serve/1';
export const MAX_SERVE_BYTES = 64 * 1024;

const peerId = z.string().min(1).max(128);
const instanceId = z.string().min(1).max(160);

export const serveMessageSchema = z.discriminatedUnion('type', [
  /** A runner bound its data-plane port: where rank `rank` of `instance` listens. */
  z.object({
    type: z.literal('endpoint'),
    from: peerId,
    instance: instanceId,
    rank: z.number().int().min(0).max(255),
    addresses: z.array(z.object({ host: z.string().max(64), port: z.number().int().min(1).max(65535) })).min(1).max(16),
  }),
  /** From the node running rank 0, every second: is the instance serving and how busy is it. */
  z.object({ type: z.literal('status'), from: peerId, instance: instanceId, ready: z.boolean(), active: z.number().int().min(0), queued: z.number().int().min(0), capacity: z.number().int().min(0),
    /** The sender's libp2p addresses, so nodes that only know it through gossip can dial it. */
    addrs: z.array(z.string().max(256)).max(16).optional(),
    /** Decode speed of the instance's last request, tokens/s (shown next to the plan's prediction). */
    decodeTokensPerSecond: z.number().min(0).max(1e7).nullable().optional(),
    /** How long the instance has had no request running or queued, ms (as the sender's clock measured it). */
    idleMs: z.number().min(0).optional(),
  }),
  /** A rank of the instance died or never came up: the coordinator replaces the instance. */
  z.object({ type: z.literal('failed'), from: peerId, instance: instanceId, reason: z.string().max(1000),
    /** `load`: the instance never served (model files, fetch, start-up); `serve`: it died while serving. */
    phase: z.enum(['load', 'serve']),
  }),
  /** Ask the coordinator to place a model (forced strategy optional); `exclusive`: not an instance placed another way. */
  z.object({ type: z.literal('place'), from: peerId, model: z.string().min(1).max(512), requested: requestedPlacementSchema, exclusive: z.boolean(),
    /** Asked for by someone (`orchard load`), not by a request: clears a failed mark and skips a pending replacement's wait. */
    explicit: z.boolean(),
    description: modelDescriptionSchema,
  }),
  /** A model this node holds, with what planning needs, now and then: any node can then serve it. */
  z.object({ type: z.literal('catalog'), from: peerId, id: z.string().min(1).max(512), description: modelDescriptionSchema,
    /** When the model's files last changed on the sender (ms): a failed model gets another chance after that. */
    filesAt: z.number().min(0).optional(),
  }),
  /** Ask the coordinator to remove an instance. */
  z.object({ type: z.literal('remove'), from: peerId, instance: instanceId }),
  /** The sender's runners' data-plane links (RDMA with the device, or TCP with the reason): runner/link-report.ts. */
  z.object({
    type: z.literal('links'),
    from: peerId,
    instance: instanceId,
    ranks: z
      .array(
        z.object({
          rank: z.number().int().min(0).max(255),
          links: z
            .array(
              z.object({
                peer: z.number().int().min(0).max(255),
                transport: z.enum(['rdma', 'tcp', 'fallback']),
                reason: z.string().max(300),
                encryption: z.string().max(40).nullable().optional(),
              }),
            )
            .max(255),
        }),
      )
      .max(64),
  }),
]);

export type ServeMessage = z.infer<typeof serveMessageSchema>;

export function decodeServe(bytes: Uint8Array, from: string): { ok: true; message: ServeMessage } | { ok: false; reason: string } {
  if (bytes.byteLength > MAX_SERVE_BYTES) return { ok: false, reason: `serve message of ${bytes.byteLength} bytes exceeds ${MAX_SERVE_BYTES}` };
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return { ok: false, reason: 'serve message is not JSON' };
  }
  const r = serveMessageSchema.safeParse(raw);
  if (!r.success) return { ok: false, reason: `bad serve message: ${r.error.issues[0]?.message ?? 'invalid'}` };
  if (r.data.from !== from) return { ok: false, reason: `serve message claims to be from ${r.data.from}` };
  return { ok: true, message: r.data };
}

export function encodeServe(m: ServeMessage): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(m));
}
