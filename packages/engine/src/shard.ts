/**
 * What one engine instance runs: a contiguous range of decoder layers and/or one tensor-parallel
 * slice of each of them. The engine knows nothing about the network: a tensor-parallel shard gets
 * an all-reduce callback, and pipeline stages hand hidden states to whoever drives them.
 */
export interface ShardSpec {
  /** Decoder layers [start, end) this shard holds. */
  layers: [number, number];
  /**
   * Tensor-parallel slice: rank `rank` of `size`. `heads` gives every rank's query heads for an uneven
   * split (absent: equal shares). `{rank: 0, size: 1}` = whole layers.
   */
  tensor: { rank: number; size: number; heads?: number[] };
  /** First pipeline stage: its tensor rank 0 holds the whole token embedding and embeds; the stage's other ranks are given those rows. */
  embed: boolean;
  /** Holds the final norm and the LM head (its vocabulary slice on a tensor rank), and computes logits (last pipeline stage). */
  head: boolean;
}

/** Sums `buf` in place across the tensor-parallel group. Supplied by the caller (transport, or in-process). */
export type AllReduce = (buf: Float32Array) => Promise<void>;
