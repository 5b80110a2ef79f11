/**
 * Which slice of each tensor one tensor-parallel rank holds. Pure arithmetic, no I/O.
 *
 * - Attention: query heads split in equal whole-head blocks; each rank loads every KV head its query
 *   heads read (their GQA groups). When a group straddles two ranks — fewer KV heads than ranks, or
 *   e.g. 3 KV heads over 2 ranks — the KV head is REPLICATED on both: every query head must see its
 *   own K/V, replication costs only duplicated K/V projection rows and cache, and it keeps models like
 *   Llama-3-70B (8 KV heads) runnable on 16 ranks and 6-head/3-KV models on 2. Splits that would cut
 *   a query head are refused with a message giving the numbers.
 * - MLP: gate/up rows and down columns split in blocks of intermediate_size as equal as possible
 *   (they need not be equal: each rank's down columns match its own gate/up rows).
 * - Embedding and LM head: split by vocabulary rows (ceil(vocab / size) per rank); the partial
 *   results are joined by the same all-reduce (rows a rank does not hold contribute zeros).
 */
import { UnsupportedModelError } from '../errors.js';

export interface TensorSlice {
  rank: number;
  size: number;
  /** Query heads [start, end). */
  heads: [number, number];
  /** KV heads [start, end) this rank loads (possibly shared with other ranks). */
  kvHeads: [number, number];
  /** intermediate_size rows [start, end). */
  ffn: [number, number];
  /** Vocabulary rows [start, end) of the embedding / LM head. */
  vocab: [number, number];
}

export interface SplitDims {
  numHeads: number;
  numKvHeads: number;
  intermediateSize: number;
  vocabSize: number;
}

export function tensorSlice(dims: SplitDims, rank: number, size: number): TensorSlice {
  const { numHeads: H, numKvHeads: KV, intermediateSize: I, vocabSize: V } = dims;
  if (H % KV) throw new UnsupportedModelError(`${H} attention heads are not a multiple of ${KV} KV heads`);
  if (!Number.isInteger(size) || size < 1) throw new UnsupportedModelError(`tensor size must be a positive integer, got ${size}`);
  if (!Number.isInteger(rank) || rank < 0 || rank >= size) throw new UnsupportedModelError(`tensor rank ${rank} is outside 0..${size - 1}`);
  if (H % size) {
    throw new UnsupportedModelError(`cannot split ${H} attention heads over ${size} tensor ranks: heads must divide evenly`);
  }
  const hPer = H / size;
  const group = H / KV;
  // KV heads [first, last] read by query heads [rank·hPer, (rank+1)·hPer), shared with neighbours as needed.
  const kvHeads: [number, number] = [Math.floor((rank * hPer) / group), Math.floor(((rank + 1) * hPer - 1) / group) + 1];
  const vPer = Math.ceil(V / size);
  return {
    rank,
    size,
    heads: [rank * hPer, (rank + 1) * hPer],
    kvHeads,
    ffn: [Math.floor((rank * I) / size), Math.floor(((rank + 1) * I) / size)],
    vocab: [Math.min(V, rank * vPer), Math.min(V, (rank + 1) * vPer)],
  };
}
