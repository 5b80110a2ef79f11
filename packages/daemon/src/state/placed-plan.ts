/**
 * What an instance entry of the cluster state holds: where each rank runs and how the model is split,
 * the planner's prediction, the model's description (so any later coordinator can plan it again
 * without the files), the context every rank allocates and the data plane's secret. Validated like
 * every event, since it arrives from the network.
 */
import type { Plan } from '@orchard/partitioner';
import { z } from 'zod';
import { modelDescriptionSchema } from '../models/description.js';

const peerId = z.string().min(1).max(128);
const layers = z.tuple([z.number().int().min(0), z.number().int().min(1)]);

export const requestedPlacementSchema = z.object({
  strategy: z.enum(['auto', 'pipeline', 'tensor']),
  /** Nodes for a forced strategy. @default 2 */
  nodes: z.number().int().min(1).max(64).optional(),
  /** Context asked for (tokens per sequence); the model's maximum still caps it. */
  context: z.number().int().min(2).max(1 << 24).optional(),
  /** Sequences the instance is to hold at once (the placing node's --batch). @default 1 */
  sequences: z.number().int().min(1).max(64).optional(),
});
export type PlacementRequest = z.infer<typeof requestedPlacementSchema>;

export const instanceLayoutSchema = z.object({
  stages: z.array(layers).min(1).max(256),
  tensor: z.number().int().min(1).max(128),
  heads: z.array(z.array(z.number().int().min(1)).max(128)).max(256).optional(),
});

const predictionSchema = z.object({
  decodeTokensPerSecond: z.number(),
  prefillTokensPerSecond: z.number(),
  ttftMs: z.number(),
  aggregateDecodeTokensPerSecond: z.number(),
  breakdown: z.object({ computeMs: z.number(), allReduceMs: z.number(), hopsMs: z.number(), headMs: z.number() }),
}) satisfies z.ZodType<Plan['predicted']>;

export const placedPlanSchema = z.object({
  strategy: z.enum(['single', 'pipeline', 'tensor', 'hybrid']),
  layout: instanceLayoutSchema,
  /** Node (peer id) of each rank; rank = stage·tensor + tensorRank. */
  ranks: z.array(peerId).min(1).max(256),
  /** The planner's prediction for this layout, when it made one. */
  predicted: predictionSchema.nullable(),
  explanation: z.array(z.string().max(2000)).max(32),
  /** Per-instance data-plane secret (hex). */
  secret: z.string().regex(/^[0-9a-f]{64}$/),
  requested: requestedPlacementSchema,
  model: modelDescriptionSchema,
  /** Tokens per sequence every rank allocates (the serving profile's context). */
  context: z.number().int().min(2).max(1 << 24),
  /**
   * Sequences every rank holds at once, each with `context` tokens of KV cache: what the planner
   * reserved memory for, and the most the runners batch. Absent in plans placed before it existed (1).
   */
  sequences: z.number().int().min(1).max(64).optional(),
  /** A better plan placed while this instance ran: it takes new requests once ready, then this one retires. */
  supersedes: z.string().max(160).optional(),
  /**
   * When this instance began superseding `supersedes`, if not when it was placed: a healed partition
   * makes one of two duplicates supersede the other (state/merge.ts). The retire bound counts from it.
   */
  supersedesSince: z.number().optional(),
});

export type PlacedPlan = z.infer<typeof placedPlanSchema>;
