/**
 * The MoE decode kernels (host side: moe.ts), for expert weights with an 8-wide accessor
 * (quant-wgsl.ts `weight8Accessor`). Two dispatches for all of a step's chosen experts, as llama.cpp's
 * mul_mat_id runs them, with the elementwise steps fused in:
 * - `expertGluShader`: gate and up rows of each token slot's expert in one workgroup (the slot's x read
 *   once for both matrices), the activation (SwiGLU or gpt-oss's clamped SwiGLU) applied to the sums, h
 *   written per slot: no gate/up activations written and re-read, no activation dispatch.
 * - `expertDownShader`: one workgroup per (rows, token) runs down over each of the token's k slots and
 *   adds weight · (row + bias) into the token's output in slot order: no per-slot outputs written and
 *   re-read, no combine dispatch.
 * Both keep the per-slot kernel's (expertRowsShader) order per row (each lane's 8-column steps, then
 * subgroupAdd or the same workgroup-memory tree) and the activation's / combine's expressions; through
 * `w8` the results are the unfused chain's bits, MLX weights (factored scale, quant-wgsl.ts
 * expertFactored8) round differently by ~1e-7 of the terms. A row depends only on its own token (a
 * draft's check keeps its 1-token decode bits).
 */
import type { DType } from '../backend.js';
import { expertFactored8, expertWeight8Accessor } from './quant-wgsl.js';
import { STEP, rows8Header, rowsRed, rowsSums, type MatvecLayout } from './wgsl.js';

export type ExpertActivation = 'swiglu' | 'clamped-swiglu';

/**
 * An accessor's WGSL bound to another weight buffer: `W[` becomes `buffer[`, and every function and
 * private variable it defines gets `suffix` (so gate's and up's `w8` live side by side in one shader).
 */
export function renameAccessor(src: string, buffer: string, suffix: string): string {
  const names = [...src.matchAll(/\bfn\s+(\w+)\s*\(|var<private>\s+(\w+)/g)].map((m) => m[1] ?? m[2]);
  let out = src.replace(/\bW\[/g, `${buffer}[`);
  for (const name of new Set(names)) out = out.replace(new RegExp(`\\b${name}\\b`, 'g'), `${name}${suffix}`);
  return out;
}

/** Kernel shape: rows of each matrix per workgroup; MLX's factored `wdot8` where it applies (default) or `w8`. */
export interface ExpertDecodeForm {
  rows?: number;
  factored?: boolean;
}

function accessor(dtype: DType, cols: number, kernel: string, factored: boolean): { src: string; fn: string; factored: boolean } {
  const f = factored ? expertFactored8(dtype, cols) : null;
  if (f) return { src: f, fn: 'wdot8', factored: true };
  const w8 = expertWeight8Accessor(dtype, cols);
  if (!w8) throw new Error(`${kernel}: no 8-wide accessor for ${dtype} with ${cols} columns`);
  return { src: w8, fn: 'w8', factored: false };
}

/**
 * H[s, r] = act(Σ_c Wg[e_s·rows + r, c]·X[s / k, c] (+ Bg), Σ_c Wu[…]·X[…] (+ Bu)) for each token slot s whose
 * expert e_s (IDS[s]) lies in this buffer's [e0, e1) (local index e_s − e0). Grid: (ceil(rows / `rows`), n·k).
 */
export function expertGluShader(dtype: DType, cols: number, layout: MatvecLayout, activation: ExpertActivation, form: ExpertDecodeForm = {}): string {
  const { rows = 4, factored = true } = form;
  const w = accessor(dtype, cols, 'expertGluShader', factored);
  const act =
    activation === 'swiglu'
      ? 'g / (1.0 + exp(-g)) * u'
      : '(clamp(u, -P.limit, P.limit) + 1.0) * (min(g, P.limit) / (1.0 + exp(-1.702 * min(g, P.limit))))';
  return `${rows8Header(layout)}${STEP}
struct Params { rows: u32, cols: u32, k: u32, e0: u32, e1: u32, bias: u32, limit: f32, pad: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> WU: array<u32>;
@group(0) @binding(4) var<storage, read> X: array<f32>;
@group(0) @binding(5) var<storage, read> IDS: array<u32>;
@group(0) @binding(6) var<storage, read_write> H: array<f32>;
@group(0) @binding(7) var<storage, read> BG: array<f32>;
@group(0) @binding(8) var<storage, read> BU: array<f32>;
${rowsRed(layout, 2 * rows)}
${w.src}
${renameAccessor(w.src, 'WU', '_u')}
@compute @workgroup_size(${layout.lanes})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let r0 = wid.x * ${rows}u;
  let s = wid.y;
  let slots = S.n * P.k;
  let id = IDS[min(s, slots - 1u)];
  // A dead slot (another buffer's or rank's expert, past the batch) reads nothing but still joins the sums.
  let live = r0 < P.rows && s < slots && id >= P.e0 && id < P.e1;
  let base = (id - P.e0) * P.rows;
  let xo = (s / P.k) * P.cols;
${rowsSums(layout, rows, [w.fn, `${w.fn}_u`], w.factored, 'base', 'xo', '(P.rows - 1u)', 'select(0u, P.cols, live)')}
  if (live && tid == 0u) {
    for (var j = 0u; j < ${rows}u; j = j + 1u) {
      let r = r0 + j;
      if (r < P.rows) {
        var g = t0[j];
        var u = t1[j];
        if (P.bias != 0u) { g = g + BG[base + r]; u = u + BU[base + r]; }
        H[s * P.rows + r] = ${act};
      }
    }
  }
}
`;
}

/**
 * OUT[b, r] (+)= Σ_j WTS[b·k + j] · (Σ_c W[e·rows + r, c]·H[b·k + j, c] (+ B[e·rows + r])) over token b's slots j
 * whose expert e lies in [e0, e1), in slot order (COMBINE's sum). `accumulate`: add into OUT (the
 * residual, or another expert buffer's share) instead of writing it. Grid: (ceil(rows / `rows`), n).
 */
export function expertDownShader(dtype: DType, cols: number, layout: MatvecLayout, form: ExpertDecodeForm = {}): string {
  const { rows = 4, factored = true } = form;
  const w = accessor(dtype, cols, 'expertDownShader', factored);
  return `${rows8Header(layout)}${STEP}
struct Params { rows: u32, cols: u32, k: u32, e0: u32, e1: u32, bias: u32, accumulate: u32, pad: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> X: array<f32>;
@group(0) @binding(4) var<storage, read> IDS: array<u32>;
@group(0) @binding(5) var<storage, read> WTS: array<f32>;
@group(0) @binding(6) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(7) var<storage, read> B: array<f32>;
${rowsRed(layout, rows)}
${w.src}
@compute @workgroup_size(${layout.lanes})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let r0 = wid.x * ${rows}u;
  let b = wid.y;
  if (r0 >= P.rows || b >= S.n) { return; }
  var acc: array<f32, ${rows}>;
  for (var j = 0u; j < P.k; j = j + 1u) {
    let s = b * P.k + j;
    let id = IDS[s];
    let live = id >= P.e0 && id < P.e1;
    let base = (id - P.e0) * P.rows;
    let xo = s * P.cols;
${rowsSums(layout, rows, [w.fn], w.factored, 'base', 'xo', '(P.rows - 1u)', 'select(0u, P.cols, live)')}
    if (live) {
      for (var i = 0u; i < ${rows}u; i = i + 1u) {
        var y = t0[i];
        if (P.bias != 0u) { y = y + B[base + min(r0 + i, P.rows - 1u)]; }
        acc[i] = acc[i] + y * WTS[s];
      }
    }
  }
  if (tid == 0u) {
    for (var i = 0u; i < ${rows}u; i = i + 1u) {
      let r = r0 + i;
      if (r < P.rows) {
        let o = b * P.rows + r;
        OUT[o] = select(acc[i], OUT[o] + acc[i], P.accumulate != 0u);
      }
    }
  }
}
`;
}
