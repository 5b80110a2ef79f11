/**
 * Token embedding, shared by the CPU and GPU shards. Only tensor rank 0 of the first stage holds the
 * table (whole): it embeds a step's tokens and its stage-0 peers are fed the rows, so no tensor rank
 * meets the others before the first layer.
 */
import type { Weight } from '../kernels/backend.js';
import { isMlx, isQuantized } from '../kernels/wasm/formats.js';
import { dequantizeRow } from '../kernels/wasm/quant-reference.js';
import { BF16_TO_F32, F16_TO_F32 } from '../numeric/half.js';
import type { ShardSpec } from '../shard.js';

/** Throws unless every id is an integer in 0 .. vocab-1. */
export function checkTokenIds(tokens: ArrayLike<number>, vocab: number): void {
  for (let b = 0; b < tokens.length; b++) {
    const t = tokens[b];
    if (!Number.isInteger(t) || t < 0 || t >= vocab) throw new RangeError(`token id ${t} is outside the vocabulary 0..${vocab - 1}`);
  }
}

/** Why a shard without the table cannot take token ids. */
export function noEmbeddingError(spec: ShardSpec): Error {
  const why = spec.embed
    ? `tensor rank ${spec.tensor.rank} of the first stage holds no embedding (rank 0 embeds; pass its rows as { hidden, n })`
    : 'this shard is not in the first stage';
  return new Error(`forward: token ids given to a shard without the embedding: ${why}`);
}

/** Widens the table rows of `tokens` into out[b·hidden ...] (ids already checked). */
export function embedRows(out: Float32Array, table: Weight, tokens: ArrayLike<number>): void {
  const D = table.cols;
  for (let b = 0; b < tokens.length; b++) widenRow(out.subarray(b * D, (b + 1) * D), table, tokens[b]);
}

/** Row `r` of `w` widened to f32 into `dst` (cols values). */
export function widenRow(dst: Float32Array, w: Weight, r: number): void {
  const cols = w.cols;
  if (w.dtype === 'f32') {
    dst.set(new Float32Array(w.bytes.buffer, w.bytes.byteOffset + r * cols * 4, cols));
    return;
  }
  if (isQuantized(w.dtype) || isMlx(w.dtype) || w.dtype === 'fp8_e4m3') {
    dequantizeRow(w.dtype, w.bytes, cols, r, dst);
    return;
  }
  const src = new Uint16Array(w.bytes.buffer, w.bytes.byteOffset + r * cols * 2, cols);
  const table = w.dtype === 'f16' ? F16_TO_F32 : BF16_TO_F32;
  for (let i = 0; i < cols; i++) dst[i] = table[src[i]];
}
