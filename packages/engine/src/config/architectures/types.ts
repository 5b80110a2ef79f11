/**
 * What differs between the Llama-family architectures the engine runs. The forward pass reads these
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
  /** Honour `sliding_window` from config.json (Mistral). */
  slidingWindow: 'config' | 'never' | 'use_sliding_window';
}
