/**
 * WGSL for mixture-of-experts layers on the GPU (host side: moe.ts):
 * - `routeShader`: one invocation per token turns its router logits into k expert ids and weights, as
 *   model/routing.ts does on the CPU (softmax top-k, DeepSeek's sigmoid + correction bias + group-limited
 *   top-k, gpt-oss's softmax over the top-k logits), with PyTorch's tie rule: the selection is GNU
 *   libstdc++'s nth_element / heap-select (model/topk.ts), iterative here (WGSL has no recursion). Only
 *   the chosen set matters (expert outputs are summed), so the sorts that follow in torch are skipped.
 * - `expertShader`: the gathered-expert matvec — one workgroup per (output row, token slot) reads the
 *   slot's expert id and multiplies by that expert's rows of a stacked [experts·rows, cols] weight, so a
 *   decode step touches only the chosen experts; slots whose expert this buffer does not hold are skipped.
 *   `expertRowsShader` is its row-block form for the formats with an 8-wide decode (4 rows per workgroup);
 *   decode takes the fused kernels of wgsl-moe-decode.ts instead where gate, up and down all have one.
 * - `GROUP` + `groupedExpertShader`: the prompt-batch form. GROUP counting-sorts the batch's slots by
 *   expert (no readback); the grouped matmul then runs the dense tiled matmul (wgsl-matmul.ts, same
 *   tiles and dequant loaders) over each expert's gathered slot rows, so an expert's weights are read
 *   once per tile of its tokens instead of once per token routed to it (llama.cpp's mul_mat_id).
 * - `COMBINE`: out[b] (+)= Σ_j weight[b, j] · y[b·k + j] over the slots whose expert this rank holds.
 * - `CLAMPED_SWIGLU`: gpt-oss's activation.
 */
import type { DType } from '../backend.js';
import { tiledMatmulWith, type MatmulTile } from './wgsl-matmul.js';
import { weight8Accessor } from './quant-wgsl.js';
import { MATVEC_ROWS, REDUCE_SUM, STEP, WG, rows8Header, rows8Red, rows8Sums, weightAccessor, type MatvecLayout } from './wgsl.js';

export interface RouteShape {
  routing: 'softmax' | 'sigmoid-grouped' | 'topk-softmax';
  experts: number;
  topK: number;
  groups: number;
  topkGroups: number;
  normTopK: boolean;
  scalingFactor: number;
}

/** The top-k selection of topk.ts over qv/qi[0..n), leaving the chosen set in qi[0..k). */
const TOPK = /* wgsl */ `
fn before(a: f32, b: f32) -> bool { return (a != a && b == b) || a > b; }
fn less(i: u32, j: u32) -> bool { return before(qv[i], qv[j]); }
fn swap(i: u32, j: u32) {
  let v = qv[i]; qv[i] = qv[j]; qv[j] = v;
  let x = qi[i]; qi[i] = qi[j]; qi[j] = x;
}
fn mv(a: u32, b: u32) { qv[a] = qv[b]; qi[a] = qi[b]; }
fn push_heap(first: u32, hole0: u32, top: u32, v: f32, i: u32) {
  var hole = hole0;
  while (hole > top) {
    let parent = (hole - 1u) / 2u;
    if (!before(qv[first + parent], v)) { break; }
    mv(first + hole, first + parent);
    hole = parent;
  }
  qv[first + hole] = v;
  qi[first + hole] = i;
}
fn adjust_heap(first: u32, hole0: u32, len: u32, v: f32, i: u32) {
  var hole = hole0;
  var child = hole0;
  while (child < (len - 1u) / 2u) {
    child = 2u * (child + 1u);
    if (less(first + child, first + child - 1u)) { child = child - 1u; }
    mv(first + hole, first + child);
    hole = child;
  }
  if ((len & 1u) == 0u && child == (len - 2u) / 2u) {
    child = 2u * (child + 1u);
    mv(first + hole, first + child - 1u);
    hole = child - 1u;
  }
  push_heap(first, hole, hole0, v, i);
}
fn heap_select(first: u32, middle: u32, last: u32) {
  let len = middle - first;
  if (len >= 2u) {
    var parent = (len - 2u) / 2u;
    loop {
      adjust_heap(first, parent, len, qv[first + parent], qi[first + parent]);
      if (parent == 0u) { break; }
      parent = parent - 1u;
    }
  }
  for (var k = middle; k < last; k = k + 1u) {
    if (less(k, first)) {
      let v = qv[k];
      let i = qi[k];
      mv(k, first);
      adjust_heap(first, 0u, len, v, i);
    }
  }
}
fn median_to_first(result: u32, a: u32, b: u32, c: u32) {
  if (less(a, b)) {
    if (less(b, c)) { swap(result, b); } else if (less(a, c)) { swap(result, c); } else { swap(result, a); }
  } else if (less(a, c)) { swap(result, a); } else if (less(b, c)) { swap(result, c); } else { swap(result, b); }
}
fn partition_pivot(first0: u32, last0: u32) -> u32 {
  median_to_first(first0, first0 + 1u, first0 + (last0 - first0) / 2u, last0 - 1u);
  var first = first0 + 1u;
  var last = last0;
  loop {
    while (less(first, first0)) { first = first + 1u; }
    last = last - 1u;
    while (less(first0, last)) { last = last - 1u; }
    if (!(first < last)) { return first; }
    swap(first, last);
    first = first + 1u;
  }
}
fn insertion_sort(first: u32, last: u32) {
  for (var k = first + 1u; k < last; k = k + 1u) {
    let v = qv[k];
    let i = qi[k];
    if (before(v, qv[first])) {
      for (var j = k; j > first; j = j - 1u) { mv(j, j - 1u); }
      qv[first] = v;
      qi[first] = i;
    } else {
      var at = k;
      while (before(v, qv[at - 1u])) { mv(at, at - 1u); at = at - 1u; }
      qv[at] = v;
      qi[at] = i;
    }
  }
}
fn select_topk(n: u32, k: u32) {
  if (k * 64u <= n) { heap_select(0u, k, n); return; }
  // nth_element(k - 1): introselect
  var first = 0u;
  var last = n;
  let nth = k - 1u;
  if (nth == last) { return; }
  var depth = 2u * (31u - countLeadingZeros(last - first));
  while (last - first > 3u) {
    if (depth == 0u) { heap_select(first, nth + 1u, last); swap(first, nth); return; }
    depth = depth - 1u;
    let cut = partition_pivot(first, last);
    if (cut <= nth) { first = cut; } else { last = cut; }
  }
  insertion_sort(first, last);
}
`;

export function routeShader(r: RouteShape): string {
  const E = r.experts;
  const per = E / r.groups;
  const body =
    r.routing === 'softmax'
      ? `
  var mx = LOGITS[lo];
  for (var e = 1u; e < E; e = e + 1u) { mx = max(mx, LOGITS[lo + e]); }
  var sum = 0.0;
  for (var e = 0u; e < E; e = e + 1u) { sum = sum + exp(LOGITS[lo + e] - mx); }
  for (var e = 0u; e < E; e = e + 1u) { p[e] = exp(LOGITS[lo + e] - mx) / sum; qv[e] = p[e]; qi[e] = e; }
  select_topk(E, K);
  for (var j = 0u; j < K; j = j + 1u) { w[j] = p[qi[j]]; }`
      : r.routing === 'topk-softmax'
        ? `
  for (var e = 0u; e < E; e = e + 1u) { qv[e] = LOGITS[lo + e]; qi[e] = e; }
  select_topk(E, K);
  var mx = qv[0];
  for (var j = 1u; j < K; j = j + 1u) { mx = max(mx, qv[j]); }
  var sum = 0.0;
  for (var j = 0u; j < K; j = j + 1u) { w[j] = exp(qv[j] - mx); sum = sum + w[j]; }
  for (var j = 0u; j < K; j = j + 1u) { w[j] = w[j] / sum; }`
        : `
  for (var e = 0u; e < E; e = e + 1u) { p[e] = 1.0 / (1.0 + exp(-LOGITS[lo + e])); ch[e] = p[e] + CB[e]; }
  if (G > 1u) {
    // Groups ranked by the sum of their two best biased scores; the others' experts count as 0.
    for (var g = 0u; g < G; g = g + 1u) {
      var m1 = -3.0e38;
      var m2 = -3.0e38;
      for (var e = g * PER; e < (g + 1u) * PER; e = e + 1u) {
        let v = ch[e];
        if (v > m1) { m2 = m1; m1 = v; } else if (v > m2) { m2 = v; }
      }
      qv[g] = m1 + m2;
      qi[g] = g;
      keep[g] = 0u;
    }
    select_topk(G, TG);
    for (var j = 0u; j < TG; j = j + 1u) { keep[qi[j]] = 1u; }
    for (var e = 0u; e < E; e = e + 1u) { if (keep[e / PER] == 0u) { ch[e] = 0.0; } }
  }
  for (var e = 0u; e < E; e = e + 1u) { qv[e] = ch[e]; qi[e] = e; }
  select_topk(E, K);
  for (var j = 0u; j < K; j = j + 1u) { w[j] = p[qi[j]]; }`;
  const norm = r.normTopK ? `var s = 0.0; for (var j = 0u; j < K; j = j + 1u) { s = s + w[j]; } s = s + ${r.routing === 'sigmoid-grouped' ? '1e-20' : '0.0'}; for (var j = 0u; j < K; j = j + 1u) { w[j] = w[j] / s; }` : '';
  return `${STEP}
const E: u32 = ${E}u;
const K: u32 = ${r.topK}u;
const G: u32 = ${r.groups}u;
const TG: u32 = ${r.topkGroups}u;
const PER: u32 = ${per}u;
@group(0) @binding(0) var<uniform> S: Step;
@group(0) @binding(1) var<storage, read> LOGITS: array<f32>;
@group(0) @binding(2) var<storage, read> CB: array<f32>;
@group(0) @binding(3) var<storage, read_write> IDS: array<u32>;
@group(0) @binding(4) var<storage, read_write> WTS: array<f32>;
var<private> qv: array<f32, ${E}>;
var<private> qi: array<u32, ${E}>;
var<private> p: array<f32, ${E}>;
var<private> ch: array<f32, ${E}>;
var<private> keep: array<u32, ${r.groups}>;
var<private> w: array<f32, ${r.topK}>;
${TOPK}
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let b = gid.x;
  if (b >= S.n) { return; }
  _ = CB[0]; // bound for every routing (auto layouts drop bindings a shader never uses)
  let lo = b * E;
  ${body}
  ${norm}
  for (var j = 0u; j < K; j = j + 1u) {
    IDS[b * K + j] = qi[j];
    WTS[b * K + j] = w[j] * ${r.scalingFactor.toPrecision(9)};
  }
}
`;
}

/** The per-slot expert kernels' parameters and bindings (expertShader, expertRowsShader). */
const EXPERT_HEADER = /* wgsl */ `${STEP}
struct Params { rows: u32, cols: u32, k: u32, e0: u32, e1: u32, perSlotX: u32, bias: u32, pad: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> X: array<f32>;
@group(0) @binding(4) var<storage, read> IDS: array<u32>;
@group(0) @binding(5) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(6) var<storage, read> B: array<f32>;
`;

/**
 * OUT[s, r] = Σ_c W[(id_s − e0)·rows + r, c] · X[x(s), c] (+ B[(id_s − e0)·rows + r]) for token slot s
 * (k per token) whose expert id_s lies in [e0, e1); x(s) is the slot's token (gate/up) or the slot
 * itself (down, over the slot's activations). Grid: (rows, slots).
 */
export function expertShader(dtype: DType): string {
  return `${EXPERT_HEADER}${REDUCE_SUM}
${weightAccessor(dtype)}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let r = wid.x;
  let s = wid.y;
  let slots = S.n * P.k;
  let id = IDS[min(s, slots - 1u)];
  let live = r < P.rows && s < slots && id >= P.e0 && id < P.e1;
  var acc = 0.0;
  if (live) {
    let wr = (id - P.e0) * P.rows + r;
    let xo = select((s / P.k) * P.cols, s * P.cols, P.perSlotX != 0u);
    for (var c = tid; c < P.cols; c = c + ${WG}u) { acc = acc + w_at(wr, c) * X[xo + c]; }
  }
  let sum = reduce_sum(tid, acc);
  if (live && tid == 0u) {
    var y = sum;
    if (P.bias != 0u) { y = y + B[(id - P.e0) * P.rows + r]; }
    OUT[s * P.rows + r] = y;
  }
}
`;
}

/**
 * expertShader's product for the formats with an 8-wide accessor (quant-wgsl.ts `weight8Accessor`):
 * one workgroup per (4 output rows, token slot), each thread taking 8 columns at a time (the slot's x
 * read once for the 4 rows, each row's 8 weights decoded from whole words with one scale lookup) and
 * the 4 rows' sums joined in one tree (wgsl.ts rows8Sums; the per-element kernel decodes every
 * element's bytes and scale alone and joins one row per workgroup); `layout` as the dense decode
 * matvec's (subgroup-sized workgroups joined by subgroupAdd, else a tree). A slot's result depends only on its
 * own token and expert, so a row's bits do not change with the step's other rows (a draft's check
 * keeps its 1-token bits). Grid: (ceil(rows / MATVEC_ROWS), slots).
 */
export function expertRowsShader(dtype: DType, cols: number, layout: MatvecLayout = { lanes: WG, subgroups: false }): string {
  const w8 = weight8Accessor(dtype, cols);
  if (!w8) throw new Error(`expertRowsShader: no 8-wide accessor for ${dtype} with ${cols} columns`);
  return `${rows8Header(layout)}${EXPERT_HEADER}
${rows8Red(layout)}
${w8}
@compute @workgroup_size(${layout.lanes})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let r0 = wid.x * ${MATVEC_ROWS}u;
  let s = wid.y;
  let slots = S.n * P.k;
  let id = IDS[min(s, slots - 1u)];
  // A dead slot (another rank's expert, past the batch) reads nothing but still joins the barriers.
  let live = r0 < P.rows && s < slots && id >= P.e0 && id < P.e1;
  let base = (id - P.e0) * P.rows;
  let xo = select((s / P.k) * P.cols, s * P.cols, P.perSlotX != 0u);
${rows8Sums(layout, 'base', 'xo', '(P.rows - 1u)', 'select(0u, P.cols, live)')}
  if (live && tid == 0u) {
    for (var j = 0u; j < ${MATVEC_ROWS}u; j = j + 1u) {
      let r = r0 + j;
      if (r < P.rows) {
        var y = t4[j];
        if (P.bias != 0u) { y = y + B[base + r]; }
        OUT[s * P.rows + r] = y;
      }
    }
  }
}
`;
}

/**
 * Counting sort of the batch's slots by expert, for the experts [e0, e0 + ne) this rank holds:
 * META[e] = slots routed to local expert e, META[ne + e] = where its slots start in LIST, LIST = slot
 * indices grouped by expert, each expert's in slot order (so the grouping is deterministic). Slots of other
 * ranks' experts are left out. One workgroup: per expert a scan of the ids (E·B·k loads, small next to the
 * matmuls), one thread's prefix sum over ne.
 */
export const GROUP = `${STEP}
struct Params { k: u32, e0: u32, ne: u32, pad: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> IDS: array<u32>;
@group(0) @binding(3) var<storage, read_write> META: array<u32>;
@group(0) @binding(4) var<storage, read_write> LIST: array<u32>;
@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_index) tid: u32) {
  let slots = S.n * P.k;
  for (var e = tid; e < P.ne; e = e + ${WG}u) {
    var c = 0u;
    for (var s = 0u; s < slots; s = s + 1u) { if (IDS[s] == P.e0 + e) { c = c + 1u; } }
    META[e] = c;
  }
  storageBarrier();
  if (tid == 0u) {
    var o = 0u;
    for (var e = 0u; e < P.ne; e = e + 1u) { META[P.ne + e] = o; o = o + META[e]; }
  }
  storageBarrier();
  for (var e = tid; e < P.ne; e = e + ${WG}u) {
    var o = META[P.ne + e];
    for (var s = 0u; s < slots; s = s + 1u) { if (IDS[s] == P.e0 + e) { LIST[o] = s; o = o + 1u; } }
  }
}
`;

/**
 * The grouped-expert matmul: for each expert of one stacked buffer (local experts [e0, e0 + ne) of the
 * ALL listed by GROUP), OUT[s, r] = Σ_c W[(e − e0)·rows + r, c] · X[x(s), c] (+ B[e·rows + r]) over its
 * slots s, x(s) as in expertShader. Grid: x over row tiles, y over token tiles of all the buffer's experts:
 * ceil(B·k / tokens) + ne covers any split of the slots (each expert wastes at most one partial tile);
 * a workgroup finds its expert and slot range by walking META, and tiles past the last one return.
 */
export function groupedExpertShader(dtype: DType, loader: 'step' | 'element', t: MatmulTile): string {
  const header = `
struct Params { rows: u32, cols: u32, k: u32, e0: u32, ne: u32, all: u32, perSlotX: u32, bias: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> X: array<f32>;
@group(0) @binding(4) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(5) var<storage, read> B: array<f32>;
@group(0) @binding(6) var<storage, read> META: array<u32>;
@group(0) @binding(7) var<storage, read> LIST: array<u32>;
var<private> expert: u32; // local expert index (into META and the bias) of this workgroup's tile
fn x_row(i: u32) -> u32 {
  let s = LIST[i];
  return select(s / P.k, s, P.perSlotX != 0u) * P.cols;
}
fn store(i: u32, r: u32, v: f32) {
  let s = LIST[i];
  var y = v;
  if (P.bias != 0u) { y = y + B[expert * P.rows + r]; }
  OUT[s * P.rows + r] = y;
}
`;
  return tiledMatmulWith(dtype, loader, t, {
    header,
    prologue: (tile) => `  var ty = wid.y;
  var tokBase = 0u;
  var tokEnd = 0u;
  var found = false;
  for (var e = P.e0; e < P.e0 + P.ne; e = e + 1u) {
    let c = META[e];
    let tiles = (c + ${tile.tokens - 1}u) / ${tile.tokens}u;
    if (ty < tiles) {
      tokBase = META[P.all + e] + ty * ${tile.tokens}u;
      tokEnd = META[P.all + e] + c;
      expert = e;
      found = true;
      break;
    }
    ty = ty - tiles;
  }
  if (!found) { return; }
  _ = S.n;
  let rowBase = wid.x * ${tile.rows}u;
  let wRow0 = (expert - P.e0) * P.rows;`,
    xRow: (tok) => `x_row(${tok})`,
  });
}

/** OUT[b, d] (+)= Σ_j WTS[b·k + j] · Y[(b·k + j)·width + d] over the slots whose expert is in [e0, e1). */
export const COMBINE = `${STEP}
struct Params { width: u32, k: u32, e0: u32, e1: u32, accumulate: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(3) var<storage, read> Y: array<f32>;
@group(0) @binding(4) var<storage, read> IDS: array<u32>;
@group(0) @binding(5) var<storage, read> WTS: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * ${WG}u;
  if (i >= S.n * P.width) { return; }
  let b = i / P.width;
  let d = i % P.width;
  var acc = 0.0;
  for (var j = 0u; j < P.k; j = j + 1u) {
    let s = b * P.k + j;
    let id = IDS[s];
    if (id >= P.e0 && id < P.e1) { acc = acc + Y[s * P.width + d] * WTS[s]; }
  }
  OUT[i] = select(acc, OUT[i] + acc, P.accumulate != 0u);
}
`;

/** gpt-oss: G = (clamp(U, ±limit) + 1) · g·σ(1.702·g), g = min(G, limit), over [n, width] (biases already added). */
export const CLAMPED_SWIGLU = `${STEP}
struct Params { width: u32, limit: f32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<uniform> S: Step;
@group(0) @binding(2) var<storage, read_write> G: array<f32>;
@group(0) @binding(3) var<storage, read> U: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * ${WG}u;
  if (i >= S.n * P.width) { return; }
  let g = min(G[i], P.limit);
  let u = clamp(U[i], -P.limit, P.limit);
  G[i] = (u + 1.0) * (g / (1.0 + exp(-1.702 * g)));
}
`;
