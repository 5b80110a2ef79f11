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

/** A shard that takes several sequences in one step (the CPU `ModelShard`). */
export interface BatchStageShard<C> {
  forwardBatch(segments: { input: ShardInput; cache: C; allLogits?: boolean }[]): Promise<Float32Array[]>;
  embed(tokens: ArrayLike<number>, out?: Float32Array): Float32Array;
}

/** One sequence's part of a step through the stages: its caches [stage][rank] and its new tokens. */
export interface StageStep<C> {
  caches: C[][];
  tokens: ArrayLike<number>;
  /** Logits of every token, [n, vocab], not only the last. */
  allLogits?: boolean;
}

/**
 * One batched step of several sequences through pipeline stages of tensor ranks in this process (their
 * tokens together fit one forward): each stage runs every sequence's rows in one forwardBatch. Returns
 * per sequence its logits (the last token's, or every token's), copied: the caller owns them.
 */
export async function stepThroughStages<C>(stages: BatchStageShard<C>[][], steps: readonly StageStep<C>[], hiddenSize: number, vocabSize: number): Promise<Float32Array[]> {
  let inputs = firstStageInputs(stages[0], steps, hiddenSize);
  let outs: Float32Array[][] = [];
  for (let s = 0; s < stages.length; s++) {
    outs = await Promise.all(stages[s].map((sh, r) => sh.forwardBatch(steps.map((st, i) => ({ input: inputs[i], cache: st.caches[s][r], allLogits: st.allLogits })))));
    // All ranks of a stage hold the same hidden states after their all-reduces; rank 0's go on (the
    // next stage copies them in before it overwrites anything of this one).
    inputs = outs[0].map((hidden, i) => ({ hidden, n: steps[i].tokens.length }));
  }
  return steps.map((_, i) => joinRows(outs.map((rank) => rank[i]), vocabSize));
}

/** A lone first-stage shard embeds its tokens itself; a tensor group is fed rank 0's rows. */
function firstStageInputs<C>(ranks: BatchStageShard<C>[], steps: readonly StageStep<C>[], hiddenSize: number): ShardInput[] {
  if (ranks.length === 1) return steps.map((st) => ({ tokens: st.tokens }));
  return steps.map((st) => ({ hidden: ranks[0].embed(st.tokens, new Float32Array(st.tokens.length * hiddenSize)), n: st.tokens.length }));
}

/** The head ranks' vocabulary slices of each row joined into whole rows [rows, vocab]. */
function joinRows(slices: Float32Array[], vocab: number): Float32Array {
  if (slices.length === 1) return Float32Array.from(slices[0]);
  const n = slices.reduce((a, p) => a + p.length, 0) / vocab;
  const rows = new Float32Array(n * vocab);
  for (let r = 0; r < n; r++) {
    joinLogitSlices(
      rows.subarray(r * vocab, (r + 1) * vocab),
      slices.map((p) => p.subarray((r * p.length) / n, ((r + 1) * p.length) / n)),
    );
  }
  return rows;
}
