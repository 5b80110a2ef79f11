/**
 * A model as the serving side knows it, wherever its files are: the planner's input (`spec`, with
 * exact byte counts when the holder read safetensors headers), the engine's split dimensions
 * (`dims`, what `canRun` checks) and the longest context the model was trained for. Built once by
 * the node holding the files (describe.ts) and sent as is — in the catalog gossip, placement requests
 * and the placed plan — so every node plans the same model the same way.
 */
import type { LayoutDims } from '@orchard/engine';
import type { LayerSpec, ModelSpec } from '@orchard/partitioner';
import { z } from 'zod';

export interface ModelDescription {
  spec: ModelSpec;
  dims: LayoutDims;
  /** max_position_embeddings: the serving profile caps the context at this. */
  maxContext: number;
  /** Set when the engine cannot run the model (plans are then sizing only). */
  unsupported?: string;
}

const count = z.number().int().min(0).max(1e9);
const bytes = z.number().min(0).max(1e16);

const layerSpecSchema = z.object({
  index: count,
  kind: z.enum(['dense', 'moe']),
  bytes,
  activeBytes: bytes,
  headBytes: bytes,
  kvHeadBytes: bytes,
  mlpBytes: bytes,
  mlpActiveBytes: bytes,
  replicatedBytes: bytes,
  flopsPerToken: bytes,
}) satisfies z.ZodType<LayerSpec>;

export const modelSpecSchema = z.object({
  name: z.string().max(512),
  architecture: z.string().max(256),
  numLayers: count,
  hiddenSize: count,
  vocabSize: count,
  numHeads: count,
  numKvHeads: count,
  attention: z.enum(['gqa', 'mla']),
  moe: z.object({ experts: count, expertsPerToken: count, sharedExperts: count, moeLayers: count }).optional(),
  layers: z.array(layerSpecSchema).max(1024),
  embeddingBytes: bytes,
  lmHeadBytes: bytes,
  tiedEmbeddings: z.boolean(),
  kvBytesPerTokenPerLayer: bytes,
  kvReplicated: z.boolean(),
  attentionFlopsPerPosition: bytes,
  activationBytesPerToken: bytes,
  maxIntermediate: count,
  totalBytes: bytes,
  activeBytesPerToken: bytes,
  totalParams: bytes,
  activeParams: bytes,
  format: z.string().max(256),
  bytesFrom: z.enum(['config', 'safetensors']),
}) satisfies z.ZodType<ModelSpec>;

const positive = z.number().int().min(1).max(1e9);

export const modelDescriptionSchema = z.object({
  spec: modelSpecSchema,
  dims: z.object({ numLayers: positive, numHeads: positive, numKvHeads: positive, intermediateSize: positive, vocabSize: positive }),
  maxContext: positive,
  unsupported: z.string().max(1000).optional(),
}) satisfies z.ZodType<ModelDescription>;
