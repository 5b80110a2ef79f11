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
 * - Mixture of experts (expert parallelism): each rank holds whole routed experts, a contiguous block
 *   of them as equal as possible, and computes only the chosen experts it holds; shared experts split
 *   like the MLP. Every rank holds the router (all scores are needed to choose). The layer's output is
 *   a partial sum like down_proj's, so the same one all-reduce finishes it. A group larger than the
 *   expert count is refused (a rank would hold no expert).
 * - LM head: split by vocabulary rows (ceil(vocab / size) per rank); each rank computes the logits
 *   of its rows and the sampler joins the slices (joinLogitSlices) — no all-reduce. The embedding is
 *   not split: rank 0 of the first stage holds it whole (see embedding.ts).
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
  /** Routed experts [start, end) of each MoE layer ([0, 0) for a dense model). */
  experts: [number, number];
  /** Rows [start, end) of the shared experts' combined intermediate (DeepSeek). */
  sharedFfn: [number, number];
  /** Vocabulary rows [start, end) of the LM head (and of its logits). */
  vocab: [number, number];
}

export interface SplitDims {
  numHeads: number;
  numKvHeads: number;
  intermediateSize: number;
  vocabSize: number;
  moe?: { experts: number; sharedIntermediate: number };
}

export function tensorSlice(dims: SplitDims, rank: number, size: number): TensorSlice {
  const { numHeads: H, numKvHeads: KV, intermediateSize: I, vocabSize: V } = dims;
  if (H % KV) throw new UnsupportedModelError(`${H} attention heads are not a multiple of ${KV} KV heads`);
  if (!Number.isInteger(size) || size < 1) throw new UnsupportedModelError(`tensor size must be a positive integer, got ${size}`);
  if (!Number.isInteger(rank) || rank < 0 || rank >= size) throw new UnsupportedModelError(`tensor rank ${rank} is outside 0..${size - 1}`);
  if (H % size) {
    throw new UnsupportedModelError(`cannot split ${H} attention heads over ${size} tensor ranks: heads must divide evenly`);
  }
  const E = dims.moe?.experts ?? 0;
  if (E && E < size) {
    throw new UnsupportedModelError(`cannot split ${E} experts over ${size} tensor ranks: each rank must hold at least one whole expert`);
  }
  const S = dims.moe?.sharedIntermediate ?? 0;
  const hPer = H / size;
  const group = H / KV;
  // KV heads [first, last] read by query heads [rank·hPer, (rank+1)·hPer), shared with neighbours as needed.
  const kvHeads: [number, number] = [Math.floor((rank * hPer) / group), Math.floor(((rank + 1) * hPer - 1) / group) + 1];
  return {
    rank,
    size,
    heads: [rank * hPer, (rank + 1) * hPer],
    kvHeads,
    ffn: evenBlock(I, rank, size),
    experts: evenBlock(E, rank, size),
    sharedFfn: evenBlock(S, rank, size),
    vocab: vocabSlice(V, rank, size),
  };
}

/** Block `rank` of `size` blocks of [0, n) as equal as possible. */
function evenBlock(n: number, rank: number, size: number): [number, number] {
  return [Math.floor((rank * n) / size), Math.floor(((rank + 1) * n) / size)];
}

/** Vocabulary rows [start, end) of tensor rank `rank` of `size`: ceil(vocab / size) each, the last one short. */
export function vocabSlice(vocab: number, rank: number, size: number): [number, number] {
  const per = Math.ceil(vocab / size);
  return [Math.min(vocab, rank * per), Math.min(vocab, (rank + 1) * per)];
}

/**
 * Joins the head ranks' logit slices (rank order, as forward() returns them) into `out`, the full
 * vocabulary: each slice goes to its rank's rows. Returns `out`.
 */
export function joinLogitSlices(out: Float32Array, slices: readonly Float32Array[]): Float32Array {
  slices.forEach((part, rank) => {
    const [v0, v1] = vocabSlice(out.length, rank, slices.length);
    if (part.length !== v1 - v0) throw new RangeError(`joinLogitSlices: rank ${rank} of ${slices.length} gave ${part.length} logits, its rows ${v0}..${v1} need ${v1 - v0}`);
    out.set(part, v0);
  });
  return out;
}
