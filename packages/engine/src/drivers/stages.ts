import type { ShardInput } from '../model/forward.js';
import { joinLogitSlices } from '../model/tensor-split.js';

/** What the stage loop needs of a shard: the CPU `ModelShard` and the GPU `GpuShard` both fit. */
export interface StageShard<C> {
  forward(input: ShardInput, cache: C): Promise<Float32Array>;
  /** The tokens' embedding rows [n, hidden] (tensor rank 0 of the first stage). */
  embed(tokens: ArrayLike<number>): Float32Array | Promise<Float32Array>;
}

/** Buffers a session keeps between calls. */
export interface StageBuffers {
  /** [maxBatch · hiddenSize]: hidden states from one stage to the next — what would cross the network. */
  transfer: Float32Array;
  /** [vocab]: the head ranks' logit slices joined (used with a tensor split only). */
  logits: Float32Array;
}

/**
 * Runs `tokens` through pipeline stages of tensor ranks in this process, in chunks of `maxBatch`, and
 * returns the last stage's logits for the last token, as the distributed runners do: stage 0's rank 0
 * embeds and its other ranks are given the rows, and the last stage's vocabulary slices are joined.
 * `onChunk` is told how many tokens each chunk moved through every stage.
 */
export async function forwardThroughStages<C>(
  stages: StageShard<C>[][],
  caches: C[][],
  tokens: ArrayLike<number>,
  maxBatch: number,
  buffers: StageBuffers,
  hiddenSize: number,
  onChunk?: (n: number) => void,
): Promise<Float32Array> {
  if (tokens.length === 0) throw new RangeError('forward: no tokens');
  const { transfer } = buffers;
  let logits: Float32Array | null = null;
  for (let at = 0; at < tokens.length; at += maxBatch) {
    const chunk = Array.prototype.slice.call(tokens, at, Math.min(tokens.length, at + maxBatch)) as number[];
    const n = chunk.length;
    for (let s = 0; s < stages.length; s++) {
      const input = s > 0 ? { hidden: transfer, n } : await firstStageInput(stages[0], chunk);
      const outs = await Promise.all(stages[s].map((sh, r) => sh.forward(input, caches[s][r])));
      // All ranks of a stage hold the same hidden states after their all-reduces; rank 0's is passed on.
      if (s < stages.length - 1) transfer.set(outs[0].subarray(0, n * hiddenSize));
      else logits = outs.length > 1 ? joinLogitSlices(buffers.logits, outs) : outs[0];
    }
    onChunk?.(n);
  }
  return logits!;
}

/** A lone first-stage shard embeds its tokens itself; a tensor group is fed rank 0's rows. */
async function firstStageInput<C>(ranks: StageShard<C>[], chunk: number[]): Promise<ShardInput> {
  if (ranks.length === 1) return { tokens: chunk };
  return { hidden: await ranks[0].embed(chunk), n: chunk.length };
}
