/**
 * The weights of one multi-head latent attention layer (DeepSeek V3) for one tensor rank: its heads'
 * rows of the query and key/value up-projections and its heads' columns of o_proj; the down-projections
 * to the latents (and their norms) are whole on every rank, since each head attends over the whole latent.
 */
import type { MlaConfig, ModelConfig } from '../config/config.js';
import type { Weight } from '../kernels/backend.js';
import { rowBytes } from '../kernels/wasm/formats.js';
import type { TensorSlice } from './tensor-split.js';
import type { WeightPlanner } from './weights.js';

export interface MlaWeights {
  kind: 'mla';
  /** [qLoraRank, hidden] and its RMSNorm [qLoraRank]; null with a plain q_proj. */
  qA: Weight | null;
  qANorm: Float32Array | null;
  /** [localHeads·(nope+rope), qLoraRank or hidden]: q_b_proj, or q_proj. */
  q: Weight;
  /** [kvLoraRank + rope, hidden]: the latent and the shared RoPE key. */
  kvA: Weight;
  /** [kvLoraRank] */
  kvANorm: Float32Array;
  /**
   * [localHeads·(nope+v), kvLoraRank], kept in its row-major storage layout: per head, `uk[h]` (its nope
   * rows: latent → key) and `uv[h]` (its v rows: latent → value) are views of it.
   */
  kvB: Weight;
  uk: Weight[];
  uv: Weight[];
  /** [hidden, localHeads·v] */
  o: Weight;
}

export function planMla(rd: WeightPlanner, config: ModelConfig, m: MlaConfig, slice: TensorSlice, a: string): MlaWeights {
  const { hiddenSize: D, numHeads: H } = config;
  const [h0, h1] = slice.heads;
  const qk = m.nopeDim + m.ropeDim;
  const kvw = m.nopeDim + m.vDim;
  const qRows: [number, number] = [h0 * qk, h1 * qk];
  const kvB = rd.matrix(`${a}.kv_b_proj.weight`, H * kvw, m.kvLoraRank, [h0 * kvw, h1 * kvw], [0, m.kvLoraRank], false);
  const rb = rowBytes(kvB.dtype, m.kvLoraRank);
  const view = (row: number, rows: number): Weight => ({ dtype: kvB.dtype, rows, cols: m.kvLoraRank, bytes: kvB.bytes.subarray(row * rb, (row + rows) * rb) });
  const heads = Array.from({ length: h1 - h0 }, (_, h) => h);
  return {
    kind: 'mla',
    qA: m.qLoraRank ? rd.matrix(`${a}.q_a_proj.weight`, m.qLoraRank, D, [0, m.qLoraRank]) : null,
    qANorm: m.qLoraRank ? rd.vector(`${a}.q_a_layernorm.weight`, m.qLoraRank) : null,
    q: m.qLoraRank ? rd.matrix(`${a}.q_b_proj.weight`, H * qk, m.qLoraRank, qRows) : rd.matrix(`${a}.q_proj.weight`, H * qk, D, qRows),
    kvA: rd.matrix(`${a}.kv_a_proj_with_mqa.weight`, m.kvLoraRank + m.ropeDim, D, [0, m.kvLoraRank + m.ropeDim]),
    kvANorm: rd.vector(`${a}.kv_a_layernorm.weight`, m.kvLoraRank),
    kvB,
    uk: heads.map((h) => view(h * kvw, m.nopeDim)),
    uv: heads.map((h) => view(h * kvw + m.nopeDim, m.vDim)),
    o: rd.matrix(`${a}.o_proj.weight`, D, H * m.vDim, [0, D], [h0 * m.vDim, h1 * m.vDim]),
  };
}
