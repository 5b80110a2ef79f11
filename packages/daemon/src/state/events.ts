/** Cluster events: a discriminated union, validated when they arrive from the network. */
import { z } from 'zod';
import { nodeProfileSchema } from '../profile/types.js';
import { linkMeasurementSchema } from '../links/types.js';
import { placedPlanSchema } from './placed-plan.js';

const peerId = z.string().min(1).max(128);

export const clusterEventSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('node-joined'), peerId, name: z.string().max(128), at: z.number() }),
  z.object({ type: z.literal('node-left'), peerId, at: z.number(), reason: z.enum(['silent', 'shutdown']) }),
  z.object({ type: z.literal('profile-updated'), profile: nodeProfileSchema }),
  z.object({ type: z.literal('link-measured'), link: linkMeasurementSchema }),
  z.object({
    type: z.literal('instance-placed'),
    instance: z.object({ id: z.string().max(128), model: z.string().max(512), placedAt: z.number(), nodes: z.array(peerId).max(256), plan: placedPlanSchema }),
  }),
  z.object({ type: z.literal('instance-removed'), id: z.string().max(128), at: z.number() }),
  /** Placement of a model failed too often: it is not placed again until someone asks for it explicitly. */
  z.object({ type: z.literal('model-failed'), model: z.string().max(512), reason: z.string().max(1000), attempts: z.number().int().min(0), at: z.number() }),
  /** Someone asked for a failed model again (or its files changed): placement may try it again. */
  z.object({ type: z.literal('model-cleared'), model: z.string().max(512), at: z.number() }),
]);

export type ClusterEvent = z.infer<typeof clusterEventSchema>;
export type ClusterEventType = ClusterEvent['type'];
export type EventOf<T extends ClusterEventType> = Extract<ClusterEvent, { type: T }>;
