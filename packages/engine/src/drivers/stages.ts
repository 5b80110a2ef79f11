import type { ShardInput } from '../model/forward.js';

/** What the stage loop needs of a shard: the CPU `ModelShard` and the GPU `GpuShard` both fit. */
export interface StageShard<C> {
  forward(input: ShardInput, cache: C): Promise<Float32Array>;
}

/**
 * Runs `tokens` through pipeline stages of tensor ranks in this process, in chunks of `maxBatch`, and
 * returns the last stage's logits for the last token. `transfer` ([maxBatch · hiddenSize]) carries the
 * hidden states from one stage to the next — what would cross the network between machines.
 * `onChunk` is told how many tokens each chunk moved through every stage.
 */
export async function forwardThroughStages<C>(
  stages: StageShard<C>[][],
  caches: C[][],
  tokens: ArrayLike<number>,
  maxBatch: number,
  transfer: Float32Array,
  hiddenSize: number,
  onChunk?: (n: number) => void,
): Promise<Float32Array> {
  if (tokens.length === 0) throw new RangeError('forward: no tokens');
  let logits: Float32Array | null = null;
  for (let at = 0; at < tokens.length; at += maxBatch) {
    const chunk = Array.prototype.slice.call(tokens, at, Math.min(tokens.length, at + maxBatch)) as number[];
    const n = chunk.length;
    for (let s = 0; s < stages.length; s++) {
      const outs = await Promise.all(
        stages[s].map((sh, r) => sh.forward(s === 0 ? { tokens: chunk } : { hidden: transfer, n }, caches[s][r])),
      );
      // All ranks of a stage hold the same result after their all-reduces; rank 0's is passed on.
      if (s < stages.length - 1) transfer.set(outs[0].subarray(0, n * hiddenSize));
      else logits = outs[0];
    }
    onChunk?.(n);
  }
  return logits!;
}
