import { InputError } from './errors.js';
import { type WeightFormat, type WeightRole, forcedBits, formatFromConfig } from './quantization.js';

/**
 * Model sizing: a Hugging Face config.json (dense, MoE, MLA) becomes a list of weights with roles,
 * and from those the per-layer numbers the cost model needs. Exact tensor sizes from safetensors
 * headers (see loader.ts) go through the same summary, so both paths agree on what each byte is.
 */

/** One weight (or group of identical weights) of the model. */
export interface WeightEntry {
  /** HF module name, e.g. `model.layers.3.mlp.experts.0.gate_proj` (representative for a group). */
  name: string;
  role: WeightRole;
  /** Decoder layer index, or -1 for the embedding side (first stage), -2 for the head (last stage). */
  layer: number;
  bytes: number;
  /** Parameters (0 when only bytes are known, e.g. from safetensors). */
  params: number;
}

/** What one decoder layer costs; bytes split by how tensor parallel divides them. */
export interface LayerSpec {
  index: number;
  kind: 'dense' | 'moe';
  /** Every weight byte in the layer. */
  bytes: number;
  /** Weight bytes read for one decoded token (routed experts scaled by experts_per_tok / experts). */
  activeBytes: number;
  /** Split by query heads under tensor parallel: q/o projections (MLA: q_b, kv_b, o). */
  headBytes: number;
  /** Split by key/value heads: k/v projections. */
  kvHeadBytes: number;
  /** Split by intermediate columns: dense MLP, routed and shared experts. Total and read per token. */
  mlpBytes: number;
  mlpActiveBytes: number;
  /** Held whole by every tensor-parallel member: norms, routers, MLA down-projections. */
  replicatedBytes: number;
  /** Floating-point operations per token in the weights (2 per active parameter). */
  flopsPerToken: number;
}

export interface ModelSpec {
  name: string;
  architecture: string;
  numLayers: number;
  hiddenSize: number;
  vocabSize: number;
  numHeads: number;
  numKvHeads: number;
  attention: 'gqa' | 'mla';
  moe?: { experts: number; expertsPerToken: number; sharedExperts: number; moeLayers: number };
  layers: LayerSpec[];
  /** Input embedding bytes (first stage) plus anything outside the decoder layers. */
  embeddingBytes: number;
  /** Output head bytes (last stage); with tied embeddings the last stage needs its own copy. */
  lmHeadBytes: number;
  tiedEmbeddings: boolean;
  /** KV-cache bytes per token per layer for all KV heads (f32, as the engine keeps it; MLA: the latent). */
  kvBytesPerTokenPerLayer: number;
  /** MLA caches one latent per token that every tensor-parallel member needs whole. */
  kvReplicated: boolean;
  /** Attention flops per token per cached position per layer (scores and weighted sum). */
  attentionFlopsPerPosition: number;
  /** Bytes of the hidden state of one token between stages and in all-reduces (bf16). */
  activationBytesPerToken: number;
  /** Widest per-layer intermediate (MLP or experts x experts_per_tok), for workspace sizing. */
  maxIntermediate: number;
  totalBytes: number;
  activeBytesPerToken: number;
  totalParams: number;
  activeParams: number;
  /** How bits were chosen, e.g. "4-bit MLX, group 64 = 4.5 bits/weight". */
  format: string;
  /** Where byte counts came from. */
  bytesFrom: 'config' | 'safetensors';
}

export interface ModelOptions {
  /** Force bits per weight (`--bits`), overriding the config's quantization and safetensors sizes. */
  bits?: number;
  /** Display name; defaults to the config's `_name_or_path` or architecture. */
  name?: string;
}

const SOURCE = 'model config';
/** The engine keeps its KV cache in f32 (engine: kvCacheValuesPerToken values per token per layer). */
const KV_BYTES = 4;
const ACT_BYTES = 2; // bf16 activations

/** The numbers that describe the architecture, validated. */
interface Shape {
  architecture: string;
  layers: number;
  hidden: number;
  vocab: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  tied: boolean;
  mla?: { qLoraRank: number; kvLoraRank: number; nope: number; rope: number; v: number };
  moe?: { experts: number; perToken: number; intermediate: number; sharedIntermediate: number; sharedGate: boolean; isMoe: (i: number) => boolean };
}

/** Builds the model description from a parsed config.json. */
export function modelFromConfig(raw: unknown, options: ModelOptions = {}): ModelSpec {
  const config = textConfig(raw);
  const shape = readShape(config);
  const format = options.bits !== undefined ? forcedBits(options.bits) : formatFromConfig(config);
  const entries = weightEntries(shape, format);
  const name = options.name ?? String(config._name_or_path ?? shape.architecture);
  return summarise(shape, entries, format.label, name, 'config');
}

/**
 * Replaces estimated bytes with the exact tensor sizes found in safetensors headers. Tensors of
 * layers past `num_hidden_layers` (DeepSeek's multi-token-prediction layer) are not loaded for
 * inference and are left out.
 */
export function withTensorSizes(raw: unknown, tensors: { name: string; bytes: number }[], options: ModelOptions = {}): ModelSpec {
  if (options.bits !== undefined) return modelFromConfig(raw, options);
  const config = textConfig(raw);
  const estimate = modelFromConfig(raw, options);
  return exactSpec(readShape(config), tensors, estimate, 'exact sizes from safetensors');
}

/**
 * A model as the engine describes it (plain data: its dimensions as the engine runs them and every
 * tensor it loads with its bytes, e.g. the engine's `describeModelFiles` mapped by the daemon): the
 * planner sizes exactly what will be loaded, with no second reading of config.json. With `bits` the
 * bytes are estimated from the dimensions instead.
 */
export interface DescribedModel {
  architecture: string;
  numLayers: number;
  hiddenSize: number;
  vocabSize: number;
  numHeads: number;
  /** Latent attention: the engine's count (one per head); the planner's KV sizes follow `mla`. */
  numKvHeads: number;
  headDim: number;
  /** The dense MLP's intermediate size (layers without experts). */
  intermediateSize: number;
  tiedEmbeddings: boolean;
  mla?: { qLoraRank: number; kvLoraRank: number; nopeDim: number; ropeDim: number; vDim: number };
  moe?: { experts: number; topK: number; expertIntermediate: number; sharedIntermediate: number; sparse: boolean[] };
  /** Every tensor the engine loads, by Hugging Face name (one expert's slab of a stacked GGUF tensor). */
  tensors: { name: string; bytes: number }[];
  /** Where the sizes come from, e.g. "safetensors", "GGUF". */
  source: string;
}

export function modelFromDescription(d: DescribedModel, options: ModelOptions = {}): ModelSpec {
  const shape = shapeOfDescription(d);
  const name = options.name ?? d.architecture;
  if (options.bits !== undefined) {
    const format = forcedBits(options.bits);
    return summarise(shape, weightEntries(shape, format), format.label, name, 'config');
  }
  // Parameter counts (for flops) from the dimensions; the bits do not matter to them.
  const estimate = summarise(shape, weightEntries(shape, forcedBits(16)), '', name, 'config');
  return exactSpec(shape, d.tensors, estimate, `exact sizes from ${d.source}`);
}

function shapeOfDescription(d: DescribedModel): Shape {
  const sparse = d.moe?.sparse;
  if (sparse && sparse.length !== d.numLayers) throw new InputError('model description', 'moe.sparse', `lists ${sparse.length} layers, the model has ${d.numLayers}`);
  const moe: Shape['moe'] = d.moe && {
    experts: d.moe.experts,
    perToken: d.moe.topK,
    intermediate: d.moe.expertIntermediate,
    sharedIntermediate: d.moe.sharedIntermediate,
    sharedGate: false,
    isMoe: (i) => sparse![i] === true,
  };
  const needsDense = !moe || sparse!.some((s) => !s);
  return {
    architecture: d.architecture,
    layers: d.numLayers,
    hidden: d.hiddenSize,
    vocab: d.vocabSize,
    heads: d.numHeads,
    kvHeads: d.mla ? d.numHeads : d.numKvHeads,
    headDim: d.mla ? d.hiddenSize / d.numHeads : d.headDim,
    intermediate: needsDense ? d.intermediateSize : 0,
    tied: d.tiedEmbeddings,
    mla: d.mla && { qLoraRank: d.mla.qLoraRank, kvLoraRank: d.mla.kvLoraRank, nope: d.mla.nopeDim, rope: d.mla.ropeDim, v: d.mla.vDim },
    moe,
  };
}

/** Exact bytes per tensor summarised per layer; flops and parameter counts from the dimensions' estimate. */
function exactSpec(shape: Shape, tensors: { name: string; bytes: number }[], estimate: ModelSpec, label: string): ModelSpec {
  const entries: WeightEntry[] = [];
  for (const t of tensors) {
    const c = classifyTensor(t.name);
    if (c.layer >= shape.layers) continue;
    entries.push({ name: t.name, role: c.role, layer: c.layer, bytes: t.bytes, params: 0 });
  }
  const exact = summarise(shape, entries, label, estimate.name, 'safetensors');
  // Flops come from parameter counts, which headers of packed quantized tensors do not give.
  exact.layers.forEach((l, i) => (l.flopsPerToken = estimate.layers[i].flopsPerToken));
  exact.totalParams = estimate.totalParams;
  exact.activeParams = estimate.activeParams;
  return exact;
}

/** Multimodal configs keep the language model under `text_config`. */
function textConfig(raw: unknown): Record<string, unknown> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new InputError(SOURCE, '(root)', 'must be a JSON object');
  const c = raw as Record<string, unknown>;
  if (c.num_hidden_layers === undefined && isRecord(c.text_config)) {
    return { ...c.text_config, quantization_config: c.quantization_config, quantization: c.quantization, torch_dtype: c.torch_dtype ?? (c.text_config as Record<string, unknown>).torch_dtype, _name_or_path: c._name_or_path };
  }
  return c;
}

function readShape(c: Record<string, unknown>): Shape {
  const layers = int(c, 'num_hidden_layers');
  const hidden = int(c, 'hidden_size');
  const vocab = int(c, 'vocab_size');
  const heads = int(c, 'num_attention_heads');
  const kvHeads = c.num_key_value_heads === undefined || c.num_key_value_heads === null ? heads : int(c, 'num_key_value_heads');
  const headDim = c.head_dim === undefined || c.head_dim === null ? hidden / heads : int(c, 'head_dim');
  if (!Number.isInteger(headDim)) throw new InputError(SOURCE, 'head_dim', `is missing and hidden_size ${hidden} does not divide by num_attention_heads ${heads}`);
  const architecture = Array.isArray(c.architectures) && c.architectures.length > 0 ? String(c.architectures[0]) : String(c.model_type ?? 'unknown');

  let mla: Shape['mla'];
  if (c.kv_lora_rank !== undefined && c.kv_lora_rank !== null) {
    mla = {
      qLoraRank: c.q_lora_rank === null || c.q_lora_rank === undefined ? 0 : int(c, 'q_lora_rank'),
      kvLoraRank: int(c, 'kv_lora_rank'),
      nope: int(c, 'qk_nope_head_dim'),
      rope: int(c, 'qk_rope_head_dim'),
      v: int(c, 'v_head_dim'),
    };
  } else if (heads % kvHeads !== 0) {
    throw new InputError(SOURCE, 'num_key_value_heads', `(${kvHeads}) must divide num_attention_heads (${heads})`);
  }

  const expertsKey = ['num_experts', 'num_local_experts', 'n_routed_experts'].find((k) => c[k] !== undefined && c[k] !== null && Number(c[k]) > 0);
  let moe: Shape['moe'];
  if (expertsKey) {
    const experts = int(c, expertsKey);
    const perToken = int(c, 'num_experts_per_tok');
    if (perToken > experts) throw new InputError(SOURCE, 'num_experts_per_tok', `(${perToken}) exceeds ${expertsKey} (${experts})`);
    const moeInter = c.moe_intermediate_size !== undefined && c.moe_intermediate_size !== null ? int(c, 'moe_intermediate_size') : int(c, 'intermediate_size');
    const nShared = c.n_shared_experts === undefined || c.n_shared_experts === null ? 0 : nonNegInt(c, 'n_shared_experts');
    const sharedInter = c.shared_expert_intermediate_size !== undefined && c.shared_expert_intermediate_size !== null ? nonNegInt(c, 'shared_expert_intermediate_size') : nShared * moeInter;
    const firstDense = c.first_k_dense_replace === undefined || c.first_k_dense_replace === null ? 0 : nonNegInt(c, 'first_k_dense_replace');
    const freq = c.moe_layer_freq === undefined || c.moe_layer_freq === null ? 1 : int(c, 'moe_layer_freq');
    const step = c.decoder_sparse_step === undefined || c.decoder_sparse_step === null ? 1 : int(c, 'decoder_sparse_step');
    const mlpOnly = new Set(Array.isArray(c.mlp_only_layers) ? (c.mlp_only_layers as unknown[]).map(Number) : []);
    moe = {
      experts,
      perToken,
      intermediate: moeInter,
      sharedIntermediate: sharedInter,
      sharedGate: c.shared_expert_intermediate_size !== undefined && c.shared_expert_intermediate_size !== null,
      isMoe: (i) => i >= firstDense && i % freq === 0 && (i + 1) % step === 0 && !mlpOnly.has(i),
    };
  }
  const needsDense = !moe || Array.from({ length: layers }, (_, i) => i).some((i) => !moe!.isMoe(i));
  const intermediate = needsDense ? int(c, 'intermediate_size') : 0;
  // Hugging Face's default is tied; big models say so explicitly.
  const tied = c.tie_word_embeddings === undefined ? true : Boolean(c.tie_word_embeddings);
  return { architecture, layers, hidden, vocab, heads, kvHeads, headDim, intermediate, tied, mla, moe };
}

/** Parameters of every weight, one entry per kind per layer (experts grouped), in HF names. */
function weightEntries(s: Shape, format: WeightFormat): WeightEntry[] {
  const out: WeightEntry[] = [];
  const add = (name: string, role: WeightRole, layer: number, params: number) => {
    if (params > 0) out.push({ name, role, layer, params, bytes: (params * format.bitsFor(name, role)) / 8 });
  };
  add('model.embed_tokens', 'embedding', -1, s.vocab * s.hidden);
  if (!s.tied) add('lm_head', 'lm-head', -2, s.vocab * s.hidden);
  add('model.norm', 'norm', -2, s.hidden);
  for (let i = 0; i < s.layers; i++) {
    const p = `model.layers.${i}`;
    add(`${p}.input_layernorm`, 'norm', i, 2 * s.hidden);
    if (s.mla) {
      const m = s.mla;
      const qkDim = m.nope + m.rope;
      if (m.qLoraRank > 0) {
        add(`${p}.self_attn.q_a_proj`, 'attention-latent', i, s.hidden * m.qLoraRank + m.qLoraRank);
        add(`${p}.self_attn.q_b_proj`, 'attention', i, m.qLoraRank * s.heads * qkDim);
      } else {
        add(`${p}.self_attn.q_proj`, 'attention', i, s.hidden * s.heads * qkDim);
      }
      add(`${p}.self_attn.kv_a_proj_with_mqa`, 'attention-latent', i, s.hidden * (m.kvLoraRank + m.rope) + m.kvLoraRank);
      add(`${p}.self_attn.kv_b_proj`, 'attention', i, m.kvLoraRank * s.heads * (m.nope + m.v));
      add(`${p}.self_attn.o_proj`, 'attention', i, s.heads * m.v * s.hidden);
    } else {
      add(`${p}.self_attn.q_proj`, 'attention', i, s.hidden * s.heads * s.headDim);
      add(`${p}.self_attn.k_proj`, 'attention-kv', i, s.hidden * s.kvHeads * s.headDim);
      add(`${p}.self_attn.v_proj`, 'attention-kv', i, s.hidden * s.kvHeads * s.headDim);
      add(`${p}.self_attn.o_proj`, 'attention', i, s.heads * s.headDim * s.hidden);
    }
    if (s.moe && s.moe.isMoe(i)) {
      const m = s.moe;
      add(`${p}.mlp.gate`, 'router', i, s.hidden * m.experts);
      add(`${p}.mlp.experts.0.gate_proj`, 'routed-experts', i, m.experts * 3 * s.hidden * m.intermediate);
      add(`${p}.mlp.shared_experts.gate_proj`, 'shared-experts', i, 3 * s.hidden * m.sharedIntermediate);
      if (m.sharedGate) add(`${p}.mlp.shared_expert_gate`, 'router', i, s.hidden);
    } else {
      add(`${p}.mlp.gate_proj`, 'mlp', i, 3 * s.hidden * s.intermediate);
    }
  }
  return out;
}

/** Sorts a tensor name from a safetensors header into a layer and role. */
export function classifyTensor(name: string): { layer: number; role: WeightRole } {
  const m = /(?:^|\.)layers\.(\d+)\./.exec(name);
  if (!m) {
    if (/lm_head|output\.weight$/.test(name)) return { layer: -2, role: 'lm-head' };
    if (/(^|\.)norm\.(weight|bias)$/.test(name) && !/layers\./.test(name)) return { layer: -2, role: 'norm' };
    return { layer: -1, role: 'embedding' };
  }
  const layer = Number(m[1]);
  const rest = name.slice(m.index + m[0].length);
  let role: WeightRole;
  if (/norm/.test(rest)) role = 'norm';
  else if (/(q_a_proj|kv_a_proj)/.test(rest)) role = 'attention-latent';
  else if (/(self_attn|attention)\.(k_proj|v_proj)/.test(rest)) role = 'attention-kv';
  else if (/self_attn|attention\./.test(rest)) role = 'attention';
  else if (/shared_expert/.test(rest)) role = 'shared-experts';
  else if (/(experts|switch_mlp)\./.test(rest)) role = 'routed-experts';
  else if (/(mlp|block_sparse_moe)\.gate\.|e_score_correction_bias|\.router\./.test(rest)) role = 'router';
  else role = 'mlp';
  return { layer, role };
}

function summarise(s: Shape, entries: WeightEntry[], format: string, name: string, bytesFrom: ModelSpec['bytesFrom']): ModelSpec {
  const activeShare = s.moe ? s.moe.perToken / s.moe.experts : 1;
  const layers: LayerSpec[] = Array.from({ length: s.layers }, (_, i) => ({
    index: i,
    kind: s.moe && s.moe.isMoe(i) ? 'moe' : 'dense',
    bytes: 0,
    activeBytes: 0,
    headBytes: 0,
    kvHeadBytes: 0,
    mlpBytes: 0,
    mlpActiveBytes: 0,
    replicatedBytes: 0,
    flopsPerToken: 0,
  }));
  let embeddingBytes = 0;
  let lmHeadBytes = 0;
  let totalParams = 0;
  let activeParams = 0;
  for (const e of entries) {
    const active = e.role === 'routed-experts' ? activeShare : 1;
    totalParams += e.params;
    if (e.role !== 'embedding') activeParams += e.params * active; // one embedding row per token
    if (e.layer === -1) {
      embeddingBytes += e.bytes;
      continue;
    }
    if (e.layer === -2) {
      lmHeadBytes += e.bytes;
      continue;
    }
    const l = layers[e.layer];
    l.bytes += e.bytes;
    l.activeBytes += e.bytes * active;
    l.flopsPerToken += 2 * e.params * active;
    switch (e.role) {
      case 'attention':
        l.headBytes += e.bytes;
        break;
      case 'attention-kv':
        l.kvHeadBytes += e.bytes;
        break;
      case 'mlp':
      case 'shared-experts':
      case 'routed-experts':
        l.mlpBytes += e.bytes;
        l.mlpActiveBytes += e.bytes * active;
        break;
      default:
        l.replicatedBytes += e.bytes;
    }
  }
  if (s.tied) {
    // The head reuses the embedding matrix: the last stage reads (and, if it is not also the first
    // stage, holds) those bytes too.
    lmHeadBytes += embeddingBytes;
    activeParams += s.vocab * s.hidden;
  }
  const kvBytesPerTokenPerLayer = s.mla ? (s.mla.kvLoraRank + s.mla.rope) * KV_BYTES : 2 * s.kvHeads * s.headDim * KV_BYTES;
  const attentionFlopsPerPosition = s.mla ? 2 * s.heads * (s.mla.nope + s.mla.rope + s.mla.v) : 4 * s.heads * s.headDim;
  const layerBytes = layers.reduce((a, l) => a + l.bytes, 0);
  const layerActive = layers.reduce((a, l) => a + l.activeBytes, 0);
  const totalBytes = layerBytes + embeddingBytes + lmHeadBytes - (s.tied ? embeddingBytes : 0);
  const maxIntermediate = Math.max(s.intermediate, s.moe ? s.moe.perToken * s.moe.intermediate + s.moe.sharedIntermediate : 0);
  for (const l of layers) {
    if (!(l.bytes > 0)) throw new InputError(SOURCE, `layers[${l.index}]`, 'has no weights (safetensors and config disagree?)');
  }
  return {
    name,
    architecture: s.architecture,
    numLayers: s.layers,
    hiddenSize: s.hidden,
    vocabSize: s.vocab,
    numHeads: s.heads,
    numKvHeads: s.mla ? s.heads : s.kvHeads,
    attention: s.mla ? 'mla' : 'gqa',
    moe: s.moe ? { experts: s.moe.experts, expertsPerToken: s.moe.perToken, sharedExperts: s.moe.sharedIntermediate / (s.moe.intermediate || 1), moeLayers: layers.filter((l) => l.kind === 'moe').length } : undefined,
    layers,
    embeddingBytes,
    lmHeadBytes,
    tiedEmbeddings: s.tied,
    kvBytesPerTokenPerLayer,
    kvReplicated: Boolean(s.mla),
    attentionFlopsPerPosition,
    activationBytesPerToken: s.hidden * ACT_BYTES,
    maxIntermediate,
    totalBytes,
    activeBytesPerToken: layerActive + lmHeadBytes,
    totalParams,
    activeParams,
    format,
    bytesFrom,
  };
}

function int(c: Record<string, unknown>, key: string): number {
  const v = c[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) {
    throw new InputError(SOURCE, key, v === undefined ? 'is missing (expected a positive integer)' : `must be a positive integer, got ${JSON.stringify(v)}`);
  }
  return v;
}

function nonNegInt(c: Record<string, unknown>, key: string): number {
  const v = c[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new InputError(SOURCE, key, `must be a non-negative integer, got ${JSON.stringify(v)}`);
  return v;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
