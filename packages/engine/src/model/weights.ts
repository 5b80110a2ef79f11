/**
 * Loads the weights one shard needs, reading only their byte ranges: the layers [start, end) sliced
 * for one tensor rank, plus the embedding and/or final norm + LM head when the shard holds them.
 * Every shape and dtype is checked against config.json before anything is read.
 */
import type { ModelConfig } from '../config/config.js';
import type { Backend, Weight } from '../kernels/backend.js';
import { weightBytes } from '../kernels/wasm/formats.js';
import type { ShardSpec } from '../shard.js';
import type { TensorSlice } from './tensor-split.js';
import { type DenseMlpWeights, type PendingRead, type WeightSource, WeightPlanner, planDenseMlp } from './weight-planner.js';
import { planMla, type MlaWeights } from './weights-mla.js';
import { planMoe, type MoeWeights } from './weights-moe.js';

export { WeightPlanner, planDenseMlp, readPlanAsync, readPlanSync, type DenseMlpWeights, type PendingRead, type WeightSource } from './weight-planner.js';
export type { MlaWeights } from './weights-mla.js';
export type { ExpertWeights, MoeWeights } from './weights-moe.js';

/** Grouped-query attention (Llama family, Qwen, Mistral, gpt-oss). */
export interface GqaWeights {
  kind: 'gqa';
  /** [localHeads·headDim, hidden] */
  q: Weight;
  /** [localKv·headDim, hidden] */
  k: Weight;
  /** [localKv·headDim, hidden] */
  v: Weight;
  /** [localHeads·headDim], [localKv·headDim] ×2 — Qwen2, Llama with attention_bias. */
  qBias: Float32Array | null;
  kBias: Float32Array | null;
  vBias: Float32Array | null;
  /** [headDim] — Qwen3. */
  qNorm: Float32Array | null;
  kNorm: Float32Array | null;
  /** [hidden, localHeads·headDim] (input columns of this rank's heads). */
  o: Weight;
  /** [hidden], added once after the all-reduce — Llama/Qwen3 with attention_bias. */
  oBias: Float32Array | null;
  /** [localHeads] learned sink logits — gpt-oss. */
  sinks: Float32Array | null;
}


export interface LayerWeights {
  /** [hidden] */
  inputNorm: Float32Array;
  /** [hidden] */
  postNorm: Float32Array;
  attention: GqaWeights | MlaWeights;
  mlp: DenseMlpWeights | MoeWeights;
}

/** Every matrix of a layer (attention, MLP, router, experts), e.g. to count the bytes a shard streams. */
export function layerMatrices(layer: LayerWeights): Weight[] {
  const a = layer.attention;
  const m = layer.mlp;
  const attention = a.kind === 'gqa' ? [a.q, a.k, a.v, a.o] : [...(a.qA ? [a.qA] : []), a.q, a.kvA, ...a.kb, ...a.vb, a.o];
  const mlp = m.kind === 'dense' ? [m.gate, m.up, m.down] : [m.router, ...m.experts.flatMap((e) => [e.gate, e.up, e.down]), ...(m.shared ? [m.shared.gate, m.shared.up, m.shared.down] : [])];
  return [...attention, ...mlp];
}

export interface ShardWeights {
  /**
   * [vocab, hidden] the whole token embedding — tensor rank 0 of the embed stage only: it embeds for
   * its stage-0 peers, which are fed its rows (a split table would need an all-reduce per step).
   */
  embed: Weight | null;
  layers: LayerWeights[];
  /** [hidden] — head shards only. */
  finalNorm: Float32Array | null;
  /** [vocabSlice, hidden] — head shards only (the embedding itself when tied). */
  head: Weight | null;
}

/** The buffers of one shard's weights (allocated, still empty) and the reads that fill them. */
export function planShardWeights(
  ckpt: WeightSource,
  config: ModelConfig,
  spec: ShardSpec,
  slice: TensorSlice,
  backend: Backend,
  options: { sizing?: boolean } = {},
): { weights: ShardWeights; reads: PendingRead[] } {
  const rd = new WeightPlanner(ckpt, backend, config.weightQuant, options);
  const { hiddenSize: D, headDim: hd, numHeads: H, numKvHeads: KV, intermediateSize: I, vocabSize: V } = config;
  const qRows: [number, number] = [slice.heads[0] * hd, slice.heads[1] * hd];
  const kvRows: [number, number] = [slice.kvHeads[0] * hd, slice.kvHeads[1] * hd];

  const layers: LayerWeights[] = [];
  for (let l = spec.layers[0]; l < spec.layers[1]; l++) {
    const p = `model.layers.${l}`;
    const a = `${p}.self_attn`;
    const attention: GqaWeights | MlaWeights = config.mla
      ? planMla(rd, config, config.mla, slice, a)
      : {
          kind: 'gqa',
          q: rd.matrix(`${a}.q_proj.weight`, H * hd, D, qRows),
          k: rd.matrix(`${a}.k_proj.weight`, KV * hd, D, kvRows),
          v: rd.matrix(`${a}.v_proj.weight`, KV * hd, D, kvRows),
          qBias: config.qkvBias ? rd.vector(`${a}.q_proj.bias`, H * hd, qRows) : null,
          kBias: config.qkvBias ? rd.vector(`${a}.k_proj.bias`, KV * hd, kvRows) : null,
          vBias: config.qkvBias ? rd.vector(`${a}.v_proj.bias`, KV * hd, kvRows) : null,
          qNorm: config.caps.qkNorm ? rd.vector(`${a}.q_norm.weight`, hd) : null,
          kNorm: config.caps.qkNorm ? rd.vector(`${a}.k_norm.weight`, hd) : null,
          o: rd.matrix(`${a}.o_proj.weight`, D, H * hd, [0, D], qRows),
          oBias: config.oBias ? rd.vector(`${a}.o_proj.bias`, D) : null,
          sinks: config.attentionSinks ? rd.vector(`${a}.sinks`, H, slice.heads) : null,
        };
    layers.push({
      inputNorm: rd.vector(`${p}.input_layernorm.weight`, D),
      attention,
      postNorm: rd.vector(`${p}.post_attention_layernorm.weight`, D),
      mlp: config.moe?.sparse[l] ? planMoe(rd, config, config.moe, slice, p) : planDenseMlp(rd, `${p}.mlp`, I, D, slice.ffn),
    });
  }

  // The embedding is read row by row (token lookup), so it keeps the row-major layout, and so does a
  // tied LM head that shares its rows.
  const embed = spec.embed && slice.rank === 0 ? rd.matrix('model.embed_tokens.weight', V, D, [0, V], [0, D], false) : null;
  let head: Weight | null = null;
  let finalNorm: Float32Array | null = null;
  if (spec.head) {
    finalNorm = rd.vector('model.norm.weight', D);
    // Rank 0's vocabulary slice starts at row 0: a tied head there is the table's leading rows, not a second read.
    if (config.tieWordEmbeddings) head = embed ? leadingRows(embed, slice.vocab[1]) : rd.matrix('model.embed_tokens.weight', V, D, slice.vocab);
    else head = rd.matrix('lm_head.weight', V, D, slice.vocab);
  }
  return { weights: { embed, layers, finalNorm, head }, reads: rd.reads };
}


/** The first `rows` rows of a row-major weight, sharing its bytes (the whole weight when it has no more). */
function leadingRows(w: Weight, rows: number): Weight {
  if (rows === w.rows) return w;
  return { dtype: w.dtype, rows, cols: w.cols, bytes: w.bytes.subarray(0, weightBytes(w.dtype, rows, w.cols)) };
}
