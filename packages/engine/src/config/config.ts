/**
 * Reads config.json and generation_config.json into one validated, normalised `ModelConfig`.
 * Every defect is a ModelFormatError naming the file and field; an architecture or option the
 * engine does not run is an UnsupportedModelError naming it.
 */
import { type WeightQuant, readWeightQuant } from './quantization.js';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ModelFormatError, UnsupportedModelError } from '../errors.js';
import { lookupArchitecture, supportedArchitectures } from './architectures/registry.js';
import type { ArchitectureCaps } from './architectures/types.js';
import { configFields, type ConfigFields } from './fields.js';
import { readMlaConfig, yarnMscale, type MlaConfig } from './mla-config.js';
import { readMoeConfig, type MoeConfig } from './moe-config.js';

export type { MlaConfig, MoeConfig };

export interface RopeScaling {
  type: 'llama3' | 'linear' | 'yarn';
  factor: number;
  /** llama3 only. */
  lowFreqFactor: number;
  highFreqFactor: number;
  /** llama3 and yarn. */
  originalMaxPositionEmbeddings: number;
  /** yarn only (Hugging Face's `_compute_yarn_parameters`). */
  yarn?: YarnParameters;
}

export interface YarnParameters {
  betaFast: number;
  betaSlow: number;
  /** Multiplies cos and sin (so q·k by its square). */
  attentionFactor: number;
  /** Round the correction range outwards to whole dimensions (default true; gpt-oss says false). */
  truncate: boolean;
  /** `mscale_all_dim` (DeepSeek: the softmax scale's yarn correction), 0 when absent. */
  mscaleAllDim: number;
}

export interface ModelConfig {
  dir: string;
  architecture: string;
  caps: ArchitectureCaps;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  vocabSize: number;
  rmsNormEps: number;
  ropeTheta: number;
  ropeScaling: RopeScaling | null;
  maxPositionEmbeddings: number;
  tieWordEmbeddings: boolean;
  /** q/k/v projections have bias tensors. */
  qkvBias: boolean;
  /** o_proj has a bias tensor. */
  oBias: boolean;
  /** Attend only to the last `slidingWindow` positions (Mistral), or null. */
  slidingWindow: number | null;
  /** Per layer: whether `slidingWindow` applies (gpt-oss alternates); absent = every layer. */
  slidingLayers?: boolean[];
  /** Mixture-of-experts layers (Qwen3-MoE, Mixtral, DeepSeek V3, gpt-oss); absent = dense. */
  moe?: MoeConfig;
  /** Multi-head latent attention (DeepSeek V3); absent = grouped-query attention. */
  mla?: MlaConfig;
  /** Learned per-head attention sinks (gpt-oss). */
  attentionSinks?: boolean;
  /** The weight quantization `quantization_config` declares (FP8 blocks, compressed-tensors INT4); absent = none declared. */
  weightQuant?: WeightQuant;
  /** `quantization_config.quant_method` as config.json names it (e.g. mxfp4, fp8, awq); absent when it names none. */
  quantMethod?: string;
  /** Stop token ids: generation_config.json `eos_token_id`, else config.json's. */
  eosTokenIds: number[];
  bosTokenId: number | null;
}

function readJson(path: string, required: boolean): Record<string, unknown> | null {
  const name = path.split('/').pop()!;
  if (!existsSync(path)) {
    if (required) throw new ModelFormatError(`${path}: file not found`, path);
    return null;
  }
  let v: unknown;
  try {
    v = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ModelFormatError(`${name}: not valid JSON (${(err as Error).message})`, path);
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new ModelFormatError(`${name}: expected a JSON object`, path);
  return v as Record<string, unknown>;
}

function ids(v: unknown): number[] {
  if (typeof v === 'number') return [v];
  if (Array.isArray(v)) return v.filter((x): x is number => typeof x === 'number');
  return [];
}

/**
 * Loads and validates `dir/config.json` (+ `generation_config.json` when present). A model path that
 * may be a GGUF file goes through format/model-files.ts `loadModelConfig`, which picks the reader.
 */
export function loadConfigJson(dir: string): ModelConfig {
  const path = join(dir, 'config.json');
  return modelConfigFromJson(readJson(path, true)!, { path, dir, generation: readJson(join(dir, 'generation_config.json'), false) });
}

/**
 * Validates a parsed config.json (for a config given as a file of its own, e.g. to plan a model
 * whose weights are elsewhere). `path` names the file in errors; `dir` is where the weights would be.
 */
export function modelConfigFromJson(c: Record<string, unknown>, o: { path: string; dir?: string; generation?: Record<string, unknown> | null }): ModelConfig {
  const { path } = o;
  const dir = o.dir ?? path.replace(/\/[^/]*$/, '');
  const gen = o.generation ?? null;

  const archs = c.architectures;
  const architecture = Array.isArray(archs) && typeof archs[0] === 'string' ? archs[0] : undefined;
  if (!architecture) throw new ModelFormatError('config.json: missing architectures[0]', path, 'architectures');
  const caps = lookupArchitecture(architecture);
  if (!caps) {
    throw new UnsupportedModelError(
      `unsupported architecture ${architecture} in ${path} (supported: ${supportedArchitectures().join(', ')})`,
    );
  }

  const weightQuant = readWeightQuant(c, path);
  const f = configFields(c, path);
  const int = f.int;
  const num = (field: string, fallback: number) => f.num(field, fallback);

  const hiddenSize = int('hidden_size');
  const numLayers = int('num_hidden_layers');
  const numHeads = int('num_attention_heads');
  const mla = caps.attention === 'mla' ? readMlaConfig(f) : undefined;
  // Latent attention has one latent per token instead of KV heads: every head is its own "KV head".
  const numKvHeads = mla ? numHeads : int('num_key_value_heads', numHeads);
  const headDim = mla ? mla.nopeDim + mla.ropeDim : c.head_dim == null ? hiddenSize / numHeads : int('head_dim');
  if (!Number.isInteger(headDim) || headDim % 2) {
    throw new ModelFormatError(`config.json: head_dim ${headDim} must be an even integer`, path, 'head_dim');
  }
  if (numHeads % numKvHeads) {
    throw new ModelFormatError(`config.json: num_attention_heads ${numHeads} is not a multiple of num_key_value_heads ${numKvHeads}`, path, 'num_key_value_heads');
  }
  const moe = caps.moe ? readMoeConfig(f, caps.moe, numLayers) : undefined;
  const act = c.hidden_act ?? 'silu';
  if (act !== 'silu') throw new UnsupportedModelError(`config.json: hidden_act ${JSON.stringify(act)} is not supported (only silu) in ${path}`);
  if (c.mlp_bias === true) throw new UnsupportedModelError(`config.json: mlp_bias=true is not supported in ${path}`);

  const configBias = caps.attentionBias === 'config' && c.attention_bias === true;
  const qkvBias = caps.attentionBias === 'qkv' || configBias;
  const oBias = configBias;

  let ropeScaling: RopeScaling | null = null;
  const rs = c.rope_scaling as Record<string, unknown> | null | undefined;
  if (rs && typeof rs === 'object') {
    const type = String(rs.rope_type ?? rs.type ?? 'default');
    if (type !== 'default') {
      if (!caps.ropeScaling.includes(type)) {
        throw new UnsupportedModelError(`config.json: rope_scaling type ${type} is not supported for ${architecture} in ${path}`);
      }
      const f = (k: string, d?: number): number => {
        const v = rs[k] ?? d;
        if (typeof v !== 'number' || !(v > 0)) {
          throw new ModelFormatError(`config.json: rope_scaling.${k} must be a positive number`, path, `rope_scaling.${k}`);
        }
        return v;
      };
      if (type === 'llama3') {
        ropeScaling = {
          type: 'llama3',
          factor: f('factor'),
          lowFreqFactor: f('low_freq_factor'),
          highFreqFactor: f('high_freq_factor'),
          originalMaxPositionEmbeddings: f('original_max_position_embeddings'),
        };
      } else if (type === 'yarn') ropeScaling = yarnScaling(rs, f, num('max_position_embeddings', 2048));
      else ropeScaling = { type: 'linear', factor: f('factor'), lowFreqFactor: 0, highFreqFactor: 0, originalMaxPositionEmbeddings: 0 };
    }
  }

  let slidingWindow: number | null = null;
  let slidingLayers: boolean[] | undefined;
  const sw = typeof c.sliding_window === 'number' ? c.sliding_window : null;
  if (caps.slidingWindow === 'config') slidingWindow = sw;
  else if (caps.slidingWindow === 'layer_types') ({ slidingWindow, slidingLayers } = layerTypes(f, numLayers, sw));
  else if (caps.slidingWindow === 'use_sliding_window' && c.use_sliding_window === true && sw !== null) {
    throw new UnsupportedModelError(`config.json: use_sliding_window=true is not supported for ${architecture} in ${path}`);
  }

  const qc = c.quantization_config as Record<string, unknown> | null | undefined;
  const quantMethod = qc && typeof qc === 'object' && typeof qc.quant_method === 'string' ? qc.quant_method : undefined;
  const eosTokenIds = ids(gen?.eos_token_id).length ? ids(gen?.eos_token_id) : ids(c.eos_token_id);
  const bos = ids(gen?.bos_token_id ?? c.bos_token_id);

  return {
    dir,
    architecture,
    caps,
    hiddenSize,
    intermediateSize: int('intermediate_size'),
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    vocabSize: int('vocab_size'),
    rmsNormEps: num('rms_norm_eps', 1e-6),
    ropeTheta: num('rope_theta', 10000),
    ropeScaling,
    maxPositionEmbeddings: int('max_position_embeddings', 2048),
    tieWordEmbeddings: c.tie_word_embeddings === true,
    qkvBias,
    oBias,
    slidingWindow,
    ...(slidingLayers && { slidingLayers }),
    ...(moe && { moe }),
    ...(mla && { mla }),
    ...(caps.attentionSinks && { attentionSinks: true }),
    ...(weightQuant && { weightQuant }),
    ...(quantMethod && { quantMethod }),
    eosTokenIds,
    bosTokenId: bos.length ? bos[0] : null,
  };
}

/** Hugging Face's yarn parameters; `factor` as rope_scaling states it (HF warns, and keeps it, when it disagrees with the context lengths). */
function yarnScaling(rs: Record<string, unknown>, f: (k: string, d?: number) => number, maxPositions: number): RopeScaling {
  const factor = f('factor');
  const mscale = typeof rs.mscale === 'number' ? rs.mscale : 0;
  const mscaleAllDim = typeof rs.mscale_all_dim === 'number' ? rs.mscale_all_dim : 0;
  const given = typeof rs.attention_factor === 'number' ? rs.attention_factor : null;
  const attentionFactor = given ?? (mscale && mscaleAllDim ? yarnMscale(factor, mscale) / yarnMscale(factor, mscaleAllDim) : yarnMscale(factor, 1));
  return {
    type: 'yarn',
    factor,
    lowFreqFactor: 0,
    highFreqFactor: 0,
    originalMaxPositionEmbeddings: typeof rs.original_max_position_embeddings === 'number' ? f('original_max_position_embeddings') : maxPositions,
    yarn: {
      betaFast: typeof rs.beta_fast === 'number' && rs.beta_fast ? rs.beta_fast : 32,
      betaSlow: typeof rs.beta_slow === 'number' && rs.beta_slow ? rs.beta_slow : 1,
      attentionFactor,
      truncate: rs.truncate !== false,
      mscaleAllDim,
    },
  };
}

/** `layer_types` (`sliding_attention` / `full_attention` per layer) with `sliding_window`. */
function layerTypes(f: ConfigFields, numLayers: number, window: number | null): { slidingWindow: number | null; slidingLayers: boolean[] } {
  const types = f.get('layer_types');
  if (!Array.isArray(types) || types.length !== numLayers || types.some((t) => t !== 'sliding_attention' && t !== 'full_attention')) {
    throw new ModelFormatError(`config.json: layer_types must list sliding_attention or full_attention for each of the ${numLayers} layers`, f.path, 'layer_types');
  }
  const slidingLayers = types.map((t) => t === 'sliding_attention');
  if (slidingLayers.some(Boolean) && !(window && window > 0)) throw new ModelFormatError('config.json: sliding_window must be a positive integer when layer_types has sliding_attention', f.path, 'sliding_window');
  return { slidingWindow: window, slidingLayers };
}
