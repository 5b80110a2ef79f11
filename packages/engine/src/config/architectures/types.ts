/**
 * What differs between the decoder architectures the engine runs. The forward pass reads these
 * flags; it never branches on an architecture name. One small file per architecture fills one in.
 */
export interface ArchitectureCaps {
  /** The `architectures[0]` value in config.json. */
  name: string;
  /**
   * Attention biases: `'qkv'` = always on q/k/v only (Qwen2); `'config'` = on q/k/v/o when config.json
   * says `attention_bias: true` (Llama, Qwen3); `'none'`.
   */
  attentionBias: 'qkv' | 'config' | 'none';
  /** RMSNorm over each head of q and k before RoPE (`*.self_attn.{q,k}_norm.weight`). */
  qkNorm: boolean;
  /** `rope_scaling` types this architecture accepts besides none/default. */
  ropeScaling: readonly string[];
  /**
   * Honour `sliding_window` from config.json: `'config'` on every layer (Mistral); `'layer_types'` on
   * the layers config.json's `layer_types` marks `sliding_attention` (gpt-oss).
   */
  slidingWindow: 'config' | 'never' | 'use_sliding_window' | 'layer_types';
  /**
   * `'mla'`: DeepSeek's multi-head latent attention (low-rank q and kv projections, a compressed
   * per-token latent in the cache). @default 'gqa'
   */
  attention?: 'gqa' | 'mla';
  /** A learned per-head logit that joins every softmax and is then dropped (`self_attn.sinks`, gpt-oss). */
  attentionSinks?: boolean;
  /** Mixture-of-experts MLP layers, when the architecture has them. */
  moe?: MoeCaps;
}

/** How an architecture's config.json describes its experts, how it routes, and where the tensors live. */
export interface MoeCaps {
  /** config.json field holding the number of routed experts. */
  expertsField: 'num_experts' | 'num_local_experts' | 'n_routed_experts';
  /** config.json field holding one routed expert's intermediate size. */
  intermediateField: 'moe_intermediate_size' | 'intermediate_size';
  /**
   * - `'softmax'`: softmax over all router logits, then top-k (Qwen3-MoE, Mixtral);
   * - `'sigmoid-grouped'`: sigmoid scores, top-k chosen on scores + `e_score_correction_bias` among the
   *   best `topk_group` of `n_group` groups, weights from the plain scores (DeepSeek V3);
   * - `'topk-softmax'`: top-k router logits (router with bias), softmax over the chosen (gpt-oss).
   */
  routing: 'softmax' | 'sigmoid-grouped' | 'topk-softmax';
  /** Renormalise the chosen weights to sum 1: always (Mixtral), never, or per `norm_topk_prob`. */
  normTopK: 'always' | 'never' | 'config';
  /**
   * Which layers are sparse: every one; `decoder_sparse_step` + `mlp_only_layers` (Qwen3-MoE);
   * `first_k_dense_replace` + `moe_layer_freq` (DeepSeek). The others have a dense MLP of intermediate_size.
   */
  sparseLayers: 'all' | 'decoder-sparse-step' | 'first-k-dense';
  /** Shared experts always run beside the routed ones (`n_shared_experts` × expert size, DeepSeek). */
  sharedExperts: boolean;
  /**
   * Expert activation: `'swiglu'` = down(silu(gate)·up); `'clamped-swiglu'` = gpt-oss's variant
   * (gate ≤ 7, |up| ≤ 7, gate·σ(1.702·gate)·(up + 1)) with biases on both projections.
   */
  activation: 'swiglu' | 'clamped-swiglu';
  /** Tensor names under `model.layers.N.`: the MoE module, its router and its experts. */
  tensors: {
    /** e.g. `mlp`, `block_sparse_moe` */
    block: string;
    /** e.g. `gate`, `router` */
    router: string;
    /**
     * `'per-expert'`: `experts.E.{gate,up,down}.weight`, nn.Linear layout [out, in];
     * `'merged'`: `experts.gate_up_proj` [experts, hidden, 2·I] (gate and up interleaved by column) and
     * `experts.down_proj` [experts, I, hidden], input-major, with `_bias` tensors (gpt-oss).
     */
    layout: 'per-expert' | 'merged';
    /** Per-expert projection names: gate, up, down (e.g. `gate_proj`/`up_proj`/`down_proj`, Mixtral `w1`/`w3`/`w2`). */
    projections: readonly [string, string, string];
  };
}
