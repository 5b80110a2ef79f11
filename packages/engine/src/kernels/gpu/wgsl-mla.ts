/**
 * WGSL for multi-head latent attention on the GPU (host side: mla.ts), the same maths as
 * model/attention-mla.ts with the compressed cache (kv_lora_rank + rope values per token):
 * - `MLA_ROPE`: interleaved RoPE (pairs 2i, 2i+1) on the RoPE part of each head of a strided row;
 * - `MLA_LATENT`: RMSNorm of each token's latent (the first kv_lora_rank values of its kv_a row), then
 *   the row [latent, rotated rope key] stored in the cache at the token's position;
 * - `headMatvecShader`: per-head matvec over a stack of per-head matrices — the key up-projection
 *   absorbed into the query (kb_h · q_nope) and the value up-projection of the weighted latent (vb_h · ō);
 * - `MLA_CORE`: per (head, token) scores qlat·c_t + q_rope·kr_t over the cache, softmax, and the
 *   attention-weighted latent ō.
 */
import type { DType } from '../backend.js';
import { REDUCE_SUM, STEP, WG, attentionSoftmax, weightAccessor } from './wgsl.js';

/** X[b, h, offset + 2i], X[b, h, offset + 2i + 1] rotated by the token's cos/sin (CS: [n, dim/2] pairs). */
export const MLA_ROPE = `${STEP}
struct Params { heads: u32, stride: u32, offset: u32, dim: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read> CS: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let half = P.dim / 2u;
  let g = gid.x + gid.y * nwg.x * ${WG}u;
  if (g >= S.n * P.heads * half) { return; }
  let i = g % half;
  let bh = g / half;
  let b = bh / P.heads;
  let o = bh * P.stride + P.offset + 2u * i;
  let c = CS[(b * half + i) * 2u];
  let s = CS[(b * half + i) * 2u + 1u];
  let x0 = X[o];
  let x1 = X[o + 1u];
  X[o] = x0 * c - x1 * s;
  X[o + 1u] = x1 * c + x0 * s;
}
`;

/** One workgroup per token: RMSNorm of KVA[b, 0..latent) in place, then KVA[b] → CACHE[pos0 + b]. */
export const MLA_LATENT = `${STEP}${REDUCE_SUM}
struct Params { latent: u32, width: u32, eps: f32, pad: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read_write> KVA: array<f32>;
@group(0) @binding(3) var<storage, read> NW: array<f32>;
@group(0) @binding(4) var<storage, read_write> CACHE: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let b = wid.x;
  if (b >= S.n) { return; }
  let o = b * P.width;
  var ss = 0.0;
  for (var j = tid; j < P.latent; j = j + ${WG}u) { ss = ss + KVA[o + j] * KVA[o + j]; }
  let scale = inverseSqrt(reduce_sum(tid, ss) / f32(P.latent) + P.eps);
  let c = (S.pos0 + b) * P.width;
  for (var j = tid; j < P.width; j = j + ${WG}u) {
    var v = KVA[o + j];
    if (j < P.latent) { v = NW[j] * (v * scale); }
    CACHE[c + j] = v;
  }
}
`;

/**
 * OUT[(b·heads + h)·rows + r] = Σ_c W[h·rows + r, c] · X[(b·heads + h)·xStride + c]: head h's own
 * [rows, cols] matrix of a per-head stack. Grid: (rows, n·heads).
 */
export function headMatvecShader(dtype: DType): string {
  return `${STEP}${REDUCE_SUM}
struct Params { rows: u32, cols: u32, heads: u32, xStride: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> X: array<f32>;
@group(0) @binding(4) var<storage, read_write> OUT: array<f32>;
${weightAccessor(dtype)}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let r = wid.x;
  let bh = wid.y;
  let live = r < P.rows && bh < S.n * P.heads;
  var acc = 0.0;
  if (live) {
    let wr = (bh % P.heads) * P.rows + r;
    let xo = bh * P.xStride;
    for (var c = tid; c < P.cols; c = c + ${WG}u) { acc = acc + w_at(wr, c) * X[xo + c]; }
  }
  let sum = reduce_sum(tid, acc);
  if (live && tid == 0u) { OUT[bh * P.rows + r] = sum; }
}
`;
}

/**
 * One workgroup per (head, token): score_t = scale·(QL·c_t + q_rope·kr_t) for cached positions t ≤ pos,
 * softmax, OL = Σ_t p_t·c_t. Q: [n, heads, nope + rope]; QL, OL: [n, heads, latent]; C: [capacity,
 * latent + rope]; SC: scratch [n, heads, maxSeq].
 */
export const MLA_CORE = `${STEP}${REDUCE_SUM}
struct Params { heads: u32, latent: u32, nope: u32, rope: u32, maxSeq: u32, scale: f32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> Q: array<f32>;
@group(0) @binding(3) var<storage, read> QL: array<f32>;
@group(0) @binding(4) var<storage, read> C: array<f32>;
@group(0) @binding(5) var<storage, read_write> SC: array<f32>;
@group(0) @binding(6) var<storage, read_write> OL: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let h = wid.x;
  let b = wid.y;
  if (h >= P.heads || b >= S.n) { return; }
  let pos = S.pos0 + b;
  let width = P.latent + P.rope;
  let bh = b * P.heads + h;
  let qr = bh * (P.nope + P.rope) + P.nope;
  let lo = bh * P.latent;
  let so = bh * P.maxSeq;
${attentionSoftmax('0u', `    let co = t * width;
    var d = 0.0;
    for (var j = 0u; j < P.latent; j = j + 1u) { d = d + QL[lo + j] * C[co + j]; }
    for (var j = 0u; j < P.rope; j = j + 1u) { d = d + Q[qr + j] * C[co + P.latent + j]; }`)}  storageBarrier();
  workgroupBarrier();
  for (var j = tid; j < P.latent; j = j + ${WG}u) {
    var acc = 0.0;
    for (var t = 0u; t <= pos; t = t + 1u) { acc = acc + SC[so + t] * C[t * width + j]; }
    OL[lo + j] = acc / total;
  }
}
`;
