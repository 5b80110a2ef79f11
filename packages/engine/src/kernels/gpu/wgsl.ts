/**
 * WGSL sources for the GPU backend. Every kernel reads the per-submission `Step` uniform
 * (`pos0`: position of the batch's first token, `n`: tokens in the batch) so bind groups are built
 * once and only that uniform changes between tokens. A step of several sequences gives each one's
 * RoPE/KV-store and attention dispatches its own Step, whose `row0` says where its rows start in
 * the step's activations (0 for a step of one sequence).
 *
 * Weights are bound as raw `array<u32>` in their storage dtype and widened per element by `w_at`
 * (f16/bf16 halves, GGUF Q8_0 and Q4_0 blocks), so no dequantized copy ever exists in GPU memory.
 * Layout is row-major [rows, cols] = [out, in], as in kernels/backend.ts.
 */
import type { DType } from '../backend.js';
import { I8X4, U8X4, quantWeightAccessor, weight8Accessor } from './quant-wgsl.js';

export const WG = 64;

/** Rows per workgroup of the row-block matvec. */
export const MATVEC_ROWS = 4;

export const STEP = /* wgsl */ `
struct Step { pos0: u32, n: u32, seed: u32, row0: u32 }
`;

/** Linear workgroup index for grids split over x and y (a dimension is limited to 65,535). */
export const LINEAR = /* wgsl */ `
fn wg_linear(wid: vec3u, nwg: vec3u) -> u32 { return wid.x + wid.y * nwg.x; }
`;

export const REDUCE_SUM = /* wgsl */ `
var<workgroup> red: array<f32, ${WG}>;
fn reduce_sum(tid: u32, v: f32) -> f32 {
  red[tid] = v;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s = s >> 1u) {
    if (tid < s) { red[tid] = red[tid] + red[tid + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
fn reduce_max(tid: u32, v: f32) -> f32 {
  red[tid] = v;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s = s >> 1u) {
    if (tid < s) { red[tid] = max(red[tid], red[tid + s]); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
`;

/** `w_at(r, c)`: element (r, c) of the weight bound as `W`, widened to f32. Needs `P.cols`. */
export function weightAccessor(dtype: DType): string {
  switch (dtype) {
    case 'f32':
      return `fn w_at(r: u32, c: u32) -> f32 { return bitcast<f32>(W[r * P.cols + c]); }`;
    case 'f16':
      return `fn w_at(r: u32, c: u32) -> f32 { let i = r * P.cols + c; return unpack2x16float(W[i >> 1u])[i & 1u]; }`;
    case 'bf16':
      return `fn w_at(r: u32, c: u32) -> f32 {
  let i = r * P.cols + c;
  return bitcast<f32>(((W[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u);
}`;
    default:
      // GGUF Q8_0/Q4_0, K-quants, MXFP4, MLX affine, FP8: kernels/gpu/quant-wgsl.ts
      return quantWeightAccessor(dtype);
  }
}

/**
 * Bindings shared by the weight kernels. `rows` are the rows of this chunk (a tensor larger than the
 * binding limit is split by rows), `rowOffset` where they land in `OUT`'s rows.
 * flags: bit 0 add bias B[rowOffset + r], bit 1 accumulate into OUT (fused residual add), bit 2 only the
 * batch's last token (x row n - 1 into out row 0: the LM head). Bit 2 is for the matvec kernel only.
 * `eps`: the RMSNorm epsilon of the row-block matvec's `norm` form.
 */
export const WEIGHT_HEADER = /* wgsl */ `
struct Params { rows: u32, cols: u32, rowOffset: u32, outStride: u32, xStride: u32, flags: u32, eps: f32, pad1: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> X: array<f32>;
@group(0) @binding(4) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(5) var<storage, read> B: array<f32>;
fn store(b: u32, r: u32, v: f32) {
  let o = b * P.outStride + P.rowOffset + r;
  var y = v;
  if ((P.flags & 1u) != 0u) { y = y + B[P.rowOffset + r]; }
  if ((P.flags & 2u) != 0u) { y = y + OUT[o]; }
  OUT[o] = y;
}
`;

/** One workgroup per output row; threads split the columns. Best for one or a few tokens (decode). */
export function matvecShader(dtype: DType): string {
  return `${STEP}${LINEAR}${WEIGHT_HEADER}${REDUCE_SUM}${weightAccessor(dtype)}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) tid: u32) {
  let r = wg_linear(wid, nwg);
  if (r >= P.rows) { return; }
  let last = (P.flags & 4u) != 0u;
  let count = select(S.n, 1u, last);
  for (var b = 0u; b < count; b = b + 1u) {
    var acc = 0.0;
    let xo = select(b, S.n - 1u, last) * P.xStride;
    for (var c = tid; c < P.cols; c = c + ${WG}u) { acc = acc + w_at(r, c) * X[xo + c]; }
    let sum = reduce_sum(tid, acc);
    if (tid == 0u) { store(b, r, sum); }
  }
}
`;
}

/**
 * matvecShader for the formats with an 8-wide accessor and no row-block decoder (MLX 4/8-bit, FP8,
 * Q5_K/Q6_K, MXFP4: quant-wgsl.ts `weight8Accessor`): one workgroup of `layout.lanes` threads per 4
 * rows; each thread takes 8 columns at a time, reads x there once for the 4 rows and decodes each row's
 * 8 weights with one scale lookup; the 4 rows' sums are joined once per token as the row-block matvec
 * joins them (rows8Sums). Tokens as in matvecShader (each token's sums alone, in the same order: a
 * row's bits do not depend on the step's other rows).
 */
export function matvec8Shader(dtype: DType, cols: number, layout: MatvecLayout = { lanes: WG, subgroups: false }): string {
  const w8 = weight8Accessor(dtype, cols);
  if (!w8) throw new Error(`matvec8Shader: no 8-wide accessor for ${dtype} with ${cols} columns`);
  return `${rows8Header(layout)}${STEP}${LINEAR}${WEIGHT_HEADER}
${rows8Red(layout)}
${w8}
@compute @workgroup_size(${layout.lanes})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) tid: u32) {
  let r0 = wg_linear(wid, nwg) * ${MATVEC_ROWS}u;
  if (r0 >= P.rows) { return; }
  let lastRow = P.rows - 1u;
  let last = (P.flags & 4u) != 0u;
  let count = select(S.n, 1u, last);
  for (var b = 0u; b < count; b = b + 1u) {
    let xo = select(b, S.n - 1u, last) * P.xStride;
${rows8Sums(layout, '0u', 'xo', 'lastRow')}
    if (tid == 0u) {
      for (var j = 0u; j < ${MATVEC_ROWS}u; j = j + 1u) { if (r0 + j < P.rows) { store(b, r0 + j, t4[j]); } }
    }
  }
}
`;
}

/** What the 8-wide kernels' WGSL starts with: the subgroups extension where the layout joins by subgroupAdd. */
export const rows8Header = (layout: MatvecLayout): string => (layout.subgroups ? 'enable subgroups;\n' : '');

/** Workgroup memory of rowsSums' tree for `values` sums per lane (none with subgroups). */
export const rowsRed = (layout: MatvecLayout, values: number): string => (layout.subgroups ? '' : `var<workgroup> red: array<f32, ${values * layout.lanes}>;`);

/** Workgroup memory of rows8Sums' tree (none with subgroups): the 4 rows' thread sums. */
export const rows8Red = (layout: MatvecLayout): string => rowsRed(layout, MATVEC_ROWS);

/**
 * The 8-wide kernels' sums (matvec8Shader, wgsl-moe.ts expertRowsShader): rows base + r0 + i (i < 4,
 * clamped to `lastRow`) against x at `xo` over `cols` columns (0: the thread only joins the sums), each
 * of the layout's lanes taking 8 columns per step through `w8`; then the 4 rows' lane sums joined as the
 * row-block matvec joins them (subgroupAdd, or a workgroup-memory tree in rows8Red) into
 * `t4: vec4<f32>`, row i's total in t4[i], in every lane. Every lane of the workgroup must run it.
 */
export function rows8Sums(layout: MatvecLayout, base: string, xo: string, lastRow: string, cols = 'P.cols'): string {
  return `${rowsSums(layout, MATVEC_ROWS, ['w8'], false, base, xo, lastRow, cols)}
    let t4 = vec4<f32>(${Array.from({ length: MATVEC_ROWS }, (_, i) => `t0[${i}]`).join(', ')});`;
}

/**
 * Per-lane sums of `rows` rows of each matrix (accessor `fns[m]`, rows `base + min(r0 + i, lastRow)`)
 * against x at `xo` over `cols` columns (0: the lane only joins), then joined into `t{m}[i]` in every lane.
 * Each lane takes 8 columns per step (`w8(row, c)`, or with `factored` MLX's `wdot8(row, c, x0, x1, xs)`,
 * xs = Σ of the 8 x values, formed once per step for all rows); the join is subgroupAdd or a tree in
 * rowsRed's workgroup memory (wgsl-moe-decode.ts runs 2 matrices and any row count; rows8Sums is 4 rows of one).
 * Every lane of the workgroup must run it.
 */
export function rowsSums(layout: MatvecLayout, rows: number, fns: string[], factored: boolean, base: string, xo: string, lastRow: string, cols: string): string {
  const T = layout.lanes;
  const R = Array.from({ length: rows }, (_, i) => i);
  const M = fns.map((_, m) => m);
  const acc = M.flatMap((m) => R.map((i) => `a${m}_${i}`));
  const join = layout.subgroups
    ? M.map((m) => `    var t${m}: array<f32, ${rows}>;\n${R.map((i) => `    t${m}[${i}] = subgroupAdd(a${m}_${i});`).join('\n')}`).join('\n')
    : `${acc.map((a, j) => `    red[${j * T}u + tid] = ${a};`).join('\n')}
    workgroupBarrier();
    for (var h = ${T / 2}u; h > 0u; h = h >> 1u) {
      if (tid < h) {
        for (var j = 0u; j < ${acc.length}u; j = j + 1u) { red[j * ${T}u + tid] = red[j * ${T}u + tid] + red[j * ${T}u + tid + h]; }
      }
      workgroupBarrier();
    }
${M.map((m) => `    var t${m}: array<f32, ${rows}>;\n${R.map((i) => `    t${m}[${i}] = red[${(m * rows + i) * T}u];`).join('\n')}`).join('\n')}
    // every lane has read the totals before a next pass's sums overwrite them
    workgroupBarrier();`;
  return `${acc.map((a) => `    var ${a} = 0.0;`).join('\n')}
    for (var c = tid * 8u; c < ${cols}; c = c + ${T * 8}u) {
      let x0 = vec4<f32>(X[${xo} + c], X[${xo} + c + 1u], X[${xo} + c + 2u], X[${xo} + c + 3u]);
      let x1 = vec4<f32>(X[${xo} + c + 4u], X[${xo} + c + 5u], X[${xo} + c + 6u], X[${xo} + c + 7u]);
${factored ? '      let xs = dot(x0 + x1, vec4<f32>(1.0));\n' : ''}${M.flatMap((m) =>
      R.map((i) => {
        const row = `${base} + min(r0 + ${i}u, ${lastRow})`;
        return factored
          ? `      a${m}_${i} = a${m}_${i} + ${fns[m]}(${row}, c, x0, x1, xs);`
          : `      { let w = ${fns[m]}(${row}, c); a${m}_${i} = a${m}_${i} + dot(w[0], x0) + dot(w[1], x1); }`;
      }),
    ).join('\n')}
    }
${join}`;
}

/**
 * Elements per step of the row-block matvec: one 16-byte load of f32/f16/bf16, one whole 32-element
 * GGUF block of Q8_0/Q4_0, two Q4_K sub-blocks (the low and high nibbles of the same 32 bytes, each word
 * read once); 0 for formats without a row-block decoder (Q5_K/Q6_K, MXFP4 and MLX of
 * quant-wgsl.ts). The kernel needs cols (and the x stride) divisible by it; `linear` falls back to
 * `matvecShader` otherwise.
 */
export function vectorWidth(dtype: DType): number {
  // 0: no row-block decoder (the formats of quant-wgsl.ts: matvec8Shader where they decode 8 at a time, else per element)
  return dtype === 'f32' ? 4 : dtype === 'f16' || dtype === 'bf16' ? 8 : dtype === 'q8_0' || dtype === 'q4_0' ? 32 : dtype === 'q4_k' ? 64 : 0;
}

/**
 * How the row-block matvec maps onto the device: `lanes` threads per workgroup, all working on the same
 * MATVEC_ROWS rows, and whether their partial sums are joined with subgroupAdd (no workgroup memory, no
 * barrier) or a workgroup-memory tree.
 */
export interface MatvecLayout {
  lanes: number;
  subgroups: boolean;
}

/**
 * The layout for a device: one workgroup = `subgroupMinSize` lanes (32 on Apple and NVIDIA GPUs, 8 on
 * lavapipe's 256-bit SIMD), so a workgroup is never split across subgroups and subgroupAdd over it is
 * the row sum whatever the implementation's lane numbering. Without a known subgroup size: 32 lanes.
 */
export function matvecLayout(f: { subgroups: boolean; subgroupMinSize: number }): MatvecLayout {
  const min = f.subgroupMinSize > 0 ? f.subgroupMinSize : 32;
  const lanes = Math.min(64, Math.max(4, 2 ** Math.floor(Math.log2(min))));
  return { lanes, subgroups: f.subgroups && f.subgroupMinSize > 0 };
}

/** 16-byte vectors per step of the row-block matvec: one for f32, two for f16/bf16, 8 for a 32-block. */
const vecsPerStep = (dtype: DType) => vectorWidth(dtype) / 4;

/**
 * `wv_<name>(u)`: step u's weights of the buffer `name`, widened to f32 vectors (Q8_0/Q4_0 unscaled),
 * and for Q8_0/Q4_0 `ws_<name>(u)`: the block's scale. Q4_K: `ws_<name>(u)` (both sub-blocks' scale and
 * min) and `wi_<name>(u)` (the step's first nibble word; matvecFastShader widens them itself).
 */
export function stepDecoder(dtype: DType, name: string): string {
  const V = vecsPerStep(dtype);
  const ret = `array<vec4<f32>, ${V}>`;
  // What wh_<name> returns (formats with 2+ vectors per step).
  const half = `array<vec4<f32>, ${Math.max(1, V / 2)}>`;
  switch (dtype) {
    case 'f32':
      return `fn wv_${name}(u: u32) -> ${ret} { return ${ret}(bitcast<vec4<f32>>(${name}[u])); }`;
    case 'f16':
      return `fn wv_${name}(u: u32) -> ${ret} {
  let w = ${name}[u];
  return ${ret}(vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)), vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)));
}
fn wh_${name}(u: u32, h: u32) -> ${half} {
  let w = ${name}[u];
  let p = select(w.xy, w.zw, h == 1u);
  return ${half}(vec4<f32>(unpack2x16float(p.x), unpack2x16float(p.y)));
}`;
    case 'bf16': {
      const un = (w: string) => `vec2<f32>(bitcast<f32>(${w} << 16u), bitcast<f32>(${w} & 0xffff0000u))`;
      return `fn wv_${name}(u: u32) -> ${ret} {
  let w = ${name}[u];
  return ${ret}(vec4<f32>(${un('w.x')}, ${un('w.y')}), vec4<f32>(${un('w.z')}, ${un('w.w')}));
}
fn wh_${name}(u: u32, h: u32) -> ${half} {
  let w = ${name}[u];
  let p = select(w.xy, w.zw, h == 1u);
  return ${half}(vec4<f32>(${un('p.x')}, ${un('p.y')}));
}`;
    }
    case 'q8_0':
      // 34-byte blocks: f16 scale, 32 signed bytes.
      return `${quantSteps(name, dtype)}
fn ws_${name}(u: u32) -> f32 { return unpack2x16float(rd16_${name}(u * 34u)).x; }
fn wv_${name}(u: u32) -> ${ret} {
${blockWords(name, 'u * 34u + 2u', 8)}
  return ${ret}(${range(8).map((j) => `i8x4(q${j})`).join(', ')});
}
fn wh_${name}(u: u32, h: u32) -> ${half} {
${blockWords(name, 'u * 34u + 2u + h * 16u', 4)}
  return ${half}(${range(4).map((j) => `i8x4(q${j})`).join(', ')});
}`;
    case 'q4_0':
      // 18-byte blocks: f16 scale, 16 bytes; element j < 16 is the low nibble of byte j, j + 16 the high one.
      return `${quantSteps(name, dtype)}
fn ws_${name}(u: u32) -> f32 { return unpack2x16float(rd16_${name}(u * 18u)).x; }
fn wv_${name}(u: u32) -> ${ret} {
${blockWords(name, 'u * 18u + 2u', 4)}
  return ${ret}(${[...range(4).map((j) => `u8x4(q${j} & 0x0f0f0f0fu) - 8.0`), ...range(4).map((j) => `u8x4((q${j} >> 4u) & 0x0f0f0f0fu) - 8.0`)].join(', ')});
}
fn wh_${name}(u: u32, h: u32) -> ${half} {
${blockWords(name, 'u * 18u + 2u', 4)}
  // Both halves come from the same 4 words (low, then high nibbles): read again per half (cache hits).
  let sh = h * 4u;
  return ${half}(${range(4).map((j) => `u8x4((q${j} >> sh) & 0x0f0f0f0fu) - 8.0`).join(', ')});
}`;
    case 'q4_k':
      // Step u: sub-blocks 2p and 2p + 1 (p = u % 4) of super-block u / 4, the low and high nibbles of its
      // bytes 32p..32p+31 (matvecFastShader reads the 8 words once at wi_<name>(u) and widens each half).
      return `${Q4K_SCALE.replaceAll('NAME', name)}
fn wi_${name}(u: u32) -> u32 { return (u >> 2u) * 36u + 4u + (u & 3u) * 8u; }`;
    default:
      throw new Error(`WebGPU backend: no row-block matvec for ${dtype} weights (vectorWidth 0: the per-element matvec runs them)`);
  }
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/**
 * Q4_K's 6-bit scale/min pairs (llama.cpp's get_scale_min_k4), so that a sub-block's weights are
 * d·scale·q − dmin·min. Those of all 4 low or all 4 high sub-blocks are unpacked from the super-block's 3
 * scale words at once and a sub-block's byte picked by shift: no branch on the sub-block (neighbouring lanes
 * differ in it, and a CPU driver's SIMD lanes would run both sides).
 */
const Q4K_UNPACK = /* wgsl */ `
  let s0 = NAME[b + 1u];
  let s1 = NAME[b + 2u];
  let s2 = NAME[b + 3u];
  let sw = select(s0 & 0x3f3f3f3fu, (s2 & 0x0f0f0f0fu) | ((s0 >> 2u) & 0x30303030u), hi);
  let mw = select(s1 & 0x3f3f3f3fu, ((s2 >> 4u) & 0x0f0f0f0fu) | ((s1 >> 2u) & 0x30303030u), hi);
  let dm = unpack2x16float(NAME[b]);`;

/** `ws_NAME(u) -> vec4<f32>`: (d·scale, dmin·min) of the pair step u's two sub-blocks (2p, 2p + 1). */
const Q4K_SCALE = /* wgsl */ `
fn ws_NAME(u: u32) -> vec4<f32> {
  let b = (u >> 2u) * 36u;
  let hi = (u & 3u) >= 2u;${Q4K_UNPACK}
  let sh = (u & 1u) * 16u;
  return vec4<f32>(dm.x * f32((sw >> sh) & 0xffu), dm.y * f32((mw >> sh) & 0xffu), dm.x * f32((sw >> (sh + 8u)) & 0xffu), dm.y * f32((mw >> (sh + 8u)) & 0xffu));
}`;

/**
 * The tiled matmul's Q4_K step (TILE_K = one 32-element sub-block; wgsl-matmul.ts): `wv_W(u)`, sub-block
 * u's nibbles widened, and `ws_W(u) -> vec2<f32>`, its (d·scale, dmin·min).
 */
export const Q4K_SUB_BLOCK = /* wgsl */ `${U8X4}
fn ws_W(u: u32) -> vec2<f32> {
  let b = (u >> 3u) * 36u;
  let hi = (u & 7u) >= 4u;${Q4K_UNPACK.replaceAll('NAME', 'W')}
  let sh = (u & 3u) * 8u;
  return vec2<f32>(dm.x * f32((sw >> sh) & 0xffu), dm.y * f32((mw >> sh) & 0xffu));
}
fn wv_W(u: u32) -> array<vec4<f32>, 8> {
  let i = (u >> 3u) * 36u + 4u + ((u & 7u) >> 1u) * 8u;
  let sh = (u & 1u) * 4u;
  return array<vec4<f32>, 8>(${range(8).map((j) => `u8x4((W[i + ${j}u] >> sh) & 0x0f0f0f0fu)`).join(', ')});
}`;

/**
 * The block's f16 scale read, and the byte-to-f32 helpers (quant-wgsl.ts) once per kernel: with W's
 * decoder (every kernel binds W; SwiGLU's W2 decoder shares them).
 */
function quantSteps(name: string, dtype: 'q8_0' | 'q4_0'): string {
  return `${name === 'W' ? (dtype === 'q8_0' ? I8X4 : U8X4) : ''}
fn rd16_${name}(o: u32) -> u32 { return (${name}[o >> 2u] >> ((o & 2u) * 8u)) & 0xffffu; }`;
}

/**
 * `q0..q<n-1>`: the n 4-byte groups from byte offset `off` (even: GGUF Q8_0/Q4_0 blocks are 34 and 18 bytes
 * long) of the buffer `name`, from n + 1 words read once. No branch on the alignment (neighbouring lanes
 * differ in it, and a CPU driver's SIMD lanes would run both sides): the next word's share, shifted by
 * 16 − s then 16, is 0 when s is 0.
 */
function blockWords(name: string, off: string, n: number): string {
  return `  let o = ${off};
  let i = o >> 2u;
  let s = (o & 2u) * 8u;
  let t = 16u - s;
${range(n + 1).map((k) => `  let a${k} = ${name}[i + ${k}u];`).join('\n')}
${range(n).map((k) => `  let q${k} = (a${k} >> s) | ((a${k + 1} << t) << 16u);`).join('\n')}`;
}

export interface RowBlockOptions {
  /**
   * SwiGLU: W is gate_proj and W2 (binding 6) up_proj, same shape and chunking; stores silu(gate·x) ·
   * (up·x) — one pass over both weights, no gate/up activations in memory, no separate gate kernel.
   */
  glu?: boolean;
  /**
   * RMSNorm of x fused in (NW, binding 7: the norm weight; P.eps): every workgroup reads all of x anyway,
   * so it also sums x² while streaming its rows and scales its dot products by 1/rms at the end — the
   * separate norm dispatch and its normalised copy of x are gone (Σ w·(x∘g) / rms = (W · norm(x))).
   */
  norm?: boolean;
  /**
   * Tokens per workgroup (default 1): each weight vector a lane loads meets this many tokens' x, so a
   * step of several decode rows reads the weights once per `tokens` rows. Every token's sums are formed
   * by the same operations in the same order as in the one-token kernel: a row's result does not
   * depend on the tokens it shares a workgroup with. Not for the LM head's last-token form (flag 4).
   */
  tokens?: number;
  /** Rows per workgroup (default MATVEC_ROWS); the grid's x must cover ceil(rows / this). */
  rows?: number;
  /**
   * Decode each step's weights in two halves (`wh_<name>`: f16/bf16/Q8_0/Q4_0; f32's one-vector step
   * ignores it): the same sums in the same order, with half the decoded values live at once.
   */
  halves?: boolean;
}

/**
 * Row-block matvec for decode: a workgroup of `lanes` threads computes MATVEC_ROWS output rows of one
 * token (grid z: the token, for the few-token batches that take this kernel). In each step every lane
 * takes the next 16-byte vector (or GGUF block) of the rows, so consecutive lanes read consecutive
 * addresses of a row (coalesced), and the step's slice of x is loaded once and used for all rows. The
 * lanes' partial sums are joined once per row at the end (subgroupAdd, or a workgroup-memory tree without
 * subgroups). A form that kept 8 tokens per workgroup (weights read once per 8 tokens) was tried for
 * prompt batches: its 32 accumulators made llvmpipe spend minutes compiling it, and prompt batches go to
 * the tiled matmul. The grouped form here (`tokens`, 4 in use) serves steps of several sequences' decode
 * rows, where each row must keep its one-token bits.
 */
export function matvecFastShader(dtype: DType, layout: MatvecLayout, o: RowBlockOptions = {}): string {
  const T = layout.lanes;
  const R = o.rows ?? MATVEC_ROWS;
  const V = vecsPerStep(dtype);
  const TK = o.tokens ?? 1;
  const toks = Array.from({ length: TK }, (_, t) => t);
  // Per-token names: unchanged for the one-token kernel.
  const sfx = (t: number) => (TK === 1 ? '' : `_t${t}`);
  const quant = dtype === 'q8_0' || dtype === 'q4_0' || dtype === 'q4_k';
  // Q4_K's weights are d·scale·q − dmin·min: Σ w·x = d·scale·Σ q·x − dmin·min·Σ x, and Σ x of each
  // sub-block of the step (xs<h>) is formed once per token for all the workgroup's rows and both matrices.
  const mins = dtype === 'q4_k';
  const wType = quant ? 'array<u32>' : 'array<vec4<u32>>';
  const header = WEIGHT_HEADER.replace('var<storage, read> W: array<u32>;', `var<storage, read> W: ${wType};`).replace(
    'var<storage, read> X: array<f32>;',
    'var<storage, read> X: array<vec4<f32>>;',
  );
  const w2 = o.glu ? `@group(0) @binding(6) var<storage, read> W2: ${wType};\n${stepDecoder(dtype, 'W2')}` : '';
  const mats = o.glu ? ['W', 'W2'] : ['W'];
  const rows = Array.from({ length: R }, (_, i) => i);
  // Accumulator acc<m>_<row><token> (m: 0 = W, 1 = W2).
  const outs = toks.flatMap((t) => mats.flatMap((_, m) => rows.map((i) => `${m}_${i}${sfx(t)}`)));
  // Every lane-partial sum joined at the end: the accumulators, and Σx² for the fused norm.
  const sums = [...outs.map((id) => `acc${id}`), ...(o.norm ? toks.map((t) => `ss${sfx(t)}`) : [])];
  const total = (name: string) => (layout.subgroups ? `t_${name}` : `red[${sums.indexOf(name) * T}u]`);
  const inv = (t: number) => (o.norm ? `1.0 / sqrt(${total(`ss${sfx(t)}`)} / f32(P.cols) + P.eps)` : '1.0');
  const scaled = (m: number, dotExpr: string) => (quant ? `(${dotExpr}) * sc${m}` : dotExpr);
  const halves = !!o.halves && V >= 2;
  const H = V / 2;
  // Halves: each weight's step decoded 16 elements (or one vec4) at a time, the dot product's terms
  // added in dotv's order, so the sums keep their bits while fewer decoded values are live at once.
  const halfStep = (i: number) => `      {
        let u = min(r0 + ${i}u, P.rows - 1u) * units + k;
${mats.map((mat, m) => `${quant ? `        let sc${m} = ws_${mat}(u);\n` : ''}${toks.map((t) => `        var d${m}${sfx(t)} = 0.0;`).join('\n')}`).join('\n')}
${range(2)
  .map((h) =>
    mats
      .map(
        (mat, m) => `        { let w = wh_${mat}(u, ${h}u);
${toks.map((t) => range(H).map((j) => `          d${m}${sfx(t)} += dot(w[${j}], x0${sfx(t)}[${h * H + j}]);`).join('\n')).join('\n')}
        }`,
      )
      .join('\n'),
  )
  .join('\n')}
${mats.map((_, m) => toks.map((t) => `        acc${m}_${i}${sfx(t)} += ${scaled(m, `d${m}${sfx(t)}`)};`).join('\n')).join('\n')}
      }`;
  // Q4_K: a step's 8 words read once; sub-block h (low, then high nibbles) widened and scaled in turn
  // (nibbles in place against x pre-scaled by NIB_X: one mask and one conversion per weight).
  const q4kStep = (i: number) => `      {
        let u = min(r0 + ${i}u, P.rows - 1u) * units + k;
${mats
  .map(
    (mat, m) => `        let sc${m} = ws_${mat}(u);
        let wi${m} = wi_${mat}(u);
${range(8).map((j) => `        let q${m}_${j} = ${mat}[wi${m} + ${j}u];`).join('\n')}
${range(2)
  .map(
    (h) => `        {
${range(8).map((j) => `          let w${j} = vec4<f32>(vec4<u32>(q${m}_${j}${h ? ' >> 4u' : ''}) & NIB);`).join('\n')}
${toks
  .map(
    (t) => `          var d${sfx(t)} = 0.0;
${range(8).map((j) => `          { let xv = x0${sfx(t)}[${8 * h + j}]; d${sfx(t)} = fma(w${j}.w, xv.w, fma(w${j}.z, xv.z, fma(w${j}.y, xv.y, fma(w${j}.x, xv.x, d${sfx(t)})))); }`).join('\n')}
          acc${m}_${i}${sfx(t)} += d${sfx(t)} * sc${m}[${2 * h}] - sc${m}[${2 * h + 1}] * xs${h}${sfx(t)};`,
  )
  .join('\n')}
        }`,
  )
  .join('\n')}`,
  )
  .join('\n')}
      }`;
  const step = rows
    .map((i) =>
      mins
        ? q4kStep(i)
        : halves
        ? halfStep(i)
        : `      {
        let u = min(r0 + ${i}u, P.rows - 1u) * units + k;
${mats.map((mat, m) => `        let w${m} = wv_${mat}(u);${quant ? ` let sc${m} = ws_${mat}(u);` : ''}\n${toks.map((t) => `        acc${m}_${i}${sfx(t)} += ${scaled(m, `dotv(w${m}, x0${sfx(t)})`)};`).join('\n')}`).join('\n')}
      }`,
    )
    .join('\n');
  // Row i's output from its joined sums (SwiGLU: silu(gate) · up).
  const result = (i: number, t: number) => {
    const v = (m: number) => `${total(`acc${m}_${i}${sfx(t)}`)} * inv${sfx(t)}`;
    return o.glu ? `silu(${v(0)}) * ${v(1)}` : v(0);
  };
  const storeIf = (i: number, t: number, b: string) => `if (r0 + ${i}u < P.rows) { store(${b}, r0 + ${i}u, ${result(i, t)}); }`;
  const stores =
    TK === 1
      ? `  if (lane == 0u) {
    let inv = ${inv(0)};
${rows.map((i) => `    ${storeIf(i, 0, 'b')}`).join('\n')}
  }`
      : `  if (lane == 0u) {
${toks
  .map(
    (t) => `    if (tb + ${t}u < S.n) {
      let inv${sfx(t)} = ${inv(t)};
${rows.map((i) => `      ${storeIf(i, t, `tb + ${t}u`)}`).join('\n')}
    }`,
  )
  .join('\n')}
  }`;
  const reduce = layout.subgroups
    ? `${sums.map((name) => `  let t_${name} = subgroupAdd(${name});`).join('\n')}
${stores}`
    : `${sums.map((name, j) => `  red[${j * T}u + lane] = ${name};`).join('\n')}
  workgroupBarrier();
  for (var s = ${T / 2}u; s > 0u; s >>= 1u) {
    if (lane < s) {
      for (var j = 0u; j < ${sums.length}u; j++) { red[j * ${T}u + lane] += red[j * ${T}u + lane + s]; }
    }
    workgroupBarrier();
  }
${stores}`;
  return `${layout.subgroups ? 'enable subgroups;\n' : ''}${STEP}${LINEAR}${header}
${stepDecoder(dtype, 'W')}
${w2}
${o.norm ? '@group(0) @binding(7) var<storage, read> NW: array<vec4<f32>>;' : ''}
${layout.subgroups ? '' : `var<workgroup> red: array<f32, ${T * sums.length}>;`}
fn dotv(a: array<vec4<f32>, ${V}>, b: array<vec4<f32>, ${V}>) -> f32 {
  var s = 0.0;
  for (var j = 0u; j < ${V}u; j++) { s += dot(a[j], b[j]); }
  return s;
}
fn silu(g: f32) -> f32 { return g / (1.0 + exp(-g)); }${
    mins
      ? `
// A word's 4 nibbles left in place (byte e's at bit 8e, so f32 of it is q·2^8e, exact) and x scaled by
// 2^-8e to match (exact): the same products as q·x without shifting each byte down.
const NIB = vec4<u32>(0xfu, 0xf00u, 0xf0000u, 0xf000000u);
const NIB_X = vec4<f32>(1.0, 0.00390625, 0.0000152587890625, 0.000000059604644775390625);`
      : ''
  }
@compute @workgroup_size(${T})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) lane: u32) {
  let r0 = wg_linear(wid, nwg) * ${R}u;
  if (r0 >= P.rows) { return; }
  let units = P.cols / ${vectorWidth(dtype)}u;
${
  TK === 1
    ? `  // Grid z: the token. The LM head (flag 4) takes only the batch's last token and writes output row 0.
  let last = (P.flags & 4u) != 0u;
  let b = select(wid.z, 0u, last);
  let xbase = select(wid.z, S.n - 1u, last) * P.xStride / 4u;`
    : `  // Grid z: a group of ${TK} tokens (a short last group reads its last token again and stores none of those).
  let tb = wid.z * ${TK}u;
${toks.map((t) => `  let xbase${sfx(t)} = min(tb + ${t}u, S.n - 1u) * P.xStride / 4u;`).join('\n')}`
}
${sums.map((name) => `  var ${name} = 0.0;`).join('\n')}
  for (var k = lane; k < units; k += ${T}u) {
${toks
  .map(
    (t) => `    var x0${sfx(t)}: array<vec4<f32>, ${V}>;
    for (var j = 0u; j < ${V}u; j++) {
      ${o.norm ? `let xr = X[xbase${sfx(t)} + k * ${V}u + j];
      ss${sfx(t)} += dot(xr, xr);
      x0${sfx(t)}[j] = xr * NW[k * ${V}u + j];` : `x0${sfx(t)}[j] = X[xbase${sfx(t)} + k * ${V}u + j];`}
    }${
      mins
        ? `${range(2).map((h) => `\n    let xs${h}${sfx(t)} = dot(${range(8).map((j) => `x0${sfx(t)}[${8 * h + j}]`).join(' + ')}, vec4<f32>(1.0));`).join('')}
    for (var j = 0u; j < ${V}u; j++) { x0${sfx(t)}[j] *= NIB_X; }`
        : ''
    }`,
  )
  .join('\n')}
${step}
  }
${reduce}
}
`;
}

/** Gathers embedding rows of the tokens in `TOK` (one chunk of the table) into OUT [n, cols]. */
export function embedShader(dtype: DType): string {
  return `${STEP}
struct Params { rows: u32, cols: u32, rowStart: u32, pad: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> TOK: array<u32>;
@group(0) @binding(4) var<storage, read_write> OUT: array<f32>;
${weightAccessor(dtype)}
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * ${WG}u;
  if (i >= S.n * P.cols) { return; }
  let b = i / P.cols;
  let c = i % P.cols;
  let t = TOK[b];
  if (t >= P.rowStart && t < P.rowStart + P.rows) { OUT[i] = w_at(t - P.rowStart, c); }
}
`;
}

/**
 * RMSNorm over rows of `dim` (HF: x * rsqrt(mean(x²) + eps) * w); `groups` rows per token (1 for the
 * hidden state, heads for Qwen3's per-head q/k norm). `inPlace` normalises `IO` itself.
 */
export function rmsnormShader(inPlace: boolean): string {
  const io = inPlace
    ? `@group(0) @binding(3) var<storage, read_write> IO: array<f32>;`
    : `@group(0) @binding(3) var<storage, read> IO: array<f32>;
@group(0) @binding(4) var<storage, read_write> OUT: array<f32>;`;
  const dst = inPlace ? 'IO' : 'OUT';
  return `${STEP}${LINEAR}${REDUCE_SUM}
struct Params { dim: u32, groups: u32, eps: f32, pad: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> NW: array<f32>;
${io}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) tid: u32) {
  let row = wg_linear(wid, nwg);
  if (row >= S.n * P.groups) { return; }
  let base = row * P.dim;
  var ss = 0.0;
  for (var i = tid; i < P.dim; i = i + ${WG}u) { let v = IO[base + i]; ss = ss + v * v; }
  let total = reduce_sum(tid, ss);
  let inv = 1.0 / sqrt(total / f32(P.dim) + P.eps);
  for (var i = tid; i < P.dim; i = i + ${WG}u) { ${dst}[base + i] = IO[base + i] * inv * NW[i]; }
}
`;
}

/**
 * Rotate-half RoPE (Hugging Face layout) in place on X [n, heads, headDim]. `CS` holds cos and sin
 * per token and frequency, [n, headDim/2, 2], computed on the CPU in double precision for the
 * batch's positions: large angles lose precision in GPU sin/cos, and this also covers any scaling.
 */
export const ROPE = `${STEP}
struct Params { heads: u32, headDim: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> CS: array<f32>;
@group(0) @binding(3) var<storage, read_write> X: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let half = P.headDim / 2u;
  let i = gid.x + gid.y * nwg.x * ${WG}u;
  if (i >= S.n * P.heads * half) { return; }
  let b = i / (P.heads * half);
  let rem = i % (P.heads * half);
  let h = rem / half;
  let j = rem % half;
  let base = (b * P.heads + h) * P.headDim;
  let x1 = X[base + j];
  let x2 = X[base + j + half];
  let c = CS[(b * half + j) * 2u];
  let s = CS[(b * half + j) * 2u + 1u];
  X[base + j] = x1 * c - x2 * s;
  X[base + j + half] = x2 * c + x1 * s;
}
`;

/** Appends the batch's k and v rows [n, kvDim] to the caches [maxSeq, kvDim] at position pos0. */
export const KV_STORE = `${STEP}
struct Params { kvDim: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> K: array<f32>;
@group(0) @binding(3) var<storage, read> V: array<f32>;
@group(0) @binding(4) var<storage, read_write> KC: array<f32>;
@group(0) @binding(5) var<storage, read_write> VC: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * ${WG}u;
  if (i >= S.n * P.kvDim) { return; }
  let o = S.pos0 * P.kvDim + i;
  KC[o] = K[i];
  VC[o] = V[i];
}
`;

/**
 * RoPE for attention in one dispatch: rotates the batch's q [n, heads, headDim] in place and k [n,
 * kvHeads, headDim] into the cache, and appends v, at positions pos0.. (rows row0.. of q, k, v and the
 * cos/sin table; the work of ROPE on q and on k
 * and of KV_STORE, in one pass: two fewer dispatches per layer, and k is not written back before it
 * is copied). One thread per rotation pair (j, j + half) of one head of one token; the k heads'
 * threads also move the matching pair of v.
 */
export const ROPE_QK_STORE = `${STEP}
struct Params { heads: u32, kvHeads: u32, headDim: u32, pad0: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> CS: array<f32>;
@group(0) @binding(3) var<storage, read_write> Q: array<f32>;
@group(0) @binding(4) var<storage, read> K: array<f32>;
@group(0) @binding(5) var<storage, read> V: array<f32>;
@group(0) @binding(6) var<storage, read_write> KC: array<f32>;
@group(0) @binding(7) var<storage, read_write> VC: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let half = P.headDim / 2u;
  let perToken = (P.heads + P.kvHeads) * half;
  let i = gid.x + gid.y * nwg.x * ${WG}u;
  if (i >= S.n * perToken) { return; }
  let b = i / perToken;
  let r = S.row0 + b;
  let h = (i % perToken) / half;
  let j = i % half;
  let c = CS[(r * half + j) * 2u];
  let s = CS[(r * half + j) * 2u + 1u];
  if (h < P.heads) {
    let o = (r * P.heads + h) * P.headDim + j;
    let x1 = Q[o];
    let x2 = Q[o + half];
    Q[o] = x1 * c - x2 * s;
    Q[o + half] = x2 * c + x1 * s;
    return;
  }
  let kvDim = P.kvHeads * P.headDim;
  let head = (h - P.heads) * P.headDim + j;
  let src = r * kvDim + head;
  let dst = (S.pos0 + b) * kvDim + head;
  let x1 = K[src];
  let x2 = K[src + half];
  KC[dst] = x1 * c - x2 * s;
  KC[dst + half] = x2 * c + x1 * s;
  VC[dst] = V[src];
  VC[dst + half] = V[src + half];
}
`;

/**
 * The softmax of one (token, head)'s attention scores, shared by the GQA and MLA kernels: for each
 * cache position t in [first, pos], `score` leaves the dot product in `d`; scaled, it is kept in
 * SC[so + t], then replaced by exp(d - max). Leaves `total`, the denominator. With `sink`, the head's
 * sink logit SK[h] joins the max and the denominator (gpt-oss) and takes no value.
 */
export function attentionSoftmax(first: 'start' | '0u', score: string, sink = false): string {
  const from = first === 'start' ? 'start + tid' : 'tid';
  const max = sink
    ? `  // gpt-oss: a per-head sink logit joins the softmax (its max and its denominator) and takes no value.
  let sink = SK[h];
  let rm = reduce_max(tid, m);
  let mx = select(rm, max(rm, sink), P.sinks != 0u);`
    : '  let mx = reduce_max(tid, m);';
  return `  var m = -3.4e38;
  for (var t = ${from}; t <= pos; t = t + ${WG}u) {
${score}
    d = d * P.scale;
    SC[so + t] = d;
    m = max(m, d);
  }
${max}
  var sum = 0.0;
  for (var t = ${from}; t <= pos; t = t + ${WG}u) {
    let e = exp(SC[so + t] - mx);
    SC[so + t] = e;
    sum = sum + e;
  }
  let total = reduce_sum(tid, sum)${sink ? ' + select(0.0, exp(sink - mx), P.sinks != 0u)' : ''};
`;
}

/** The attention kernels' parameters and inputs (bindings 0-4: P, S, Q, KC, VC). */
const ATTENTION_HEADER = /* wgsl */ `${STEP}
struct Params { heads: u32, kvHeads: u32, headDim: u32, maxSeq: u32, window: u32, scale: f32, group: u32, headOffset: u32, kvOffset: u32, sinks: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> Q: array<f32>;
@group(0) @binding(3) var<storage, read> KC: array<f32>;
@group(0) @binding(4) var<storage, read> VC: array<f32>;
`;

/**
 * Causal attention of the batch's queries Q [n, heads·headDim] over the KV cache, one workgroup per
 * (head, token). Token b (row row0 + b of Q and OUT) sits at position pos0 + b and sees positions [start, pos0 + b], start > 0
 * only with a sliding window (`window` > 0: the last `window` positions). GQA: query head h reads
 * KV head (h + headOffset) / group - kvOffset (offsets of a tensor-parallel slice, as in AttentionArgs). Scores go through `SC` [n·heads, maxSeq] in global memory.
 */
export const ATTENTION = `${ATTENTION_HEADER}${REDUCE_SUM}
@group(0) @binding(5) var<storage, read_write> SC: array<f32>;
@group(0) @binding(6) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(7) var<storage, read> SK: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let h = wid.x;
  let b = wid.y;
  if (h >= P.heads || b >= S.n) { return; }
  let pos = S.pos0 + b;
  var start = 0u;
  if (P.window > 0u && pos + 1u > P.window) { start = pos + 1u - P.window; }
  let kvDim = P.kvHeads * P.headDim;
  let kh = (h + P.headOffset) / P.group - P.kvOffset;
  let qo = ((S.row0 + b) * P.heads + h) * P.headDim;
  let so = ((S.row0 + b) * P.heads + h) * P.maxSeq;
${attentionSoftmax('start', `    let ko = t * kvDim + kh * P.headDim;
    var d = 0.0;
    for (var i = 0u; i < P.headDim; i = i + 1u) { d = d + Q[qo + i] * KC[ko + i]; }`, true)}  storageBarrier();
  workgroupBarrier();
  for (var i = tid; i < P.headDim; i = i + ${WG}u) {
    var acc = 0.0;
    for (var t = start; t <= pos; t = t + 1u) { acc = acc + SC[so + t] * VC[t * kvDim + kh * P.headDim + i]; }
    OUT[qo + i] = acc / total;
  }
}
`;

/** Query tokens and cache positions per tile of ATTENTION_TILED; a workgroup is ATTN_TILE² threads (one score each). */
export const ATTN_TILE = 8;
/** Head sizes ATTENTION_TILED takes: its K, V and Q tiles live in workgroup memory (12 KiB at 128). */
export const ATTN_TILED_MAX_HEAD_DIM = 128;

/**
 * ATTENTION for prompt batches, tiled over queries (flash-attention style): one workgroup per (head,
 * 8 query tokens) loads each tile of 8 cache positions' K and V rows into workgroup memory once for
 * its 8 queries, instead of every (head, token) workgroup reading the whole cache again, and keeps a
 * running max, denominator and output per query (online softmax) instead of a scores row in global
 * memory. Thread (query i, lane j) computes score (i, j) of the tile and owns output dims j, j + 8, …
 * Same positions, causality, window, GQA offsets and sinks as ATTENTION; the sums run in another order,
 * so results differ from it by rounding only. A sink logit starts a query's softmax as a position with
 * no value (max = sink, denominator 1), which is the decode kernel's max/denominator rule.
 */
export const ATTENTION_TILED = `${ATTENTION_HEADER}
@group(0) @binding(5) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(6) var<storage, read> SK: array<f32>;
const T = ${ATTN_TILE}u;
const DIMS = ${ATTN_TILED_MAX_HEAD_DIM / ATTN_TILE}u;
var<workgroup> qs: array<f32, ${ATTN_TILE * ATTN_TILED_MAX_HEAD_DIM}>;
var<workgroup> ks: array<f32, ${ATTN_TILE * ATTN_TILED_MAX_HEAD_DIM}>;
var<workgroup> vs: array<f32, ${ATTN_TILE * ATTN_TILED_MAX_HEAD_DIM}>;
var<workgroup> sc: array<f32, ${ATTN_TILE * ATTN_TILE}>;
@compute @workgroup_size(${ATTN_TILE * ATTN_TILE})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let h = wid.x;
  let b0 = wid.y * T;
  if (h >= P.heads || b0 >= S.n) { return; }
  let hd = P.headDim;
  let kvDim = P.kvHeads * hd;
  let kh = (h + P.headOffset) / P.group - P.kvOffset;
  let qi = tid / T;
  let lane = tid % T;
  let b = b0 + qi;
  let pos = S.pos0 + b;
  var start = 0u;
  if (P.window > 0u && pos + 1u > P.window) { start = pos + 1u - P.window; }
  // The positions any query of the tile sees: from the first query's window start to the last query.
  let kEnd = S.pos0 + min(b0 + T - 1u, S.n - 1u);
  var kBegin = 0u;
  if (P.window > 0u && S.pos0 + b0 + 1u > P.window) { kBegin = S.pos0 + b0 + 1u - P.window; }
  for (var i = tid; i < T * hd; i = i + T * T) {
    let r = i / hd;
    var v = 0.0;
    if (b0 + r < S.n) { v = Q[((S.row0 + b0 + r) * P.heads + h) * hd + i % hd]; }
    qs[i] = v;
  }
  var m = -3.4e38;
  var l = 0.0;
  if (P.sinks != 0u) { m = SK[h]; l = 1.0; }
  var acc: array<f32, DIMS>;
  for (var t0 = kBegin; t0 <= kEnd; t0 = t0 + T) {
    // The previous tile's readers are done (and, the first time, Q is in place).
    workgroupBarrier();
    for (var i = tid; i < T * hd; i = i + T * T) {
      let t = t0 + i / hd;
      var kv = 0.0;
      var vv = 0.0;
      if (t <= kEnd) { let o = t * kvDim + kh * hd + i % hd; kv = KC[o]; vv = VC[o]; }
      ks[i] = kv;
      vs[i] = vv;
    }
    workgroupBarrier();
    var d = 0.0;
    for (var i = 0u; i < hd; i = i + 1u) { d = d + qs[qi * hd + i] * ks[lane * hd + i]; }
    sc[tid] = d * P.scale;
    workgroupBarrier();
    var mt = m;
    for (var k = 0u; k < T; k = k + 1u) {
      let t = t0 + k;
      if (t >= start && t <= pos) { mt = max(mt, sc[qi * T + k]); }
    }
    let corr = exp(m - mt);
    l = l * corr;
    for (var j = 0u; j < DIMS; j = j + 1u) { acc[j] = acc[j] * corr; }
    for (var k = 0u; k < T; k = k + 1u) {
      let t = t0 + k;
      if (t >= start && t <= pos) {
        let p = exp(sc[qi * T + k] - mt);
        l = l + p;
        for (var j = 0u; j < DIMS; j = j + 1u) {
          let dj = lane + j * T;
          if (dj < hd) { acc[j] = acc[j] + p * vs[k * hd + dj]; }
        }
      }
    }
    m = mt;
  }
  if (b < S.n) {
    let o = ((S.row0 + b) * P.heads + h) * hd;
    for (var j = 0u; j < DIMS; j = j + 1u) {
      let dj = lane + j * T;
      if (dj < hd) { OUT[o + dj] = acc[j] / l; }
    }
  }
}
`;

/** OUT[b] = X[ROWS[b]] over [n, width]: the rows of a step that the LM head needs, side by side. */
export const GATHER_ROWS = `${STEP}
struct Params { width: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> ROWS: array<u32>;
@group(0) @binding(3) var<storage, read> X: array<f32>;
@group(0) @binding(4) var<storage, read_write> OUT: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * ${WG}u;
  if (i >= S.n * P.width) { return; }
  OUT[i] = X[ROWS[i / P.width] * P.width + i % P.width];
}
`;

/** X[b, i] += Y[b, i] (+ B[i]) over [n, width]: the residual add after an all-reduce. */
export const ADD = `${STEP}
struct Params { width: u32, bias: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read> Y: array<f32>;
@group(0) @binding(4) var<storage, read> B: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * ${WG}u;
  if (i >= S.n * P.width) { return; }
  var y = Y[i];
  if (P.bias != 0u) { y = y + B[i % P.width]; }
  X[i] = X[i] + y;
}
`;

/** G = silu(G) * U over [n, width], in place (SwiGLU MLP). */
export const SILU_GATE = `${STEP}
struct Params { width: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read_write> G: array<f32>;
@group(0) @binding(3) var<storage, read> U: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * ${WG}u;
  if (i >= S.n * P.width) { return; }
  let g = G[i];
  G[i] = g / (1.0 + exp(-g)) * U[i];
}
`;

/** Row-wise softmax in place over X [n·groups, cols]. */
export const SOFTMAX = `${STEP}${LINEAR}${REDUCE_SUM}
struct Params { cols: u32, groups: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) tid: u32) {
  let row = wg_linear(wid, nwg);
  if (row >= S.n * P.groups) { return; }
  let base = row * P.cols;
  var m = -3.4e38;
  for (var i = tid; i < P.cols; i = i + ${WG}u) { m = max(m, X[base + i]); }
  let mx = reduce_max(tid, m);
  var s = 0.0;
  for (var i = tid; i < P.cols; i = i + ${WG}u) { let e = exp(X[base + i] - mx); X[base + i] = e; s = s + e; }
  let total = reduce_sum(tid, s);
  for (var i = tid; i < P.cols; i = i + ${WG}u) { X[base + i] = X[base + i] / total; }
}
`;

/**
 * Picks a token from logits X (row n - 1 of [n, count] when `lastRow`, else row 0: the LM head writes
 * only the last token's) without reading logits back.
 * temperature == 0: argmax (lowest index on ties). Otherwise Gumbel-max: argmax(logit / T + g_i) with
 * g_i = -log(-log(u_i)), u_i a hash of (seed, i) — an exact sample from softmax(logit / T) that is
 * reproducible for a seed. RES = [token, bits of its score].
 */
export const SAMPLE = `${STEP}
struct Params { count: u32, temperature: f32, lastRow: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> RES: array<u32>;
var<workgroup> bv: array<f32, ${WG}>;
var<workgroup> bi: array<u32, ${WG}>;
fn hash(x: u32) -> u32 {
  var h = x;
  h = h ^ (h >> 16u); h = h * 0x7feb352du;
  h = h ^ (h >> 15u); h = h * 0x846ca68bu;
  h = h ^ (h >> 16u);
  return h;
}
fn uniform01(i: u32) -> f32 {
  let h = hash(i ^ hash(S.seed + 0x9e3779b9u));
  return (f32(h >> 8u) + 0.5) / 16777216.0;
}
@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_index) tid: u32) {
  let base = select(0u, (S.n - 1u) * P.count, P.lastRow != 0u);
  var best = -3.4e38;
  var idx = 0xffffffffu;
  for (var i = tid; i < P.count; i = i + ${WG}u) {
    var v = X[base + i];
    if (P.temperature > 0.0) { v = v / P.temperature - log(-log(uniform01(i))); }
    if (v > best || idx == 0xffffffffu) { best = v; idx = i; }
  }
  bv[tid] = best;
  bi[tid] = idx;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s = s >> 1u) {
    if (tid < s) {
      let ov = bv[tid + s];
      let oi = bi[tid + s];
      if (oi != 0xffffffffu && (bi[tid] == 0xffffffffu || ov > bv[tid] || (ov == bv[tid] && oi < bi[tid]))) {
        bv[tid] = ov;
        bi[tid] = oi;
      }
    }
    workgroupBarrier();
  }
  if (tid == 0u) {
    RES[0] = bi[0];
    RES[1] = bitcast<u32>(bv[0]);
  }
}
`;
