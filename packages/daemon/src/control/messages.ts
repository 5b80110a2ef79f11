/**
 * Messages daemons exchange on the control topic. Everything received is untrusted: parsed with
 * these schemas, and a message that fails is dropped (and logged with its sender), never thrown.
 */
import { z } from 'zod';
import { placedPlanSchema } from '../state/placed-plan.js';
import { clusterEventSchema } from '../state/events.js';
import { linkMeasurementSchema } from '../links/types.js';
import { nodeProfileSchema } from '../profile/types.js';

/** Control messages larger than this are dropped unread. A snapshot of a 64-node pod fits easily. */
export const MAX_CONTROL_BYTES = 1024 * 1024;
export const CONTROL_TOPIC = 'orchard/control/1';

const peerId = z.string().min(1).max(128);

export const logPositionSchema = z.object({
  epoch: z.number().int().nonnegative(),
  leader: z.string().max(128),
  seq: z.number().int().nonnegative(),
});
export type LogPosition = z.infer<typeof logPositionSchema>;

const nodeEntrySchema = z.object({
  peerId,
  name: z.string().max(128),
  status: z.enum(['live', 'gone']),
  joinedAt: z.number(),
  leftAt: z.number().nullable(),
  leftReason: z.enum(['silent', 'shutdown']).nullable(),
  profile: nodeProfileSchema.nullable(),
});

export const stateSchema = z.object({
  nodes: z.record(z.string().max(128), nodeEntrySchema),
  links: z.record(z.string().max(600), linkMeasurementSchema),
  instances: z.record(
    z.string().max(128),
    z.object({ id: z.string().max(128), model: z.string().max(512), placedAt: z.number(), nodes: z.array(peerId).max(256), plan: placedPlanSchema }),
  ),
  failedModels: z
    .record(z.string().max(512), z.object({ model: z.string().max(512), reason: z.string().max(1000), attempts: z.number().int().min(0), at: z.number() }))
    .default({}),
});

export const controlMessageSchema = z.discriminatedUnion('type', [
  /** Liveness, once a second; carries where the sender's copy of the log stands. */
  z.object({ type: z.literal('heartbeat'), from: peerId, name: z.string().max(128), bootId: z.string().max(64), at: z.number(), log: logPositionSchema }),
  /** A node's own profile, sent to the coordinator (and seen by all). */
  z.object({ type: z.literal('profile'), from: peerId, profile: nodeProfileSchema }),
  /** A node's own link measurements. */
  z.object({ type: z.literal('links'), from: peerId, links: z.array(linkMeasurementSchema).max(256) }),
  /** One sequenced event from the coordinator. */
  z.object({ type: z.literal('event'), from: peerId, epoch: z.number().int().nonnegative(), seq: z.number().int().positive(), event: clusterEventSchema }),
  /** "I am behind": the coordinator answers with a snapshot. */
  z.object({ type: z.literal('sync-request'), from: peerId, to: peerId, purpose: z.enum(['follow', 'adopt']) }),
  z.object({ type: z.literal('snapshot'), from: peerId, epoch: z.number().int().nonnegative(), seq: z.number().int().nonnegative(), state: stateSchema }),
  /** Clean shutdown: leave now instead of after the silence timeout. */
  z.object({ type: z.literal('goodbye'), from: peerId }),
]);

export type ControlMessage = z.infer<typeof controlMessageSchema>;
