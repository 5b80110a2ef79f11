/**
 * Multi-head latent attention (DeepSeek V2/V3, Kimi K2) from config.json. Each head's query and key are
 * a no-RoPE part (`qk_nope_head_dim`) and a RoPE part (`qk_rope_head_dim`, one key shared by all heads);
 * keys' no-RoPE parts and values are expanded from a per-token latent of `kv_lora_rank` values.
 */
import { UnsupportedModelError } from '../errors.js';
import type { ConfigFields } from './fields.js';

export interface MlaConfig {
  /** Rank of the query down-projection; 0 = a plain q_proj (`q_lora_rank: null`, DeepSeek V2 Lite). */
  qLoraRank: number;
  kvLoraRank: number;
  nopeDim: number;
  ropeDim: number;
  vDim: number;
  /** RoPE rotates adjacent pairs (2i, 2i+1) of the RoPE part (`rope_interleave`, default true). */
  ropeInterleave: boolean;
  /** Softmax scale: (nope + rope)^-½, times yarn's mscale(factor, mscale_all_dim)² when rope_scaling says so. */
  softmaxScale: number;
}

/** Values one token adds to one layer's cache: the normalised latent and the rotated shared RoPE key. */
export function mlaLatentWidth(m: Pick<MlaConfig, 'kvLoraRank' | 'ropeDim'>): number {
  return m.kvLoraRank + m.ropeDim;
}

/** Yarn's magnitude correction: 0.1·m·ln(factor) + 1 for factors above 1. */
export function yarnMscale(factor: number, m: number): number {
  return factor <= 1 ? 1 : 0.1 * m * Math.log(factor) + 1;
}

export function readMlaConfig(f: ConfigFields): MlaConfig {
  if (f.bool('attention_bias', false)) throw new UnsupportedModelError(`config.json: attention_bias=true with latent attention is not supported in ${f.path}`);
  const nopeDim = f.int('qk_nope_head_dim');
  const ropeDim = f.int('qk_rope_head_dim');
  if (ropeDim % 2) throw new UnsupportedModelError(`config.json: qk_rope_head_dim ${ropeDim} must be even in ${f.path}`);
  let softmaxScale = 1 / Math.sqrt(nopeDim + ropeDim);
  const rs = f.get('rope_scaling') as Record<string, unknown> | null | undefined;
  if (rs && typeof rs === 'object' && typeof rs.factor === 'number' && typeof rs.mscale_all_dim === 'number' && rs.mscale_all_dim) {
    const m = yarnMscale(rs.factor, rs.mscale_all_dim);
    softmaxScale *= m * m;
  }
  return {
    qLoraRank: f.has('q_lora_rank') ? f.int('q_lora_rank') : 0,
    kvLoraRank: f.int('kv_lora_rank'),
    nopeDim,
    ropeDim,
    vDim: f.int('v_head_dim'),
    ropeInterleave: f.bool('rope_interleave', true),
    softmaxScale,
  };
}
