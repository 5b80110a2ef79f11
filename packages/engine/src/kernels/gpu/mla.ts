/**
 * Multi-head latent attention on the GPU (WGSL in wgsl-mla.ts), this rank's heads, the compressed cache
 * (one [capacity, kv_lora_rank + rope] buffer per layer, on every rank). Per call:
 *   q = q_b(rmsnorm(q_a(x))) or q_proj(x); its RoPE parts rotated (interleaved pairs);
 *   [c, kr] = kv_a(x); kr rotated; c normed; the row stored in the cache;
 *   qlat_h = kb_h·q_nope_h; scores, softmax and ō_h over the cache; att_h = vb_h·ō_h.
 * The caller applies o_proj (and its all-reduce on a tensor rank), as for grouped-query attention.
 */
import type { MlaConfig } from '../../config/config.js';
import type { Weight } from '../backend.js';
import type { MlaWeights } from '../../model/weights-mla.js';
import type { GpuContext } from './context.js';
import { createStorage, type GpuWeight } from './buffers.js';
import { LayerUploads } from './uploads.js';
import { split, type Dispatch, type GpuKernels, type StepUniform } from './ops.js';
import { MLA_CORE, MLA_LATENT, MLA_ROPE, headMatvecShader } from './wgsl-mla.js';
import { WG } from './wgsl.js';

/** HF builds the latent norms with DeepseekV3RMSNorm's default eps (model/attention-mla.ts). */
const LATENT_NORM_EPS = 1e-6;

/** Per-head matrices of one kind stacked in one buffer ([heads·rows, cols], storage dtype). */
interface HeadStack {
  buffer: GPUBuffer;
  dtype: Weight['dtype'];
  rows: number;
  cols: number;
}

export interface GpuMlaLayer {
  qA: GpuWeight | null;
  qANorm: GPUBuffer | null;
  q: GpuWeight;
  kvA: GpuWeight;
  kvANorm: GPUBuffer;
  kb: HeadStack;
  vb: HeadStack;
  o: GpuWeight;
  uploads: LayerUploads;
}

/** Scratch for a shard's MLA layers, [maxBatch, ·] each. */
export interface GpuMlaActivations {
  qa: GPUBuffer;
  kva: GPUBuffer;
  qlat: GPUBuffer;
  olat: GPUBuffer;
}

export async function allocateMlaActivations(ctx: GpuContext, m: MlaConfig, heads: number, maxBatch: number): Promise<GpuMlaActivations> {
  const f = (floats: number, name: string) => createStorage(ctx, Math.max(1, floats) * 4, `MLA ${name}`);
  return {
    qa: await f(maxBatch * m.qLoraRank, 'q latent'),
    kva: await f(maxBatch * (m.kvLoraRank + m.ropeDim), 'kv latent'),
    qlat: await f(maxBatch * heads * m.kvLoraRank, 'absorbed queries'),
    olat: await f(maxBatch * heads * m.kvLoraRank, 'weighted latents'),
  };
}

export async function uploadMlaLayer(ctx: GpuContext, w: MlaWeights, label: string): Promise<GpuMlaLayer> {
  const up = new LayerUploads(ctx, label);
  const stack = async (heads: Weight[], name: string): Promise<HeadStack> => {
    const one = heads[0].bytes.byteLength;
    const bytes = new Uint8Array(heads.length * one);
    heads.forEach((h, i) => bytes.set(h.bytes.subarray(0, one), i * one));
    return { buffer: await up.bytes(bytes, name), dtype: heads[0].dtype, rows: heads[0].rows, cols: heads[0].cols };
  };
  return {
    qA: w.qA ? await up.matrix(w.qA, 'q_a_proj') : null,
    qANorm: w.qANorm ? await up.vector(w.qANorm, 'q_a_layernorm') : null,
    q: await up.matrix(w.q, w.qA ? 'q_b_proj' : 'q_proj'),
    kvA: await up.matrix(w.kvA, 'kv_a_proj_with_mqa'),
    kvANorm: await up.vector(w.kvANorm, 'kv_a_layernorm'),
    kb: await stack(w.kb, 'k_b (per head)'),
    vb: await stack(w.vb, 'v_b (per head)'),
    o: await up.matrix(w.o, 'o_proj'),
    uploads: up,
  };
}

/** The dispatches from the normed input x to att [n, heads·v] (before o_proj), storing the tokens' latents in `cache`. */
export function mlaDispatches(
  K: GpuKernels,
  L: GpuMlaLayer,
  m: MlaConfig,
  act: GpuMlaActivations,
  io: { x: GPUBuffer; q: GPUBuffer; att: GPUBuffer; scores: GPUBuffer; cs: GPUBuffer; cache: GPUBuffer; maxSeq: number },
  heads: number,
  st: StepUniform,
): Dispatch[] {
  const qk = m.nopeDim + m.ropeDim;
  const width = m.kvLoraRank + m.ropeDim;
  const ds: Dispatch[] = [];
  // q = q_b(rmsnorm(q_a(x))) or q_proj(x)
  if (L.qA) {
    ds.push(...K.linear('q_a_proj', L.qA, io.x, act.qa, st));
    ds.push(K.rmsnorm(act.qa, L.qANorm!, null, m.qLoraRank, 1, LATENT_NORM_EPS, st));
    ds.push(...K.linear('q_b_proj', L.q, act.qa, io.q, st));
  } else ds.push(...K.linear('q_proj', L.q, io.x, io.q, st));
  // [c, kr] = kv_a(x)
  ds.push(...K.linear('kv_a_proj', L.kvA, io.x, act.kva, st));
  // Rotate the RoPE parts (each query head's, the shared key's), then norm and store the latents.
  const rope = (x: GPUBuffer, n: number, stride: number, offset: number): Dispatch => {
    const pipeline = K.pipeline('mla_rope', () => MLA_ROPE);
    const params = K.params('mla rope.params', [
      ['u32', n],
      ['u32', stride],
      ['u32', offset],
      ['u32', m.ropeDim],
    ]);
    return { label: 'mla rope', pipeline, bindGroup: K.bind('mla rope', pipeline, [params, st.buffer, x, io.cs]), grid: (b) => split(Math.ceil((b * n * m.ropeDim) / 2 / WG)) };
  };
  ds.push(rope(io.q, heads, qk, m.nopeDim), rope(act.kva, 1, width, m.kvLoraRank));
  const latent = K.pipeline('mla_latent', () => MLA_LATENT);
  const latentParams = K.params('mla latent.params', [
    ['u32', m.kvLoraRank],
    ['u32', width],
    ['f32', LATENT_NORM_EPS],
  ]);
  ds.push({ label: 'mla latent', pipeline: latent, bindGroup: K.bind('mla latent', latent, [latentParams, st.buffer, act.kva, L.kvANorm, io.cache]), grid: (n) => [n, 1, 1] });
  // qlat_h = kb_h·q_nope_h; scores and ō over the cache; att_h = vb_h·ō_h.
  const perHead = (s: HeadStack, x: GPUBuffer, xStride: number, out: GPUBuffer, label: string): Dispatch => {
    const pipeline = K.pipeline(`mla_head_matvec_${s.dtype}`, () => headMatvecShader(s.dtype));
    const params = K.params(`${label}.params`, [
      ['u32', s.rows],
      ['u32', s.cols],
      ['u32', heads],
      ['u32', xStride],
    ]);
    return { label, pipeline, bindGroup: K.bind(label, pipeline, [params, st.buffer, s.buffer, x, out]), grid: (n) => [s.rows, n * heads, 1] };
  };
  ds.push(perHead(L.kb, io.q, qk, act.qlat, 'mla absorb'));
  const core = K.pipeline('mla_core', () => MLA_CORE);
  const coreParams = K.params('mla core.params', [
    ['u32', heads],
    ['u32', m.kvLoraRank],
    ['u32', m.nopeDim],
    ['u32', m.ropeDim],
    ['u32', io.maxSeq],
    ['f32', m.softmaxScale],
  ]);
  ds.push({ label: 'mla core', pipeline: core, bindGroup: K.bind('mla core', core, [coreParams, st.buffer, io.q, act.qlat, io.cache, io.scores, act.olat]), grid: (n) => [heads, n, 1] });
  ds.push(perHead(L.vb, act.olat, m.kvLoraRank, io.att, 'mla value'));
  return ds;
}
