/**
 * A GGUF file as an engine model: its hyper-parameters as a `ModelConfig` and its tensors under Hugging
 * Face names, so the shard loader (model/weights.ts) plans and reads a GGUF exactly as it does a
 * safetensors checkpoint — only the byte ranges a shard holds.
 *
 * - Arch keys `llama`, `qwen2`, `qwen3` (llama.cpp's names) map to LlamaForCausalLM, Qwen2ForCausalLM,
 *   Qwen3ForCausalLM. Biases and tied embeddings are detected from the tensors present.
 * - llama.cpp's arch `llama` rotates adjacent RoPE pairs, so its converter permuted the q/k rows of each
 *   head (HF row s·d/2+i → row 2i+s, see convert.ts). Reading undoes it row by row; rows are whole
 *   (quantized blocks run along a row), so this works on Q8_0/Q4_0 bytes unchanged.
 * - F32/F16/BF16/Q8_0/Q4_0 tensors are handed over in their storage layout (dtype 'q8_0'/'q4_0' keep
 *   the raw 34/18-byte blocks; the kernels dequantize). A column slice of a quantized matrix must start
 *   and end on a 32-element block boundary.
 * - Llama 3 rope scaling stored as `rope_freqs.weight` is refused (its parameters are not in the file).
 */
import { closeSync, read as readCb, readSync } from 'node:fs';
import { promisify } from 'node:util';
import { basename } from 'node:path';
import type { ModelConfig, RopeScaling } from '../config/config.js';
import { lookupArchitecture } from '../config/architectures/registry.js';
import { ModelFormatError, UnsupportedModelError } from '../errors.js';
import { openModelFile } from '../open-model-file.js';
import { GGML_TYPES, type GgufHeader, type GgufTensorInfo, type GgufValue } from './read.js';
import { readGgufFile } from './read-split.js';
import { ggufMlaConfig, ggufMoeConfig, ggufYarn, moeTensorRef, type GgufTensorRef } from './read-moe.js';

const readAsync = promisify(readCb);

const ARCHITECTURE_OF: Record<string, string> = {
  llama: 'LlamaForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  qwen3: 'Qwen3ForCausalLM',
  qwen3moe: 'Qwen3MoeForCausalLM',
  deepseek2: 'DeepseekV3ForCausalLM',
  'gpt-oss': 'GptOssForCausalLM',
};

/** HF tensor name → GGUF tensor (llama.cpp's naming, as convert.ts writes it; a slab of a stacked expert tensor), or null. */
export function ggufTensorRef(hf: string, arch = 'llama'): GgufTensorRef | null {
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hf);
  const moe = m ? moeTensorRef(m[2], m[1], arch) : undefined;
  if (moe !== undefined) return moe;
  const name = ggufTensorName(hf);
  return name === null ? null : { name };
}

/** llama.cpp's names of the tensors outside the layers, by Hugging Face name. */
const FIXED_NAMES: Record<string, string> = {
  'model.embed_tokens.weight': 'token_embd.weight',
  'model.norm.weight': 'output_norm.weight',
  'lm_head.weight': 'output.weight',
};
/** llama.cpp's names of a layer's tensors (after `blk.N.`), by Hugging Face name (after `model.layers.N.`). */
const LAYER_NAMES: Record<string, string> = {
  'input_layernorm.weight': 'attn_norm.weight',
  'self_attn.q_proj.weight': 'attn_q.weight',
  'self_attn.k_proj.weight': 'attn_k.weight',
  'self_attn.v_proj.weight': 'attn_v.weight',
  'self_attn.q_proj.bias': 'attn_q.bias',
  'self_attn.k_proj.bias': 'attn_k.bias',
  'self_attn.v_proj.bias': 'attn_v.bias',
  'self_attn.q_norm.weight': 'attn_q_norm.weight',
  'self_attn.k_norm.weight': 'attn_k_norm.weight',
  'self_attn.o_proj.weight': 'attn_output.weight',
  'self_attn.o_proj.bias': 'attn_output.bias',
  'post_attention_layernorm.weight': 'ffn_norm.weight',
  'mlp.gate_proj.weight': 'ffn_gate.weight',
  'mlp.up_proj.weight': 'ffn_up.weight',
  'mlp.down_proj.weight': 'ffn_down.weight',
};
const invert = (t: Record<string, string>) => Object.fromEntries(Object.entries(t).map(([k, v]) => [v, k]));
const FIXED_HF = invert(FIXED_NAMES);
const LAYER_HF = invert(LAYER_NAMES);

/** HF tensor name → GGUF tensor name (llama.cpp's naming, as convert.ts writes it), or null. */
export function ggufTensorName(hf: string): string | null {
  if (FIXED_NAMES[hf]) return FIXED_NAMES[hf];
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hf);
  const g = m ? LAYER_NAMES[m[2]] : undefined;
  return g ? `blk.${m![1]}.${g}` : null;
}

/** GGUF tensor name → Hugging Face name (the inverse of ggufTensorName), or null. */
export function hfTensorName(gguf: string): string | null {
  if (FIXED_HF[gguf]) return FIXED_HF[gguf];
  const m = /^blk\.(\d+)\.(.+)$/.exec(gguf);
  const h = m ? LAYER_HF[m[2]] : undefined;
  return h ? `model.layers.${m![1]}.${h}` : null;
}

/**
 * Every tensor's exact byte size in a GGUF, under its Hugging Face name: what the planner sizes a GGUF
 * model by (the bytes the engine loads: block formats stay packed, F32 norms stay F32).
 */
export function ggufTensorSizes(path: string): { name: string; bytes: number }[] {
  const out: { name: string; bytes: number }[] = [];
  for (const t of readGgufFile(path).tensors.values()) {
    const name = hfTensorName(t.name);
    if (name) out.push({ name, bytes: t.bytes });
  }
  return out;
}

function meta(h: GgufHeader, path: string, key: string): GgufValue | undefined {
  return h.metadata.get(key);
}

function posInt(h: GgufHeader, path: string, key: string, fallback?: number): number {
  const v = meta(h, path, key) ?? fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) {
    throw new ModelFormatError(`${basename(path)}: metadata ${key} must be a positive integer, got ${v === undefined ? 'nothing' : String(v)}`, path, key);
  }
  return v;
}

function posNum(h: GgufHeader, path: string, key: string, fallback: number): number {
  const v = meta(h, path, key) ?? fallback;
  if (typeof v !== 'number' || !(v > 0)) throw new ModelFormatError(`${basename(path)}: metadata ${key} must be a positive number`, path, key);
  return v;
}

/** The engine's config for a parsed GGUF header. */
export function ggufConfig(h: GgufHeader, path: string): ModelConfig {
  const file = basename(path);
  const arch = meta(h, path, 'general.architecture');
  if (typeof arch !== 'string') throw new ModelFormatError(`${file}: missing general.architecture`, path, 'general.architecture');
  // llama.cpp runs Mixtral as arch llama with experts.
  const architecture = arch === 'llama' && Number(meta(h, path, 'llama.expert_count') ?? 0) > 0 ? 'MixtralForCausalLM' : ARCHITECTURE_OF[arch];
  if (!architecture) {
    throw new UnsupportedModelError(`${file}: GGUF architecture ${arch} is not supported (supported: ${Object.keys(ARCHITECTURE_OF).join(', ')})`);
  }
  const caps = lookupArchitecture(architecture)!;
  if (h.tensors.has('rope_freqs.weight')) {
    throw new UnsupportedModelError(`${file}: rope_freqs.weight (Llama 3 rope scaling) is not supported from GGUF; load the Hugging Face directory instead`);
  }
  const k = (s: string) => `${arch}.${s}`;
  const hiddenSize = posInt(h, path, k('embedding_length'));
  const numHeads = posInt(h, path, k('attention.head_count'));
  const m: Parameters<typeof ggufMoeConfig>[6] = {
    int: (key, fallback) => posInt(h, path, key, fallback),
    num: (key, fallback) => posNum(h, path, key, fallback),
    get: (key) => meta(h, path, key),
  };
  const maxPositions = posInt(h, path, k('context_length'), 2048);
  const yarn = meta(h, path, k('rope.scaling.type')) === 'yarn' ? ggufYarn(arch, m, maxPositions) : null;
  const latent = caps.attention === 'mla' ? ggufMlaConfig(h, arch, numHeads, m, yarn) : null;
  // Latent attention: every head is its own "KV head" in the engine (llama.cpp stores one shared latent head).
  const numKvHeads = latent ? numHeads : posInt(h, path, k('attention.head_count_kv'), numHeads);
  const headDim = latent ? latent.headDim : posInt(h, path, k('attention.key_length'), hiddenSize / numHeads);
  if (headDim % 2) throw new ModelFormatError(`${file}: head dimension ${headDim} must be even`, path, k('attention.key_length'));
  if (numHeads % numKvHeads) throw new ModelFormatError(`${file}: ${numHeads} heads are not a multiple of ${numKvHeads} KV heads`, path, k('attention.head_count_kv'));
  const rotDims = meta(h, path, k('rope.dimension_count'));
  if (!latent && rotDims !== undefined && rotDims !== headDim) throw new UnsupportedModelError(`${file}: partial rotary embedding (${String(rotDims)} of ${headDim} dims) is not supported`);
  const embd = h.tensors.get('token_embd.weight');
  if (!embd) throw new ModelFormatError(`${file}: missing tensor token_embd.weight`, path, 'token_embd.weight');
  const tokens = meta(h, path, 'tokenizer.ggml.tokens');
  const vocabSize = posInt(h, path, k('vocab_size'), Array.isArray(tokens) ? tokens.length : embd.shape[0]);

  let ropeScaling: RopeScaling | null = null;
  const scaling = meta(h, path, k('rope.scaling.type'));
  if (yarn) {
    if (!caps.ropeScaling.includes('yarn')) throw new UnsupportedModelError(`${file}: yarn rope scaling is not supported for ${architecture}`);
    ropeScaling = yarn;
  } else if (scaling !== undefined && scaling !== 'none') {
    if (scaling !== 'linear') throw new UnsupportedModelError(`${file}: rope scaling type ${String(scaling)} is not supported from GGUF`);
    ropeScaling = { type: 'linear', factor: posNum(h, path, k('rope.scaling.factor'), 1), lowFreqFactor: 0, highFreqFactor: 0, originalMaxPositionEmbeddings: 0 };
  }
  const qkvBias = h.tensors.has('blk.0.attn_q.bias');
  const oBias = h.tensors.has('blk.0.attn_output.bias');
  if (arch === 'qwen2' && !qkvBias) throw new ModelFormatError(`${file}: qwen2 model without blk.0.attn_q.bias`, path, 'blk.0.attn_q.bias');
  const eos = meta(h, path, 'tokenizer.ggml.eos_token_id');
  const bos = meta(h, path, 'tokenizer.ggml.bos_token_id');
  const numLayers = posInt(h, path, k('block_count'));
  const feedForward = posInt(h, path, k('feed_forward_length'));
  const moe = caps.moe ? ggufMoeConfig(h, path, arch, caps, numLayers, feedForward, m) : undefined;
  const gptOss = arch === 'gpt-oss';
  return {
    dir: path,
    architecture,
    caps,
    hiddenSize,
    intermediateSize: feedForward,
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    vocabSize,
    rmsNormEps: posNum(h, path, k('attention.layer_norm_rms_epsilon'), 1e-6),
    ropeTheta: posNum(h, path, k('rope.freq_base'), 10000),
    ropeScaling,
    maxPositionEmbeddings: maxPositions,
    tieWordEmbeddings: !h.tensors.has('output.weight'),
    qkvBias: arch === 'qwen2' ? true : qkvBias,
    oBias: arch === 'qwen2' ? false : oBias,
    slidingWindow: gptOss ? posInt(h, path, k('attention.sliding_window')) : null,
    // gpt-oss: llama.cpp's default pattern, sliding on even layers.
    ...(gptOss && { slidingLayers: Array.from({ length: numLayers }, (_, l) => l % 2 === 0), attentionSinks: true }),
    ...(moe && { moe }),
    ...(latent && { mla: latent.mla }),
    eosTokenIds: typeof eos === 'number' ? [eos] : [],
    bosTokenId: typeof bos === 'number' ? bos : null,
  };
}

/** Opens `path` and returns its config (closing the file). */
export function loadGgufConfig(path: string): ModelConfig {
  return ggufConfig(readGgufFile(path), path);
}

/** One contiguous copy from the file into a destination buffer. */
interface Copy {
  file: string;
  pos: number;
  length: number;
  at: number;
}

/**
 * One file of a GGUF model as the shard loader sees it (`ckpt.file(name)`): its path, and the reads of
 * the tensors in it. A whole GGUF has one; a split set one per part.
 */
export interface GgufFile {
  readonly path: string;
  info(tensor: string): { dtype: string; shape: number[] };
  tensorRange(tensor: string): { dtype: string; shape: number[]; offset: number; bytes: number };
  readBlock(tensor: string, dest: Uint8Array, r0: number, r1: number, c0: number, c1: number): void;
  readBlockAsync(tensor: string, dest: Uint8Array, r0: number, r1: number, c0: number, c1: number, signal?: AbortSignal): Promise<void>;
}

/**
 * The tensors of a GGUF file under their Hugging Face names, with the surface the shard loader uses
 * (`file(name).info/readBlock/readBlockAsync`, `bytesRead`, `close`).
 */
export class GgufCheckpoint {
  readonly path: string;
  readonly header: GgufHeader;
  bytesRead = 0;
  /** Open descriptors by file (a split set's parts are opened as their tensors are first read). */
  readonly #fds = new Map<string, number>();
  readonly #files = new Map<string, GgufFile>();
  /** Heads whose rows were permuted by llama.cpp's converter, per GGUF tensor name. */
  readonly #permuted = new Map<string, number>();
  readonly #headDim: number;
  readonly #arch: string;

  private constructor(path: string, header: GgufHeader, config: ModelConfig) {
    this.path = path;
    this.header = header;
    this.#headDim = config.headDim;
    this.#arch = String(header.metadata.get('general.architecture'));
    if (header.metadata.get('general.architecture') === 'llama') {
      for (let l = 0; l < config.numLayers; l++) {
        for (const kind of ['weight', 'bias']) {
          this.#permuted.set(`blk.${l}.attn_q.${kind}`, config.numHeads);
          this.#permuted.set(`blk.${l}.attn_k.${kind}`, config.numKvHeads);
        }
      }
    }
  }

  static open(path: string, config?: ModelConfig): GgufCheckpoint {
    const header = readGgufFile(path);
    const ckpt = new GgufCheckpoint(path, header, config ?? ggufConfig(header, path));
    // A file removed or replaced between the header read and the first tensor read is named then.
    ckpt.#fd(header.parts[0].path);
    return ckpt;
  }

  /** The file holding a tensor (one part of a split set), as the loader reads it. */
  file(tensor: string): GgufFile {
    const { t } = this.#tensor(tensor);
    let f = this.#files.get(t.file);
    if (!f) {
      f = {
        path: t.file,
        info: (n) => this.info(n),
        tensorRange: (n) => this.tensorRange(n),
        readBlock: (n, dest, r0, r1, c0, c1) => this.readBlock(n, dest, r0, r1, c0, c1),
        readBlockAsync: (n, dest, r0, r1, c0, c1, signal) => this.readBlockAsync(n, dest, r0, r1, c0, c1, signal),
      };
      this.#files.set(t.file, f);
    }
    return f;
  }

  #fd(file: string): number {
    let fd = this.#fds.get(file);
    if (fd === undefined) {
      fd = openModelFile(file);
      this.#fds.set(file, fd);
    }
    return fd;
  }

  has(tensor: string): boolean {
    const g = ggufTensorRef(tensor, this.#arch);
    const t = g && this.header.tensors.get(g.name);
    return !!t && (g.index === undefined || g.index < t.shape[0]);
  }

  /** dtype (F32/F16/BF16/Q8_0/Q4_0) and row-major shape of an HF-named tensor (one expert's slab of a stacked one). */
  info(tensor: string): { dtype: string; shape: number[] } {
    const { t } = this.#tensor(tensor);
    return { dtype: t.type, shape: t.shape };
  }

  /** Where an HF-named tensor's bytes lie in its file (one expert's slab of a stacked tensor): [offset, offset + bytes). */
  tensorRange(tensor: string): { dtype: string; shape: number[]; offset: number; bytes: number } {
    const { t } = this.#tensor(tensor);
    return { dtype: t.type, shape: t.shape, offset: t.offset, bytes: t.bytes };
  }

  /** The GGUF tensor behind an HF name, narrowed to its slab for one expert (offset and shape). */
  #tensor(hf: string): { t: GgufTensorInfo; gguf: string } {
    const g = ggufTensorRef(hf, this.#arch);
    const t = g === null ? undefined : this.header.tensors.get(g.name);
    if (!g || !t) throw new ModelFormatError(`${basename(this.path)}: missing tensor ${g?.name ?? hf} (${hf})`, this.path, g?.name ?? hf);
    if (g.index === undefined) return { t, gguf: g.name };
    if (g.index >= t.shape[0]) throw new ModelFormatError(`${basename(this.path)}: ${g.name} holds ${t.shape[0]} experts, not expert ${g.index} (${hf})`, this.path, g.name);
    const slab = t.bytes / t.shape[0];
    return { t: { ...t, shape: t.shape.slice(1), dims: t.dims.slice(0, -1), offset: t.offset + g.index * slab, bytes: slab }, gguf: g.name };
  }

  /** The file ranges holding rows [r0, r1) × columns [c0, c1) of `tensor`, in the order they go into dest. */
  #plan(tensor: string, dest: Uint8Array, r0: number, r1: number, c0: number, c1: number): Copy[] {
    const { t, gguf } = this.#tensor(tensor);
    const file = basename(this.path);
    const type = Object.values(GGML_TYPES).find((x) => x.name === t.type)!;
    // 1-D tensors: elements are the "rows" that RoPE permutes, each one element wide.
    const oneD = t.shape.length === 1;
    const rows = oneD ? t.shape[0] : t.shape[0];
    const cols = oneD ? 1 : t.shape.slice(1).reduce((a, b) => a * b, 1);
    if (oneD) {
      if (r0 !== 0 || r1 !== 1) throw new Error(`${file}: ${tensor} is 1-D; read rows [0, 1)`);
      [r0, r1, c0, c1] = [c0, c1, 0, 1];
    }
    if (r0 < 0 || r1 > rows || r0 > r1 || c0 < 0 || c1 > cols || c0 > c1) {
      throw new Error(`${file}: block rows [${r0},${r1}) cols [${c0},${c1}) outside ${tensor} [${t.shape}]`);
    }
    const be = type.blockElems;
    if (c0 % be || c1 % be) {
      throw new UnsupportedModelError(
        `${file}: cannot slice ${tensor} (${t.type}) at columns [${c0}, ${c1}): a tensor-parallel slice of a quantized matrix must start and end on a ${be}-element block boundary`,
      );
    }
    const rowBytes = (cols / be) * type.blockBytes;
    const segBytes = ((c1 - c0) / be) * type.blockBytes;
    const need = (r1 - r0) * segBytes;
    if (dest.byteLength < need) throw new Error(`readBlock: destination has ${dest.byteLength} bytes, ${tensor} block needs ${need}`);
    const heads = this.#permuted.get(gguf);
    const hd = this.#headDim;
    if (heads !== undefined && rows !== heads * hd) {
      throw new ModelFormatError(`${file}: ${tensor} has ${rows} rows, expected ${heads} heads × ${hd}`, this.path, tensor);
    }
    const copies: Copy[] = [];
    for (let r = r0; r < r1; r++) {
      let src = r;
      if (heads !== undefined) {
        // HF row h·hd + s·hd/2 + i sits at llama.cpp row h·hd + 2i + s.
        const h = Math.floor(r / hd);
        const j = r % hd;
        const half = hd / 2;
        src = h * hd + 2 * (j % half) + Math.floor(j / half);
      }
      const pos = t.offset + src * rowBytes + (c0 / be) * type.blockBytes;
      const at = (r - r0) * segBytes;
      const last = copies[copies.length - 1];
      if (last && last.pos + last.length === pos && last.at + last.length === at) last.length += segBytes;
      else copies.push({ file: t.file, pos, length: segBytes, at });
    }
    return copies;
  }

  readBlock(tensor: string, dest: Uint8Array, r0: number, r1: number, c0: number, c1: number): void {
    for (const cp of this.#plan(tensor, dest, r0, r1, c0, c1)) {
      const fd = this.#fd(cp.file);
      let done = 0;
      while (done < cp.length) {
        const n = readSync(fd, dest, cp.at + done, cp.length - done, cp.pos + done);
        if (n === 0) throw new ModelFormatError(`${basename(cp.file)}: truncated while reading tensor ${tensor}`, cp.file, tensor);
        done += n;
      }
      this.bytesRead += cp.length;
    }
  }

  async readBlockAsync(tensor: string, dest: Uint8Array, r0: number, r1: number, c0: number, c1: number, signal?: AbortSignal): Promise<void> {
    for (const cp of this.#plan(tensor, dest, r0, r1, c0, c1)) {
      signal?.throwIfAborted();
      const fd = this.#fd(cp.file);
      let done = 0;
      while (done < cp.length) {
        const { bytesRead } = await readAsync(fd, dest, cp.at + done, cp.length - done, cp.pos + done);
        if (bytesRead === 0) throw new ModelFormatError(`${basename(cp.file)}: truncated while reading tensor ${tensor}`, cp.file, tensor);
        done += bytesRead;
      }
      this.bytesRead += cp.length;
    }
  }

  close(): void {
    for (const fd of this.#fds.values()) {
      try {
        closeSync(fd);
      } catch {
        // already closed
      }
    }
    this.#fds.clear();
  }
}
