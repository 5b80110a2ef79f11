/**
 * The mixture-of-experts and latent-attention parts of HF → GGUF, in the layouts llama.cpp's own
 * converter writes and its loader reads:
 * - routed experts stacked into one 3-D tensor per projection, `blk.N.ffn_{gate,up,down}_exps.weight`
 *   ([experts, I, hidden] / [experts, hidden, I]), the router as `ffn_gate_inp` (+ `.bias`, gpt-oss),
 *   DeepSeek's correction bias as `exp_probs_b.bias`, shared experts as `ffn_*_shexp`;
 * - gpt-oss's merged input-major `gate_up_proj` [E, hidden, 2I] split into gate (even columns) and up
 *   (odd) and transposed, `down_proj` transposed, biases split the same way;
 * - DeepSeek's kv_b_proj split per head into `attn_k_b` [H, kvLoraRank, nope] (key rows transposed) and
 *   `attn_v_b` [H, v, kvLoraRank], with the MLA hyper-parameters (key_length = kvLoraRank + rope over
 *   one KV head, key_length_mla = nope + rope).
 * What llama.cpp cannot express is refused with the reason.
 */
import type { MlaConfig, ModelConfig, MoeConfig } from '../config/config.js';
import { UnsupportedModelError } from '../errors.js';
import type { Checkpoint } from '../safetensors/checkpoint.js';
import { type GgufArch, type PlannedTensor, directTensor, readAsF32 } from './convert-tensors.js';
import { gguf, type GgufMetadata } from './write.js';

/** Refuses configurations a llama.cpp arch has no way to state. */
export function checkMoeExport(arch: GgufArch, cfg: ModelConfig, dir: string): void {
  const moe = cfg.moe;
  const refuse = (why: string) => {
    throw new UnsupportedModelError(`GGUF export: ${why} is not expressed for llama.cpp arch ${arch} (${dir})`);
  };
  if (arch === 'qwen3moe') {
    // llama.cpp's qwen3moe runs every layer sparse and always renormalises the top-k weights.
    if (moe!.sparse.some((s) => !s)) refuse('a dense layer among MoE layers (mlp_only_layers / decoder_sparse_step)');
    if (!moe!.normTopK) refuse('norm_topk_prob=false');
  }
  if (arch === 'deepseek2') {
    const firstMoe = moe!.sparse.indexOf(true);
    if (moe!.sparse.some((s, l) => s !== l >= firstMoe)) refuse('moe_layer_freq other than 1');
    if (!cfg.mla!.ropeInterleave) refuse('rope_interleave=false');
  }
  if (arch === 'gpt-oss' && cfg.slidingLayers?.some((s, l) => s !== (l % 2 === 0))) refuse('a layer_types pattern other than sliding/full alternating from layer 0');
}

/** Several same-shaped HF tensors stacked along a new first dimension (the experts of a layer). */
function stacked(ckpt: Checkpoint, gguf: string, names: string[]): PlannedTensor {
  const shape = ckpt.info(names[0]).shape;
  for (const n of names) ckpt.info(n); // fail early, naming a missing tensor
  const one = shape.reduce((a, b) => a * b, 1);
  return {
    gguf,
    shape: [names.length, ...shape],
    from: names,
    values: () => {
      const out = new Float32Array(names.length * one);
      names.forEach((n, i) => out.set(readAsF32(ckpt, n), i * one));
      return out;
    },
  };
}

/** [rows, cols] → [cols, rows]. */
function transpose(v: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(v.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = v[r * cols + c];
  return out;
}

/** Every `parts`-th column starting at `part` of a [rows, cols·parts] matrix (or a vector when rows = 1). */
function columns(v: Float32Array, rows: number, width: number, parts: number, part: number): Float32Array {
  const out = new Float32Array(rows * width);
  for (let r = 0; r < rows; r++) for (let c = 0; c < width; c++) out[r * width + c] = v[r * width * parts + c * parts + part];
  return out;
}

/** A routed/shared-expert MoE layer's tensors. */
export function moePlan(ckpt: Checkpoint, cfg: ModelConfig, moe: MoeConfig, l: number): PlannedTensor[] {
  const { block, router, projections, layout } = cfg.caps.moe!.tensors;
  const p = `model.layers.${l}.${block}`;
  const b = `blk.${l}`;
  const direct = (hf: string, g: string) => directTensor(ckpt, cfg, hf, g);
  const out: PlannedTensor[] = [direct(`${p}.${router}.weight`, `${b}.ffn_gate_inp.weight`)];
  const E = moe.experts;
  if (layout === 'merged') return [...out, direct(`${p}.${router}.bias`, `${b}.ffn_gate_inp.bias`), ...mergedExperts(ckpt, p, b, E, cfg.hiddenSize, moe.expertIntermediate)];
  if (moe.routing === 'sigmoid-grouped') out.push(direct(`${p}.${router}.e_score_correction_bias`, `${b}.exp_probs_b.bias`));
  const experts = (proj: string) => Array.from({ length: E }, (_, e) => `${p}.experts.${e}.${proj}.weight`);
  out.push(stacked(ckpt, `${b}.ffn_gate_exps.weight`, experts(projections[0])));
  out.push(stacked(ckpt, `${b}.ffn_up_exps.weight`, experts(projections[1])));
  out.push(stacked(ckpt, `${b}.ffn_down_exps.weight`, experts(projections[2])));
  if (moe.sharedIntermediate) {
    for (const [proj, short] of [['gate_proj', 'gate'], ['up_proj', 'up'], ['down_proj', 'down']]) out.push(direct(`${p}.shared_experts.${proj}.weight`, `${b}.ffn_${short}_shexp.weight`));
  }
  return out;
}

/** gpt-oss: [E, D, 2I] gate_up (gate even columns) → gate/up [E, I, D]; [E, I, D] down → [E, D, I]; biases split likewise. */
function mergedExperts(ckpt: Checkpoint, p: string, b: string, E: number, D: number, I: number): PlannedTensor[] {
  const gateUp = `${p}.experts.gate_up_proj`;
  const down = `${p}.experts.down_proj`;
  const gateUpBias = `${p}.experts.gate_up_proj_bias`;
  const downBias = `${p}.experts.down_proj_bias`;
  for (const n of [gateUp, down, gateUpBias, downBias]) ckpt.info(n);
  const perExpert = (name: string, size: number, f: (v: Float32Array) => Float32Array) => () => {
    const all = readAsF32(ckpt, name);
    const out = new Float32Array(E * size);
    for (let e = 0; e < E; e++) out.set(f(all.subarray(e * (all.length / E), (e + 1) * (all.length / E))), e * size);
    return out;
  };
  const part = (k: number): PlannedTensor => ({
    gguf: `${b}.ffn_${k ? 'up' : 'gate'}_exps.weight`,
    shape: [E, I, D],
    from: [gateUp],
    values: perExpert(gateUp, I * D, (v) => transpose(columns(v, D, I, 2, k), D, I)),
  });
  const biasPart = (k: number): PlannedTensor => ({
    gguf: `${b}.ffn_${k ? 'up' : 'gate'}_exps.bias`,
    shape: [E, I],
    from: [gateUpBias],
    values: perExpert(gateUpBias, I, (v) => columns(v, 1, I, 2, k)),
  });
  return [
    part(0),
    part(1),
    { gguf: `${b}.ffn_down_exps.weight`, shape: [E, D, I], from: [down], values: perExpert(down, D * I, (v) => transpose(v, I, D)) },
    biasPart(0),
    biasPart(1),
    { gguf: `${b}.ffn_down_exps.bias`, shape: [E, D], from: [downBias], values: () => readAsF32(ckpt, downBias) },
  ];
}

/** DeepSeek's latent attention tensors, kv_b split per head as llama.cpp's MLA path reads it. */
export function mlaPlan(ckpt: Checkpoint, cfg: ModelConfig, m: MlaConfig, l: number): PlannedTensor[] {
  const a = `model.layers.${l}.self_attn`;
  const b = `blk.${l}`;
  const direct = (hf: string, g: string) => directTensor(ckpt, cfg, hf, g);
  const H = cfg.numHeads;
  const { nopeDim: nope, vDim: v, kvLoraRank: L } = m;
  const kvB = `${a}.kv_b_proj.weight`;
  ckpt.info(kvB);
  const perHead = (f: (rows: Float32Array) => Float32Array, size: number) => () => {
    const all = readAsF32(ckpt, kvB);
    const out = new Float32Array(H * size);
    for (let h = 0; h < H; h++) out.set(f(all.subarray(h * (nope + v) * L, (h + 1) * (nope + v) * L)), h * size);
    return out;
  };
  return [
    ...(m.qLoraRank
      ? [direct(`${a}.q_a_proj.weight`, `${b}.attn_q_a.weight`), direct(`${a}.q_a_layernorm.weight`, `${b}.attn_q_a_norm.weight`), direct(`${a}.q_b_proj.weight`, `${b}.attn_q_b.weight`)]
      : [direct(`${a}.q_proj.weight`, `${b}.attn_q.weight`)]),
    direct(`${a}.kv_a_proj_with_mqa.weight`, `${b}.attn_kv_a_mqa.weight`),
    direct(`${a}.kv_a_layernorm.weight`, `${b}.attn_kv_a_norm.weight`),
    { gguf: `${b}.attn_k_b.weight`, shape: [H, L, nope], from: [kvB], values: perHead((rows) => transpose(rows.subarray(0, nope * L), nope, L), L * nope) },
    { gguf: `${b}.attn_v_b.weight`, shape: [H, v, L], from: [kvB], values: perHead((rows) => rows.slice(nope * L), v * L) },
    direct(`${a}.o_proj.weight`, `${b}.attn_output.weight`),
  ];
}

/** The MoE / MLA / sliding-window hyper-parameters (after the common ones, so MLA's head sizes win). */
export function moeHyperParameters(arch: GgufArch, cfg: ModelConfig): GgufMetadata {
  const m: GgufMetadata = {};
  const k = (s: string) => `${arch}.${s}`;
  const moe = cfg.moe;
  if (moe) {
    m[k('expert_count')] = gguf.u32(moe.experts);
    m[k('expert_used_count')] = gguf.u32(moe.topK);
    if (arch !== 'llama') m[k('expert_feed_forward_length')] = gguf.u32(moe.expertIntermediate);
  }
  if (arch === 'deepseek2') {
    const mla = cfg.mla!;
    Object.assign(m, {
      [k('leading_dense_block_count')]: gguf.u32(moe!.sparse.indexOf(true) < 0 ? cfg.numLayers : moe!.sparse.indexOf(true)),
      // llama.cpp requires the key except for its "lite" layer counts; 0 means a plain q_proj.
      [k('attention.q_lora_rank')]: gguf.u32(mla.qLoraRank),
      [k('attention.kv_lora_rank')]: gguf.u32(mla.kvLoraRank),
      // MLA runs as one shared KV "head" of latent + rope values, decompressed per head.
      [k('attention.head_count_kv')]: gguf.u32(1),
      [k('attention.key_length')]: gguf.u32(mla.kvLoraRank + mla.ropeDim),
      [k('attention.value_length')]: gguf.u32(mla.kvLoraRank),
      [k('attention.key_length_mla')]: gguf.u32(mla.nopeDim + mla.ropeDim),
      [k('attention.value_length_mla')]: gguf.u32(mla.vDim),
      [k('rope.dimension_count')]: gguf.u32(mla.ropeDim),
      [k('expert_shared_count')]: gguf.u32(moe!.sharedIntermediate / moe!.expertIntermediate),
      [k('expert_weights_scale')]: gguf.f32(moe!.scalingFactor),
      [k('expert_weights_norm')]: gguf.bool(moe!.normTopK),
      [k('expert_gating_func')]: gguf.u32(2), // sigmoid
      [k('expert_group_count')]: gguf.u32(moe!.groups),
      [k('expert_group_used_count')]: gguf.u32(moe!.topkGroups),
    });
  }
  if (arch === 'gpt-oss') m[k('attention.sliding_window')] = gguf.u32(cfg.slidingWindow!);
  const rs = cfg.ropeScaling;
  if (rs?.type === 'yarn') {
    m[k('rope.scaling.type')] = gguf.str('yarn');
    m[k('rope.scaling.factor')] = gguf.f32(rs.factor);
    m[k('rope.scaling.original_context_length')] = gguf.u32(rs.originalMaxPositionEmbeddings);
    m[k('rope.scaling.yarn_beta_fast')] = gguf.f32(rs.yarn!.betaFast);
    m[k('rope.scaling.yarn_beta_slow')] = gguf.f32(rs.yarn!.betaSlow);
    // deepseek2 stores 0.1 · mscale_all_dim (its loader divides by 0.1 again).
    if (arch === 'deepseek2' && rs.yarn!.mscaleAllDim) m[k('rope.scaling.yarn_log_multiplier')] = gguf.f32(0.1 * rs.yarn!.mscaleAllDim);
  }
  return m;
}
