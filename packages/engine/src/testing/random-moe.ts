/**
 * The mixture-of-experts and latent-attention parts of writeRandomModel's variants, in Hugging Face's
 * config fields and tensor names: Qwen3-MoE (`mlp.gate`, `mlp.experts.E.*_proj`), Mixtral
 * (`block_sparse_moe.gate`, `experts.E.w1/w2/w3`), DeepSeek V3 (MLA projections, `mlp.gate` with
 * `e_score_correction_bias`, routed and shared experts) and gpt-oss (`mlp.router` with bias, merged
 * input-major `experts.gate_up_proj` / `experts.down_proj` with biases, attention sinks).
 */

/** Writes one tensor of `shape` filled by `fill` / a linear layer's weight / an RMSNorm weight. */
export interface TensorMaker {
  add(name: string, shape: number[], fill: () => number): void;
  linear(name: string, rows: number, cols: number): void;
  norm(name: string, n: number): void;
  /** A uniform value in [-a, a]. */
  symmetric(a: number): number;
}

export interface MoeOptions {
  /** Routed experts. @default 8 */
  numExperts?: number;
  /** Experts per token. @default 2 (deepseek-v3: 3) */
  expertsPerToken?: number;
  /** Each routed expert's intermediate size (Mixtral: intermediate_size). @default 32 */
  moeIntermediateSize?: number;
  /** qwen3-moe: layers with a dense MLP (`mlp_only_layers`). @default [1] */
  mlpOnlyLayers?: number[];
  /** qwen3-moe / deepseek-v3 `norm_topk_prob`. @default true */
  normTopK?: boolean;
  /** deepseek-v3: dense layers first (`first_k_dense_replace`). @default 1 */
  firstKDense?: number;
  /** deepseek-v3: `q_lora_rank`; null = a plain q_proj. @default 32 */
  qLoraRank?: number | null;
  /** deepseek-v3: latent attention sizes (e.g. wide enough for 128-column FP8 blocks to split). @default kv 32, nope 16, rope 8, v 16 */
  mlaDims?: { kvLoraRank?: number; nopeDim?: number; ropeDim?: number; vDim?: number };
  /**
   * deepseek-v3 as Kimi K2 configures it: one expert group (n_group = topk_group = 1), yarn with
   * beta_fast = beta_slow = 1, routed_scaling_factor 2.827. @default false
   */
  kimiLayout?: boolean;
  /**
   * Give some experts identical router rows (and, for DeepSeek, correction biases), so their scores tie
   * exactly on every token and the choice among them is decided by top-k's tie rule. @default false
   */
  routerTies?: boolean;
}

/** Experts whose router rows copy expert 1's when `routerTies` is set. */
const TIED = [2, 5];

/** config.json fields of a MoE / MLA variant. */
export function moeConfigFields(variant: string, layers: number, hidden: number, o: MoeOptions): Record<string, unknown> {
  const experts = o.numExperts ?? 8;
  const inter = o.moeIntermediateSize ?? 32;
  if (variant === 'qwen3-moe') {
    return {
      num_experts: experts,
      num_experts_per_tok: o.expertsPerToken ?? 2,
      moe_intermediate_size: inter,
      decoder_sparse_step: 1,
      mlp_only_layers: (o.mlpOnlyLayers ?? [1]).filter((l) => l < layers),
      norm_topk_prob: o.normTopK ?? true,
      router_aux_loss_coef: 0.001,
      output_router_logits: false,
    };
  }
  if (variant === 'gpt-oss') {
    // Sliding and full layers alternate; a short window so it matters in tests; yarn without truncation as gpt-oss ships it.
    return {
      num_local_experts: experts,
      num_experts_per_tok: o.expertsPerToken ?? 2,
      experts_per_token: o.expertsPerToken ?? 2,
      swiglu_limit: 7.0,
      layer_types: Array.from({ length: layers }, (_, l) => (l % 2 ? 'full_attention' : 'sliding_attention')),
      sliding_window: 6,
      attention_bias: true,
      rope_theta: 150000,
      rope_scaling: { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 64, beta_fast: 32, beta_slow: 1, truncate: false },
      max_position_embeddings: 256,
      router_aux_loss_coef: 0.9,
      output_router_logits: false,
    };
  }
  if (variant === 'mixtral') {
    return { num_local_experts: experts, num_experts_per_tok: o.expertsPerToken ?? 2, router_aux_loss_coef: 0.02, output_router_logits: false, router_jitter_noise: 0 };
  }
  // deepseek-v3: yarn with the factor equal to max_position_embeddings / original, as in DeepSeek's own configs.
  const kimi = o.kimiLayout ?? false;
  return {
    n_routed_experts: experts,
    num_experts_per_tok: o.expertsPerToken ?? 3,
    moe_intermediate_size: inter,
    n_shared_experts: 1,
    n_group: kimi ? 1 : 4,
    topk_group: kimi ? 1 : 2,
    routed_scaling_factor: kimi ? 2.827 : 2.5,
    norm_topk_prob: o.normTopK ?? true,
    scoring_func: 'sigmoid',
    topk_method: 'noaux_tc',
    first_k_dense_replace: Math.min(o.firstKDense ?? 1, layers),
    moe_layer_freq: 1,
    q_lora_rank: o.qLoraRank === undefined ? 32 : o.qLoraRank,
    kv_lora_rank: o.mlaDims?.kvLoraRank ?? 32,
    qk_nope_head_dim: o.mlaDims?.nopeDim ?? 16,
    qk_rope_head_dim: o.mlaDims?.ropeDim ?? 8,
    v_head_dim: o.mlaDims?.vDim ?? 16,
    rope_interleave: true,
    rope_scaling: { type: 'yarn', factor: 4, original_max_position_embeddings: 64, beta_fast: kimi ? 1 : 32, beta_slow: 1, mscale: 1, mscale_all_dim: 1 },
    max_position_embeddings: 256,
    attention_bias: false,
    num_nextn_predict_layers: 0,
  };
}

/** Layer `l`'s attention tensors for deepseek-v3 (MLA). */
export function writeMlaAttention(t: TensorMaker, p: string, config: Record<string, unknown>, hidden: number, heads: number): void {
  const qLora = config.q_lora_rank as number | null;
  const kvLora = config.kv_lora_rank as number;
  const nope = config.qk_nope_head_dim as number;
  const rope = config.qk_rope_head_dim as number;
  const v = config.v_head_dim as number;
  if (qLora) {
    t.linear(`${p}.q_a_proj.weight`, qLora, hidden);
    t.norm(`${p}.q_a_layernorm.weight`, qLora);
    t.linear(`${p}.q_b_proj.weight`, heads * (nope + rope), qLora);
  } else t.linear(`${p}.q_proj.weight`, heads * (nope + rope), hidden);
  t.linear(`${p}.kv_a_proj_with_mqa.weight`, kvLora + rope, hidden);
  t.norm(`${p}.kv_a_layernorm.weight`, kvLora);
  t.linear(`${p}.kv_b_proj.weight`, heads * (nope + v), kvLora);
  t.linear(`${p}.o_proj.weight`, hidden, heads * v);
}

/** Whether layer `l` of a MoE variant is sparse (the rest write a dense `mlp`). */
export function isSparseLayer(variant: string, config: Record<string, unknown>, l: number): boolean {
  if (variant === 'qwen3-moe') return !(config.mlp_only_layers as number[]).includes(l);
  if (variant === 'deepseek-v3') return l >= (config.first_k_dense_replace as number);
  return true;
}

/** Layer `p`'s sparse MLP: router (+ DeepSeek's correction bias), routed experts, shared experts. */
export function writeMoeMlp(t: TensorMaker, p: string, variant: string, config: Record<string, unknown>, hidden: number, o: MoeOptions): void {
  const experts = o.numExperts ?? 8;
  if (variant === 'gpt-oss') return writeMergedMoe(t, `${p}.mlp`, experts, config.intermediate_size as number, hidden, o);
  const inter = variant === 'mixtral' ? (config.intermediate_size as number) : (config.moe_intermediate_size as number);
  const block = variant === 'mixtral' ? `${p}.block_sparse_moe` : `${p}.mlp`;
  const [gate, up, down] = variant === 'mixtral' ? ['w1', 'w3', 'w2'] : ['gate_proj', 'up_proj', 'down_proj'];

  const rows: number[][] = Array.from({ length: experts }, () => Array.from({ length: hidden }, () => t.symmetric(Math.sqrt(3 / hidden))));
  if (o.routerTies) for (const e of TIED) if (e < experts) rows[e] = rows[1];
  const flat = rows.flat();
  let i = 0;
  t.add(`${block}.gate.weight`, [experts, hidden], () => flat[i++]);
  if (variant === 'deepseek-v3') {
    const bias = Array.from({ length: experts }, () => t.symmetric(0.05));
    if (o.routerTies) for (const e of TIED) if (e < experts) bias[e] = bias[1];
    let j = 0;
    t.add(`${block}.gate.e_score_correction_bias`, [experts], () => bias[j++]);
  }
  for (let e = 0; e < experts; e++) {
    t.linear(`${block}.experts.${e}.${gate}.weight`, inter, hidden);
    t.linear(`${block}.experts.${e}.${up}.weight`, inter, hidden);
    t.linear(`${block}.experts.${e}.${down}.weight`, hidden, inter);
  }
  if (variant === 'deepseek-v3') {
    const shared = (config.n_shared_experts as number) * inter;
    t.linear(`${block}.shared_experts.gate_proj.weight`, shared, hidden);
    t.linear(`${block}.shared_experts.up_proj.weight`, shared, hidden);
    t.linear(`${block}.shared_experts.down_proj.weight`, hidden, shared);
  }
}

/** gpt-oss: router with bias, merged input-major expert tensors [E, in, out] with biases. */
function writeMergedMoe(t: TensorMaker, block: string, experts: number, inter: number, hidden: number, o: MoeOptions): void {
  const rows: number[][] = Array.from({ length: experts }, () => Array.from({ length: hidden }, () => t.symmetric(Math.sqrt(3 / hidden))));
  const bias = Array.from({ length: experts }, () => t.symmetric(0.2));
  if (o.routerTies) for (const e of TIED) if (e < experts) [rows[e], bias[e]] = [rows[1], bias[1]];
  const flat = rows.flat();
  let i = 0;
  let j = 0;
  t.add(`${block}.router.weight`, [experts, hidden], () => flat[i++]);
  t.add(`${block}.router.bias`, [experts], () => bias[j++]);
  t.add(`${block}.experts.gate_up_proj`, [experts, hidden, 2 * inter], () => t.symmetric(Math.sqrt(3 / hidden)));
  t.add(`${block}.experts.gate_up_proj_bias`, [experts, 2 * inter], () => t.symmetric(0.5));
  t.add(`${block}.experts.down_proj`, [experts, inter, hidden], () => t.symmetric(Math.sqrt(3 / inter)));
  t.add(`${block}.experts.down_proj_bias`, [experts, hidden], () => t.symmetric(0.5));
}
