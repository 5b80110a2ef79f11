/**
 * Which slice of each tensor one tensor-parallel rank holds. Pure arithmetic, no I/O.
 *
 * - Attention: query heads split in whole-head blocks — equal ones, or the counts the layout gives
 *   for an uneven split; each rank loads every KV head its query heads read (their GQA groups).
 *   When a group straddles two ranks — fewer KV heads than ranks, or e.g. 3 KV heads over 2 ranks —
 *   the KV head is REPLICATED on both: every query head must see its
 *   own K/V, replication costs only duplicated K/V projection rows and cache, and it keeps models like
 *   Llama-3-70B (8 KV heads) runnable on 16 ranks and 6-head/3-KV models on 2. Splits that would cut
 *   a query head are refused with a message giving the numbers.
 * - MLP: gate/up rows and down columns split in proportion to each rank's heads (blocks of
 *   intermediate_size, equal when the heads are; each rank's down columns match its own gate/up rows).
 * - Mixture of experts (expert parallelism): each rank holds whole routed experts, a contiguous block
 *   in proportion to its heads (equal when the heads are), and computes only the chosen experts it
 *   holds; shared experts split like the MLP. Every rank holds the router (all scores are needed to
 *   choose). The layer's output is a partial sum like down_proj's, so the same one all-reduce finishes
 *   it. A split that would leave a rank no expert is refused.
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

export function tensorSlice(dims: SplitDims, rank: number, size: number, heads?: readonly number[]): TensorSlice {
  const { numHeads: H, numKvHeads: KV, intermediateSize: I, vocabSize: V } = dims;
  if (H % KV) throw new UnsupportedModelError(`${H} attention heads are not a multiple of ${KV} KV heads`);
  if (!Number.isInteger(size) || size < 1) throw new UnsupportedModelError(`tensor size must be a positive integer, got ${size}`);
  if (!Number.isInteger(rank) || rank < 0 || rank >= size) throw new UnsupportedModelError(`tensor rank ${rank} is outside 0..${size - 1}`);
  const [h0, h1] = headRange(H, rank, size, heads);
  const group = H / KV;
  // A rank's MLP rows follow its share of the heads, so an uneven head split moves compute in proportion.
  const ffn: [number, number] = [Math.floor((h0 * I) / H), Math.floor((h1 * I) / H)];
  if (ffn[1] <= ffn[0]) throw new UnsupportedModelError(`tensor rank ${rank} of ${size} would hold no MLP rows (intermediate size ${I}, heads ${h0}..${h1} of ${H})`);
  const vocab = vocabSlice(V, rank, size);
  if (vocab[1] <= vocab[0]) throw new UnsupportedModelError(`tensor rank ${rank} of ${size} would hold no vocabulary rows (vocabulary of ${V})`);
  // Routed experts (whole ones) and shared-expert rows follow the heads' share too.
  const E = dims.moe?.experts ?? 0;
  const S = dims.moe?.sharedIntermediate ?? 0;
  const experts: [number, number] = [Math.floor((h0 * E) / H), Math.floor((h1 * E) / H)];
  if (E && experts[1] <= experts[0]) {
    throw new UnsupportedModelError(`cannot split ${E} experts over ${size} tensor ranks: tensor rank ${rank} (heads ${h0}..${h1} of ${H}) would hold no whole expert`);
  }
  return {
    rank,
    size,
    heads: [h0, h1],
    // KV heads [first, last] read by query heads [h0, h1), shared with neighbours as needed.
    kvHeads: [Math.floor(h0 / group), Math.floor((h1 - 1) / group) + 1],
    ffn,
    experts,
    sharedFfn: [Math.floor((h0 * S) / H), Math.floor((h1 * S) / H)],
    vocab,
  };
}

/**
 * Query heads [start, end) of `rank`: from `heads` (whole heads per rank, summing to H) when given,
 * else H / size each, refused when that is not whole.
 */
function headRange(H: number, rank: number, size: number, heads?: readonly number[]): [number, number] {
  if (heads === undefined) {
    if (H % size) throw new UnsupportedModelError(`cannot split ${H} attention heads over ${size} tensor ranks: heads must divide evenly (or the layout must give each rank its heads)`);
    const per = H / size;
    return [rank * per, (rank + 1) * per];
  }
  if (heads.length !== size) throw new UnsupportedModelError(`heads are given for ${heads.length} tensor ranks; the group has ${size}`);
  if (heads.some((h) => !Number.isInteger(h) || h < 1)) throw new UnsupportedModelError(`every tensor rank needs a whole number of heads >= 1, got ${heads.join('/')}`);
  const total = heads.reduce((a, b) => a + b, 0);
  if (total !== H) throw new UnsupportedModelError(`the heads per tensor rank (${heads.join('/')}) sum to ${total}; the model has ${H}`);
  const start = heads.slice(0, rank).reduce((a, b) => a + b, 0);
  return [start, start + heads[rank]];
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
