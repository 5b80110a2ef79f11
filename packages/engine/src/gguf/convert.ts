/**
 * Hugging Face model directory → GGUF, so llama.cpp can run the very weights the engine runs.
 *
 * What the conversion has to get right (llama.cpp's convert_hf_to_gguf.py does the same):
 * - Tensor names: `model.layers.N.self_attn.q_proj.weight` → `blk.N.attn_q.weight`, etc.
 * - RoPE layout. HF Llama/Mistral checkpoints rotate halves (dim i with i + d/2); llama.cpp's arch
 *   `llama` rotates adjacent pairs (2i, 2i+1). q and k rows (and their biases) are therefore permuted
 *   per head: new row 2i+s ← old row s·d/2+i. Qwen2/Qwen3 run with llama.cpp's NEOX rope (rotate
 *   half), so their weights are copied as they are.
 * - Llama 3 `rope_scaling` becomes a `rope_freqs.weight` tensor of per-frequency divisors.
 * - 1-D tensors (norms, biases) stay F32, as llama.cpp expects; matrices are F32 or F16.
 * - The tokenizer (convert-tokenizer.ts): byte-level BPE vocabularies become `tokenizer.ggml.model =
 *   gpt2` with the same token strings and merges and the `pre` llama.cpp names for their split,
 *   SentencePiece-style ones `llama` with scores; padded to vocab_size with unused `[PADn]` tokens.
 */
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { loadConfigJson, type ModelConfig } from '../config/config.js';
import { UnsupportedModelError } from '../errors.js';
import { f32ToF16Bits } from '../numeric/half.js';
import { Checkpoint } from '../safetensors/checkpoint.js';
import { quantizeQ4_0, quantizeQ8_0 } from '../kernels/wasm/quant-reference.js';
import { quantizeK } from '../quant/kquants.js';
import { quantizeMxfp4 } from '../quant/mxfp4.js';
import { gguf, writeGguf, type GgufMetadata, type GgufTensorSource, type GgufTensorType, type WrittenGguf } from './write.js';
import { writeGgufSplit, type GgufSplitOptions } from './write-split.js';
import { checkMoeExport, mlaPlan, moeHyperParameters, moePlan } from './convert-moe.js';
import { type GgufArch, type PlannedTensor, directTensor } from './convert-tensors.js';
import { ggufTokenizerMetadata } from './convert-tokenizer.js';

export type GgufExportDtype = 'f32' | 'f16' | 'q8_0' | 'q4_0' | 'q4_k' | 'q4_k_m' | 'q5_k_m' | 'q6_k' | 'mxfp4';
type KMix = 'q4_k' | 'q4_k_m' | 'q5_k_m' | 'q6_k';

/** llama.cpp's general.file_type of each export dtype (LLAMA_FTYPE_*; pure Q4_K is recorded as Q4_K_S). */
const FILE_TYPE: Record<GgufExportDtype, number> = { f32: 0, f16: 1, q4_0: 2, q8_0: 7, q4_k: 14, q4_k_m: 15, q5_k_m: 17, q6_k: 18, mxfp4: 38 };

/** llama.cpp's use_more_bits: the layers whose attn_v / ffn_down get more bits in the _M mixes. */
function useMoreBits(layer: number, layers: number): boolean {
  const eighth = Math.floor(layers / 8);
  return layer < eighth || layer >= Math.floor((7 * layers) / 8) || (layer - eighth) % 3 === 2;
}

/** The ggml type of a matrix (`gguf`: its GGUF name) in an export of `dtype`; rows not of whole blocks fall back. */
function matrixType(dtype: GgufExportDtype, gguf: string, cols: number, layers: number, tied: boolean): GgufTensorType {
  switch (dtype) {
    case 'f32':
      return 'F32';
    case 'f16':
      return 'F16';
    case 'q8_0':
    case 'q4_0':
      return cols % 32 ? 'F16' : dtype === 'q8_0' ? 'Q8_0' : 'Q4_0';
    case 'mxfp4':
      return cols % 32 ? 'F16' : gguf.startsWith('blk.') ? 'MXFP4' : 'Q8_0';
    default:
      return kQuantMix(dtype, gguf, cols, layers, tied);
  }
}

/**
 * The ggml type llama-quantize gives a matrix in a K-quant mix (llama_tensor_get_type, dense models;
 * 'q4_k' is the pure mix, every matrix Q4_K):
 * output.weight (or a tied token_embd) Q6_K; in Q4_K_M / Q5_K_M, attn_v and ffn_down Q6_K in the
 * use_more_bits layers; everything else the mix's base type. A matrix whose rows are not whole
 * 256-blocks falls back to Q8_0 (llama.cpp falls back to Q5_0/Q5_1/Q8_0, which we do not write).
 */
export function kQuantMix(dtype: KMix, gguf: string, cols: number, layers: number, tied: boolean): GgufTensorType {
  if (cols % 256) return 'Q8_0';
  const base: GgufTensorType = dtype === 'q4_k' || dtype === 'q4_k_m' ? 'Q4_K' : dtype === 'q5_k_m' ? 'Q5_K' : 'Q6_K';
  if (dtype === 'q4_k') return base;
  if (gguf === 'output.weight' || (tied && gguf === 'token_embd.weight')) return 'Q6_K';
  const m = /^blk\.(\d+)\.(attn_v|ffn_down)\.weight$/.exec(gguf);
  if (m && dtype !== 'q6_k' && useMoreBits(Number(m[1]), layers)) return 'Q6_K';
  return base;
}

const ARCH_OF: Record<string, GgufArch> = {
  LlamaForCausalLM: 'llama',
  MistralForCausalLM: 'llama',
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
  // llama.cpp runs Mixtral as arch llama with experts, DeepSeek V3 / Kimi K2 as deepseek2.
  MixtralForCausalLM: 'llama',
  Qwen3MoeForCausalLM: 'qwen3moe',
  DeepseekV3ForCausalLM: 'deepseek2',
  GptOssForCausalLM: 'gpt-oss',
};

export interface HfToGgufOptions {
  /**
   * Type of 2-D tensors. @default 'f16' when the checkpoint's matrices are all F16, else 'f32'.
   * 'q8_0'/'q4_0' quantize every matrix (embedding and output included, like llama-quantize --pure)
   * with ggml's reference quantizers; a matrix whose rows are not whole 32-blocks stays F16.
   * 'q4_k_m', 'q5_k_m', 'q6_k': llama-quantize's mixes (see kQuantMix), quantized with our own
   * K-quant quantizer (quant/kquants.ts); 'q4_k': every matrix Q4_K (like llama-quantize --pure).
   * 'mxfp4': the layers' matrices MXFP4 (quant/mxfp4.ts), token_embd and output Q8_0 — llama-quantize's
   * MXFP4_MOE choice for the tensors around the experts, here with the dense matrices in MXFP4.
   */
  dtype?: GgufExportDtype;
  /** `general.name`. @default the directory's base name */
  name?: string;
  /**
   * Write a split set as convert_hf_to_gguf.py's `--split-max-tensors` / `--split-max-size` /
   * `--no-tensor-first-split` do: `outFile` "X.gguf" becomes X-00001-of-0000N.gguf … beside it.
   */
  split?: GgufSplitOptions;
}

export interface HfToGgufResult extends WrittenGguf {
  arch: GgufArch;
  /** The parts written, first to last (one for a whole file); `path` is the first. */
  parts: WrittenGguf[];
}

/** Converts the HF model in `dir` to a GGUF file at `outFile`. */
export function hfToGguf(dir: string, outFile: string, options: HfToGgufOptions = {}): HfToGgufResult {
  const cfg = loadConfigJson(dir);
  const arch = ARCH_OF[cfg.architecture];
  if (!arch) throw new UnsupportedModelError(`GGUF export: architecture ${cfg.architecture} has no llama.cpp mapping`);
  if (cfg.slidingWindow !== null && cfg.slidingWindow < cfg.maxPositionEmbeddings && !cfg.slidingLayers) {
    throw new UnsupportedModelError(`GGUF export: sliding_window ${cfg.slidingWindow} in ${dir} is not expressed for llama.cpp arch ${arch}`);
  }
  if ((arch === 'qwen3' || arch === 'qwen3moe') && cfg.qkvBias) throw new UnsupportedModelError(`GGUF export: llama.cpp's ${arch} has no q/k/v bias (${dir})`);
  checkMoeExport(arch, cfg, dir);

  const ckpt = Checkpoint.open(dir);
  try {
    const plan = tensorPlan(cfg, ckpt, arch);
    const sourceDtypes = plan.filter((t) => t.shape.length >= 2).flatMap((t) => t.from.map((n) => ckpt.info(n).dtype));
    const dtype = options.dtype ?? (sourceDtypes.every((d) => d === 'F16') ? 'f16' : 'f32');
    const tied = !plan.some((t) => t.gguf === 'output.weight');
    const tensors: GgufTensorSource[] = plan.map(({ gguf: name, shape, values }) => {
      // stacked expert biases ([experts, n]) are vectors to llama.cpp: F32 like every bias
      const matrix = shape.length >= 2 && !name.endsWith('.bias');
      const cols = shape[shape.length - 1];
      const type = matrix ? matrixType(dtype, name, cols, cfg.numLayers, tied) : 'F32';
      return { name, type, shape, data: () => encode(values(), type, shape) };
    });
    const ropeFactors = llama3RopeFactors(cfg);
    if (ropeFactors) {
      if (arch !== 'llama') throw new UnsupportedModelError(`GGUF export: llama3 rope scaling on ${cfg.architecture}`);
      tensors.push({ name: 'rope_freqs.weight', type: 'F32', shape: [ropeFactors.length], data: () => new Uint8Array(ropeFactors.buffer) });
    }
    const metadata: GgufMetadata = {
      'general.architecture': gguf.str(arch),
      'general.name': gguf.str(options.name ?? basename(dir)),
      'general.file_type': gguf.u32(FILE_TYPE[dtype]),
      ...hyperParameters(arch, cfg),
      ...moeHyperParameters(arch, cfg),
      ...tokenizerMetadata(dir, cfg),
    };
    if (options.split) {
      const parts = writeGgufSplit(outFile, metadata, tensors, options.split);
      return { ...parts[0], bytes: parts.reduce((a, p) => a + p.bytes, 0), tensors: parts.flatMap((p) => p.tensors), arch, parts };
    }
    const written = writeGguf(outFile, metadata, tensors);
    return { ...written, arch, parts: [written] };
  } finally {
    ckpt.close();
  }
}

function tensorPlan(cfg: ModelConfig, ckpt: Checkpoint, arch: GgufArch): PlannedTensor[] {
  const permute = arch === 'llama';
  const direct = (hf: string, gguf: string, permuteHeads?: number) => directTensor(ckpt, cfg, hf, gguf, permuteHeads);
  const plan: PlannedTensor[] = [direct('model.embed_tokens.weight', 'token_embd.weight')];
  for (let l = 0; l < cfg.numLayers; l++) {
    const p = `model.layers.${l}`;
    const b = `blk.${l}`;
    plan.push(direct(`${p}.input_layernorm.weight`, `${b}.attn_norm.weight`));
    if (cfg.mla) plan.push(...mlaPlan(ckpt, cfg, cfg.mla, l));
    else {
      for (const [proj, short, heads] of [
        ['q', 'q', cfg.numHeads],
        ['k', 'k', cfg.numKvHeads],
        ['v', 'v', 0],
      ] as const) {
        const permuteHeads = permute && heads ? heads : undefined;
        plan.push(direct(`${p}.self_attn.${proj}_proj.weight`, `${b}.attn_${short}.weight`, permuteHeads));
        if (cfg.qkvBias) plan.push(direct(`${p}.self_attn.${proj}_proj.bias`, `${b}.attn_${short}.bias`, permuteHeads));
      }
      if (cfg.caps.qkNorm) {
        plan.push(direct(`${p}.self_attn.q_norm.weight`, `${b}.attn_q_norm.weight`));
        plan.push(direct(`${p}.self_attn.k_norm.weight`, `${b}.attn_k_norm.weight`));
      }
      plan.push(direct(`${p}.self_attn.o_proj.weight`, `${b}.attn_output.weight`));
      if (cfg.oBias) plan.push(direct(`${p}.self_attn.o_proj.bias`, `${b}.attn_output.bias`));
      if (cfg.attentionSinks) plan.push(direct(`${p}.self_attn.sinks`, `${b}.attn_sinks.weight`));
    }
    // gpt-oss's post-attention norm has its own name in llama.cpp.
    plan.push(direct(`${p}.post_attention_layernorm.weight`, arch === 'gpt-oss' ? `${b}.post_attention_norm.weight` : `${b}.ffn_norm.weight`));
    if (cfg.moe?.sparse[l]) plan.push(...moePlan(ckpt, cfg, cfg.moe, l));
    else {
      plan.push(direct(`${p}.mlp.gate_proj.weight`, `${b}.ffn_gate.weight`));
      plan.push(direct(`${p}.mlp.up_proj.weight`, `${b}.ffn_up.weight`));
      plan.push(direct(`${p}.mlp.down_proj.weight`, `${b}.ffn_down.weight`));
    }
  }
  plan.push(direct('model.norm.weight', 'output_norm.weight'));
  // Tied models have no lm_head: llama.cpp then reuses token_embd, as HF does.
  if (!cfg.tieWordEmbeddings || ckpt.has('lm_head.weight')) plan.push(direct('lm_head.weight', 'output.weight'));
  return plan;
}

function encode(values: Float32Array, type: GgufTensorType, shape: readonly number[] = [values.length]): Uint8Array {
  if (type === 'F32') return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  const cols = shape[shape.length - 1];
  if (type === 'Q8_0' || type === 'Q4_0') return (type === 'Q8_0' ? quantizeQ8_0 : quantizeQ4_0)(values, values.length / cols, cols);
  if (type === 'MXFP4') return quantizeMxfp4(values, values.length / cols, cols);
  if (type === 'Q4_K' || type === 'Q5_K' || type === 'Q6_K') return quantizeK(type === 'Q4_K' ? 'q4_k' : type === 'Q5_K' ? 'q5_k' : 'q6_k', values, values.length / cols, cols);
  const bits = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) bits[i] = f32ToF16Bits(values[i]);
  return new Uint8Array(bits.buffer);
}

/** llama.cpp's per-frequency divisors for Llama 3 rope scaling (as convert_hf_to_gguf.py computes them). */
export function llama3RopeFactors(cfg: ModelConfig): Float32Array | null {
  const rs = cfg.ropeScaling;
  if (!rs || rs.type !== 'llama3') return null;
  const d = cfg.headDim;
  const lowWavelen = rs.originalMaxPositionEmbeddings / rs.lowFreqFactor;
  const highWavelen = rs.originalMaxPositionEmbeddings / rs.highFreqFactor;
  const out = new Float32Array(d / 2);
  for (let i = 0; i < d / 2; i++) {
    const freq = 1 / cfg.ropeTheta ** ((2 * i) / d);
    const wavelen = (2 * Math.PI) / freq;
    if (wavelen < highWavelen) out[i] = 1;
    else if (wavelen > lowWavelen) out[i] = rs.factor;
    else {
      const smooth = (rs.originalMaxPositionEmbeddings / wavelen - rs.lowFreqFactor) / (rs.highFreqFactor - rs.lowFreqFactor);
      out[i] = 1 / ((1 - smooth) / rs.factor + smooth);
    }
  }
  return out;
}

function hyperParameters(arch: GgufArch, cfg: ModelConfig): GgufMetadata {
  const m: GgufMetadata = {
    [`${arch}.context_length`]: gguf.u32(cfg.maxPositionEmbeddings),
    [`${arch}.embedding_length`]: gguf.u32(cfg.hiddenSize),
    [`${arch}.block_count`]: gguf.u32(cfg.numLayers),
    [`${arch}.feed_forward_length`]: gguf.u32(cfg.intermediateSize),
    [`${arch}.attention.head_count`]: gguf.u32(cfg.numHeads),
    [`${arch}.attention.head_count_kv`]: gguf.u32(cfg.numKvHeads),
    [`${arch}.attention.key_length`]: gguf.u32(cfg.headDim),
    [`${arch}.attention.value_length`]: gguf.u32(cfg.headDim),
    [`${arch}.attention.layer_norm_rms_epsilon`]: gguf.f32(cfg.rmsNormEps),
    [`${arch}.rope.freq_base`]: gguf.f32(cfg.ropeTheta),
    [`${arch}.rope.dimension_count`]: gguf.u32(cfg.headDim),
    [`${arch}.vocab_size`]: gguf.u32(cfg.vocabSize),
  };
  if (cfg.ropeScaling?.type === 'linear') {
    m[`${arch}.rope.scaling.type`] = gguf.str('linear');
    m[`${arch}.rope.scaling.factor`] = gguf.f32(cfg.ropeScaling.factor);
  }
  return m;
}

/** The vocabulary and its metadata as llama.cpp writes it (see tokenizerMetadata in convert-tokenizer.ts). */
function tokenizerMetadata(dir: string, cfg: ModelConfig): GgufMetadata {
  return ggufTokenizerMetadata(dir, { vocabSize: cfg.vocabSize, bosTokenId: cfg.bosTokenId, eosTokenIds: cfg.eosTokenIds });
}
