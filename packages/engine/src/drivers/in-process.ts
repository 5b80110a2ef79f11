/**
 * Runs a whole model in this process as a grid of shards: `pipeline` stages (layer ranges) × `tensor`
 * ranks per stage, joined by an in-process all-reduce (stages.ts moves the embedding rows, hidden states
 * and logit slices between them). One stage × one rank is the plain unsplit model.
 * Used by `orchard run --pipeline N / --tensor N`, by tests proving split equivalence, and as the
 * shape the daemon's distributed runners follow (one shard per machine instead of per array slot).
 */
import { loadModelConfig, type ModelConfig } from '../config/config.js';
import type { Backend } from '../kernels/backend.js';
import { createReferenceBackend } from '../kernels/reference.js';
import { loadShard, type KVCache, type ModelShard } from '../model/forward.js';
import { checkLayout, pipelineStages, shardSpecOf, stageMembers, type InstanceLayout } from '../layout.js';
import { createInProcessAllReduce } from './all-reduce.js';
import { forwardThroughStages } from './stages.js';

/** Something that turns token ids into next-token logits, one sequence at a time. */
export interface LanguageModel {
  readonly config: ModelConfig;
  /** Longest sequence a session may hold. */
  readonly maxSeqLen: number;
  /** A new sequence with its own KV cache. */
  newSession(capacity?: number): Session;
}

export interface Session {
  /** Tokens processed so far. */
  readonly length: number;
  /**
   * Feeds `tokens` (any number; prompts go in batches) and returns the logits after the last one.
   * The array belongs to the model and is valid until the next call.
   */
  forward(tokens: ArrayLike<number>): Promise<Float32Array>;
  /** Frees the KV caches; the session is unusable afterwards. */
  dispose?(): void;
}

export interface InProcessOptions {
  /** Number of pipeline stages (layers split as evenly as possible), or the layer count of each stage. @default 1 */
  pipeline?: number | number[];
  /** Tensor-parallel ranks per stage. @default 1 */
  tensor?: number;
  /** Query heads of each tensor rank, for an uneven split (the same in every stage). @default equal shares */
  heads?: number[];
  /** One backend per shard, created by this factory. @default the reference backend */
  backend?: () => Backend;
  /** Prompt chunk size. @default 32 */
  maxBatch?: number;
  /** @default min(max_position_embeddings, 4096) */
  maxSeqLen?: number;
}

export class InProcessModel implements LanguageModel {
  readonly config: ModelConfig;
  /** stages[s][r]: stage s, tensor rank r. */
  readonly stages: ModelShard[][];
  readonly maxSeqLen: number;

  constructor(config: ModelConfig, stages: ModelShard[][]) {
    this.config = config;
    this.stages = stages;
    this.maxSeqLen = stages[0][0].maxSeqLen;
  }

  /** Releases every shard's backend. */
  dispose(): void {
    for (const s of this.stages.flat()) s.dispose();
  }

  /** Tensor bytes read by all shards together. */
  get bytesRead(): number {
    return this.stages.flat().reduce((s, sh) => s + sh.bytesRead, 0);
  }

  newSession(capacity = this.maxSeqLen): Session {
    const caches: KVCache[][] = this.stages.map((ranks) => ranks.map((sh) => sh.newCache(capacity)));
    const stages = this.stages;
    const D = this.config.hiddenSize;
    const maxBatch = Math.min(...stages.flat().map((s) => s.maxBatch));
    const buffers = { transfer: new Float32Array(maxBatch * D), logits: new Float32Array(this.config.vocabSize) };
    return {
      get length() {
        return caches[0][0].length;
      },
      forward(tokens) {
        return forwardThroughStages(stages, caches, tokens, maxBatch, buffers, D);
      },
      dispose() {
        stages.forEach((ranks, s) => ranks.forEach((sh, r) => sh.releaseCache(caches[s][r])));
      },
    };
  }
}

/** Loads the model in `dir` as `pipeline` stages × `tensor` ranks in this process. */
export function loadInProcessModel(dir: string, options: InProcessOptions = {}): InProcessModel {
  const config = loadModelConfig(dir);
  const stages = pipelineStages(config.numLayers, options.pipeline ?? 1);
  const tensor = options.tensor ?? 1;
  const layout: InstanceLayout = { stages, tensor, ...(options.heads ? { heads: stages.map(() => options.heads!) } : {}) };
  checkLayout(config, layout);
  const newBackend = options.backend ?? createReferenceBackend;
  const shards = stages.map((_, s) => {
    const reduces = tensor > 1 ? createInProcessAllReduce(tensor) : [];
    return stageMembers(layout, s).map((rank, r) =>
      loadShard(dir, shardSpecOf(layout, rank), { config, backend: newBackend(), allReduce: reduces[r], maxBatch: options.maxBatch, maxSeqLen: options.maxSeqLen }),
    );
  });
  return new InProcessModel(config, shards);
}
