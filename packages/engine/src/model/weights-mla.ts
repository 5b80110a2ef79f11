/**
 * The weights of one multi-head latent attention layer (DeepSeek V3) for one tensor rank: its heads'
 * rows of the query and key/value up-projections and its heads' columns of o_proj; the down-projections
 * to the latents (and their norms) are whole on every rank, since each head attends over the whole latent.
 *
 * Each head's part of kv_b_proj is held the way the attention uses it (and the way llama.cpp's GGUF
 * stores it, `attn_k_b` / `attn_v_b`): `kb[h]` [kvLoraRank, nope] = head h's key rows transposed, so
 * absorbing them into the query is one matvec, and `vb[h]` [v, kvLoraRank] = its value rows.
 */
import type { MlaConfig, ModelConfig } from '../config/config.js';
import type { Weight } from '../kernels/backend.js';
import type { TensorSlice } from './tensor-split.js';
import type { WeightPlanner } from './weight-planner.js';

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
  /** Per local head: [kvLoraRank, nope] (latent ← key, transposed). */
  kb: Weight[];
  /** Per local head: [v, kvLoraRank] (latent → value). */
  vb: Weight[];
  /** [hidden, localHeads·v] */
  o: Weight;
}

export function planMla(rd: WeightPlanner, config: ModelConfig, m: MlaConfig, slice: TensorSlice, a: string): MlaWeights {
  const { hiddenSize: D, numHeads: H } = config;
  const [h0, h1] = slice.heads;
  const qk = m.nopeDim + m.ropeDim;
  const { kb, vb } = rd.has(`${a}.kv_b_proj.weight`)
    ? rd.kvBHeads(`${a}.kv_b_proj.weight`, H, m, slice.heads)
    : rd.has(`${a}.embed_q.weight`)
      ? splitKvB(rd, a, H, m, slice.heads, ['embed_q', 'unembed_out'])
      : splitKvB(rd, a, H, m, slice.heads, ['k_b_proj', 'v_b_proj']);
  return {
    kind: 'mla',
    qA: m.qLoraRank ? rd.matrix(`${a}.q_a_proj.weight`, m.qLoraRank, D, [0, m.qLoraRank]) : null,
    qANorm: m.qLoraRank ? rd.vector(`${a}.q_a_layernorm.weight`, m.qLoraRank) : null,
    q: m.qLoraRank ? rd.matrix(`${a}.q_b_proj.weight`, H * qk, m.qLoraRank, [h0 * qk, h1 * qk]) : rd.matrix(`${a}.q_proj.weight`, H * qk, D, [h0 * qk, h1 * qk]),
    kvA: rd.matrix(`${a}.kv_a_proj_with_mqa.weight`, m.kvLoraRank + m.ropeDim, D, [0, m.kvLoraRank + m.ropeDim]),
    kvANorm: rd.vector(`${a}.kv_a_layernorm.weight`, m.kvLoraRank),
    kb,
    vb,
    o: rd.matrix(`${a}.o_proj.weight`, D, H * m.vDim, [0, D], [h0 * m.vDim, h1 * m.vDim]),
  };
}

/**
 * kv_b already split per head, [H, kvLora, nope] for the keys and [H, v, kvLora] for the values: llama.cpp's
 * attn_k_b / attn_v_b (a GGUF's `k_b_proj` / `v_b_proj`), or mlx-lm's `embed_q` / `unembed_out` (its
 * sanitize splits kv_b_proj so since 2026-02; each MLX-quantized per head along its input, kept packed).
 * One slab per head each.
 */
function splitKvB(rd: WeightPlanner, a: string, H: number, m: MlaConfig, [h0, h1]: [number, number], [k, v]: [string, string]): { kb: Weight[]; vb: Weight[] } {
  const kb: Weight[] = [];
  const vb: Weight[] = [];
  for (let h = h0; h < h1; h++) {
    kb.push(rd.slab(`${a}.${k}.weight`, [H, m.kvLoraRank, m.nopeDim], h));
    vb.push(rd.slab(`${a}.${v}.weight`, [H, m.vDim, m.kvLoraRank], h));
  }
  return { kb, vb };
}
