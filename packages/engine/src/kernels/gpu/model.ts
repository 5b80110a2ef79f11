/**
 * A whole model on the GPU in this process, as `pipeline` stages × `tensor` ranks of GpuShards — the
 * GPU counterpart of drivers/in-process.ts's InProcessModel, implementing the same LanguageModel
 * interface so generate() and `orchard run` can use it unchanged. Weights are read by the engine's own
 * loader (model/weights.ts, reading only each shard's bytes) and uploaded once; the CPU copies are
 * dropped after upload.
 */
import type { ModelConfig } from '../../config/config.js';
import { loadModelConfig } from '../../format/model-files.js';
import { createInProcessAllReduce } from '../../drivers/all-reduce.js';
import { type LanguageModel, type Session } from '../../drivers/in-process.js';
import { pipelineStages } from '../../layout.js';
import { forwardThroughStages } from '../../drivers/stages.js';
import { loadShard } from '../../model/forward.js';
import { createGpuContext, type GpuContext } from './context.js';
import { GpuShard, type GpuKVCache } from './shard.js';

export interface GpuModelOptions {
  /** Use this context (shared by several models); otherwise one is created and owned by the model. */
  context?: GpuContext;
  /** Accept a software adapter (lavapipe) when creating the context. @default false */
  allowSoftware?: boolean;
  /** @default 1 */
  pipeline?: number | number[];
  /** @default 1 */
  tensor?: number;
  /** Prompt chunk size. @default 32 */
  maxBatch?: number;
  /** @default min(max_position_embeddings, 4096) */
  maxSeqLen?: number;
}

export class GpuModel implements LanguageModel {
  readonly maxSeqLen: number;

  constructor(
    readonly config: ModelConfig,
    /** stages[s][r]: stage s, tensor rank r. */
    readonly stages: GpuShard[][],
    readonly context: GpuContext,
    private readonly ownsContext: boolean,
  ) {
    this.maxSeqLen = stages[0][0].maxSeqLen;
  }

  /** Bytes of weights held in GPU memory by all shards. */
  get weightBytes(): number {
    return this.stages.flat().reduce((s, sh) => s + sh.weightBytes, 0);
  }

  newSession(capacity = this.maxSeqLen): Session {
    const stages = this.stages;
    const D = this.config.hiddenSize;
    const maxBatch = Math.min(...stages.flat().map((s) => s.maxBatch));
    const buffers = { transfer: new Float32Array(maxBatch * D), logits: new Float32Array(this.config.vocabSize) };
    let caches: Promise<GpuKVCache[][]> | null = null;
    let length = 0;
    let disposed = false;
    return {
      get length() {
        return length;
      },
      async forward(tokens) {
        if (disposed) throw new Error('forward: the session was disposed');
        if (tokens.length === 0) throw new RangeError('forward: no tokens');
        // GPU caches are created on first use: allocation is asynchronous (out-of-memory is reported then).
        caches ??= Promise.all(stages.map((ranks) => Promise.all(ranks.map((sh) => sh.newCache(capacity)))));
        const kv = await caches;
        return forwardThroughStages(stages, kv, tokens, maxBatch, buffers, D, (n) => (length += n));
      },
      dispose() {
        disposed = true;
        void caches?.then((kv) => kv.flat().forEach((c) => c.destroy()));
      },
    };
  }

  dispose(): void {
    for (const s of this.stages.flat()) s.dispose();
    if (this.ownsContext) this.context.destroy();
  }
}

/** Loads the model in `dir` onto the GPU as `pipeline` stages × `tensor` ranks. */
export async function loadGpuModel(dir: string, options: GpuModelOptions = {}): Promise<GpuModel> {
  const config = loadModelConfig(dir);
  const ctx = options.context ?? (await createGpuContext({ allowSoftware: options.allowSoftware }));
  const owns = !options.context;
  const ranges = pipelineStages(config.numLayers, options.pipeline ?? 1);
  const size = options.tensor ?? 1;
  const stages: GpuShard[][] = [];
  try {
    for (let s = 0; s < ranges.length; s++) {
      const reduces = size > 1 ? createInProcessAllReduce(size) : [];
      const ranks: GpuShard[] = [];
      stages.push(ranks);
      for (let rank = 0; rank < size; rank++) {
        const spec = { layers: ranges[s], tensor: { rank, size }, embed: s === 0, head: s === ranges.length - 1 };
        // The CPU shard is only the loader here: its weights are uploaded, then it is dropped.
        const cpu = loadShard(dir, spec, { config, allReduce: reduces[rank], maxBatch: 1, maxSeqLen: 1 });
        ranks.push(
          await GpuShard.create(ctx, {
            config,
            spec,
            slice: cpu.slice,
            weights: cpu.weights,
            allReduce: reduces[rank],
            maxBatch: options.maxBatch,
            maxSeqLen: options.maxSeqLen ?? Math.min(config.maxPositionEmbeddings, 4096),
          }),
        );
      }
    }
  } catch (err) {
    for (const s of stages.flat()) s.dispose();
    if (owns) ctx.destroy();
    throw err;
  }
  return new GpuModel(config, stages, ctx, owns);
}
