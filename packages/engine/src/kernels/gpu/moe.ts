/**
 * A mixture-of-experts layer on the GPU (WGSL in wgsl-moe.ts). This rank's routed experts are uploaded
 * stacked per projection ([experts·rows, cols], storage dtype; split into several buffers of whole
 * experts where one would pass the binding limit). Per call, with no readback:
 *   router logits (the existing linear kernel) → expert ids and weights per token (route kernel) →
 *   gate and up rows of each token's chosen experts → activation → down rows → out (+)= Σ weight · expert
 *   output over the experts this rank holds → shared experts (linear kernels).
 * Decode with 8-wide weights runs the middle as two dispatches (wgsl-moe-decode.ts: gate+up+activation,
 * down+combine); other formats and prompt batches keep one dispatch per step.
 * Like the CPU MoE block, the result on a tensor rank is a partial sum for the caller's all-reduce.
 */
import type { MoeConfig } from '../../config/config.js';
import type { Weight } from '../backend.js';
import { rowBytes } from '../wasm/formats.js';
import type { MoeWeights } from '../../model/weights-moe.js';
import type { GpuContext } from './context.js';
import { createStorage, type GpuWeight } from './buffers.js';
import { LayerUploads } from './uploads.js';
import { MATVEC_MAX_BATCH, layoutKey, split, type Dispatch, type GpuKernels, type StepUniform } from './ops.js';
import { MATMUL_TILES, matmulLoader, matmulTileFor, type MatmulTile } from './wgsl-matmul.js';
import { weight8Accessor } from './quant-wgsl.js';
import { CLAMPED_SWIGLU, COMBINE, GROUP, expertRowsShader, expertShader, groupedExpertShader, routeShader } from './wgsl-moe.js';
import { expertDownShader, expertGluShader, type ExpertDecodeForm } from './wgsl-moe-decode.js';
import { MATVEC_ROWS, WG } from './wgsl.js';

/** One projection of this rank's experts, stacked: buffers of whole experts [e0, e1) each. */
interface ExpertStack {
  weight: Weight;
  rows: number;
  cols: number;
  parts: { buffer: GPUBuffer; e0: number; e1: number }[];
  /** [experts·rows] biases (gpt-oss), or null. */
  bias: GPUBuffer | null;
}

export interface GpuMoeLayer {
  router: GpuWeight;
  routerBias: GPUBuffer | null;
  correction: GPUBuffer | null;
  /** Global ids of the routed experts this rank holds. */
  e0: number;
  e1: number;
  gate: ExpertStack;
  up: ExpertStack;
  down: ExpertStack;
  shared: { gate: GpuWeight; up: GpuWeight; down: GpuWeight } | null;
  uploads: LayerUploads;
}

/** Scratch shared by a shard's MoE layers, [maxBatch, ·] each. */
export interface GpuMoeActivations {
  logits: GPUBuffer;
  ids: GPUBuffer;
  weights: GPUBuffer;
  gate: GPUBuffer; // [B·k, I]
  up: GPUBuffer; // [B·k, I]
  y: GPUBuffer; // [B·k, hidden]
  sharedGate: GPUBuffer; // [B, local shared rows]
  sharedUp: GPUBuffer;
  /** GROUP's per-expert slot counts and offsets [2·experts], and the slots grouped by expert [B·k]. */
  groupMeta: GPUBuffer;
  groupList: GPUBuffer;
}

export async function allocateMoeActivations(ctx: GpuContext, moe: MoeConfig, hidden: number, sharedRows: number, maxBatch: number): Promise<GpuMoeActivations> {
  const B = maxBatch;
  const slots = B * moe.topK;
  const f = (floats: number, name: string) => createStorage(ctx, Math.max(1, floats) * 4, `MoE ${name}`);
  return {
    logits: await f(B * moe.experts, 'router logits'),
    ids: await f(slots, 'expert ids'),
    weights: await f(slots, 'expert weights'),
    gate: await f(slots * moe.expertIntermediate, 'expert gate'),
    up: await f(slots * moe.expertIntermediate, 'expert up'),
    y: await f(slots * hidden, 'expert outputs'),
    sharedGate: await f(B * sharedRows, 'shared gate'),
    sharedUp: await f(B * sharedRows, 'shared up'),
    groupMeta: await f(2 * moe.experts, 'expert groups'),
    groupList: await f(slots, 'slots by expert'),
  };
}

/** Uploads one MoE layer's weights (this rank's experts only). */
export async function uploadMoeLayer(ctx: GpuContext, w: MoeWeights, label: string): Promise<GpuMoeLayer> {
  const up = new LayerUploads(ctx, label);
  const vec = (a: Float32Array | null, name: string) => (a ? up.vector(a, name) : null);
  const e0 = w.firstExpert;
  const e1 = e0 + w.experts.length;
  const stack = async (pick: (e: MoeWeights['experts'][number]) => Weight, biasOf: (e: MoeWeights['experts'][number]) => Float32Array | null, name: string): Promise<ExpertStack> => {
    const first = pick(w.experts[0]);
    const perExpert = first.rows * rowBytes(first.dtype, first.cols);
    // Whole experts per buffer, under the binding limit (and 4-byte aligned per expert for the u32 view).
    const fit = Math.max(1, Math.floor(ctx.limits.maxStorageBufferBindingSize / perExpert));
    const parts: ExpertStack['parts'] = [];
    for (let a = 0; a < w.experts.length; a += fit) {
      const b = Math.min(w.experts.length, a + fit);
      const bytes = new Uint8Array((b - a) * perExpert);
      for (let e = a; e < b; e++) bytes.set(pick(w.experts[e]).bytes.subarray(0, perExpert), (e - a) * perExpert);
      parts.push({ buffer: await up.bytes(bytes, `experts.${name} [${e0 + a}, ${e0 + b})`), e0: e0 + a, e1: e0 + b });
    }
    const biases = w.experts.map(biasOf);
    let bias: GPUBuffer | null = null;
    if (biases[0]) {
      const all = new Float32Array(w.experts.length * first.rows);
      biases.forEach((v, e) => all.set(v!, e * first.rows));
      bias = await vec(all, `experts.${name}.bias`);
    }
    return { weight: first, rows: first.rows, cols: first.cols, parts, bias };
  };
  return {
    router: await up.matrix(w.router, 'router'),
    routerBias: await vec(w.routerBias, 'router.bias'),
    correction: await vec(w.correctionBias, 'e_score_correction_bias'),
    e0,
    e1,
    gate: await stack((e) => e.gate, (e) => e.gateBias, 'gate'),
    up: await stack((e) => e.up, (e) => e.upBias, 'up'),
    down: await stack((e) => e.down, (e) => e.downBias, 'down'),
    shared: w.shared ? { gate: await up.matrix(w.shared.gate, 'shared.gate'), up: await up.matrix(w.shared.up, 'shared.up'), down: await up.matrix(w.shared.down, 'shared.down') } : null,
    uploads: up,
  };
}

/**
 * The smallest batch (rows the kernels are chosen for) that takes the grouped-expert matmul; smaller
 * ones (decode) run the gathered-expert matvec per (token, slot), each row with its own bits.
 */
export const MOE_GROUPED_MIN_ROWS = MATVEC_MAX_BATCH + 1;

/**
 * The grouped matmul's tile for a batch of n rows, k of E experts each: sized for 4× the slots an expert
 * gets on average (routing is uneven; the busiest experts then fit one tile), at most the batch. An
 * expert's last tile is padding past its slots, so short tiles suit many experts of few tokens each; on
 * lavapipe the 64×64 tile ran the bench model's 64-token prompt (8 experts, top-2: 16 slots per expert on
 * average) ~3x faster than 64×16 (mlx4; README.md, "MoE prompt batches").
 */
export function moeTileFor(n: number, k: number, experts: number): MatmulTile {
  return matmulTileFor(Math.min(n, 4 * Math.ceil((n * k) / experts)));
}

/**
 * The dispatches of one MoE layer: x (normed input, [n, hidden]) → out. `accumulate`: add into out
 * (the residual, unsplit shards) instead of writing it (a tensor rank's partial sum for the all-reduce).
 */
export function moeDispatches(
  K: GpuKernels,
  L: GpuMoeLayer,
  moe: MoeConfig,
  act: GpuMoeActivations,
  x: GPUBuffer,
  out: GPUBuffer,
  hidden: number,
  accumulate: boolean,
  st: StepUniform,
  groupedMinRows = MOE_GROUPED_MIN_ROWS,
): Dispatch[] {
  const perToken = (n: number): boolean => n < groupedMinRows;
  const k = moe.topK;
  const I = moe.expertIntermediate;
  const ds: Dispatch[] = [];
  // Route: logits = x·Wrᵀ (+ bias), then each token's experts and weights.
  ds.push(...K.linear('router', L.router, x, act.logits, st, { bias: L.routerBias ?? undefined }));
  const routeKey = `moe_route_${moe.routing}_${moe.experts}_${k}_${moe.groups}_${moe.topkGroups}_${moe.normTopK}_${moe.scalingFactor}`;
  const route = K.pipeline(routeKey, () => routeShader(moe));
  ds.push({
    label: 'moe route',
    pipeline: route,
    bindGroup: K.bind('moe route', route, [st.buffer, act.logits, L.correction ?? K.dummy(), act.ids, act.weights]),
    grid: (n) => [Math.ceil(n / WG), 1, 1],
  });
  // Each slot's expert: gate and up rows over the slot's token, the activation, then down over the slot.
  const experts = (s: ExpertStack, input: GPUBuffer, output: GPUBuffer, perSlotX: boolean) =>
    s.parts.map((part): Dispatch => {
      const dtype = s.weight.dtype;
      const rowBlock = weight8Accessor(dtype, s.cols) !== null;
      const pipeline = rowBlock
        ? K.pipeline(`moe_expert_rows_${dtype}_${layoutKey(K.matvec)}`, () => expertRowsShader(dtype, s.cols, K.matvec))
        : K.pipeline(`moe_expert_${dtype}`, () => expertShader(dtype));
      const params = K.params('moe expert.params', [
        ['u32', s.rows],
        ['u32', s.cols],
        ['u32', k],
        ['u32', part.e0],
        ['u32', part.e1],
        ['u32', perSlotX ? 1 : 0],
        ['u32', s.bias ? 1 : 0],
      ]);
      return {
        label: rowBlock ? 'moe expert (rows)' : 'moe expert',
        pipeline,
        bindGroup: K.bind('moe expert', pipeline, [params, st.buffer, part.buffer, input, act.ids, output, s.bias ?? K.dummy()]),
        grid: (n) => [rowBlock ? Math.ceil(s.rows / MATVEC_ROWS) : s.rows, n * k, 1],
      };
    });
  // A prompt batch groups its slots by expert (GROUP) and runs the tiled matmul per expert over them.
  const ne = L.e1 - L.e0;
  const group = K.pipeline('moe_group', () => GROUP);
  const groupParams = K.params('moe group.params', [
    ['u32', k],
    ['u32', L.e0],
    ['u32', ne],
  ]);
  const tileFor = (n: number): MatmulTile => moeTileFor(n, k, moe.experts);
  const grouped = (s: ExpertStack, input: GPUBuffer, output: GPUBuffer, perSlotX: boolean): Dispatch[] =>
    s.parts.flatMap((part) =>
      MATMUL_TILES.map(({ tile: t }): Dispatch => {
        const loader = matmulLoader(s.weight.dtype, s.cols);
        const pipeline = K.pipeline(`moe_grouped_${s.weight.dtype}_${loader}_${t.rows}x${t.tokens}`, () => groupedExpertShader(s.weight.dtype, loader, t));
        const params = K.params('moe grouped.params', [
          ['u32', s.rows],
          ['u32', s.cols],
          ['u32', k],
          ['u32', part.e0 - L.e0],
          ['u32', part.e1 - part.e0],
          ['u32', ne],
          ['u32', perSlotX ? 1 : 0],
          ['u32', s.bias ? 1 : 0],
        ]);
        return {
          label: 'moe expert (grouped)',
          pipeline,
          bindGroup: K.bind('moe grouped', pipeline, [params, st.buffer, part.buffer, input, output, s.bias ?? K.dummy(), act.groupMeta, act.groupList]),
          grid: (n) => [Math.ceil(s.rows / t.rows), Math.ceil((n * k) / t.tokens) + (part.e1 - part.e0), 1],
          when: (n) => !perToken(n) && tileFor(n) === t,
        };
      }),
    );
  const both = (s: ExpertStack, input: GPUBuffer, output: GPUBuffer, perSlotX: boolean): Dispatch[] => [
    ...experts(s, input, output, perSlotX).map((d): Dispatch => ({ ...d, when: perToken })),
    ...grouped(s, input, output, perSlotX),
  ];
  ds.push({
    label: 'moe group',
    pipeline: group,
    bindGroup: K.bind('moe group', group, [groupParams, st.buffer, act.ids, act.groupMeta, act.groupList]),
    grid: () => [1, 1, 1],
    when: (n) => !perToken(n),
  });
  // Decode with 8-wide weights: two fused dispatches (gate+up+activation, down+combine); otherwise the
  // per-slot kernels with the activation and combine dispatches between and after.
  const fused = fusedDecode(L, hidden, I);
  const unfused = (n: number): boolean => !fused || !perToken(n);
  if (fused) ds.push(...decodeGlu(K, L, moe, act, x, st).map((d): Dispatch => ({ ...d, when: perToken })));
  const unfusedOnly = (d: Dispatch): Dispatch => ({ ...d, when: (n, rows) => (d.when?.(n, rows) ?? true) && unfused(n) });
  ds.push(...[...both(L.gate, x, act.gate, false), ...both(L.up, x, act.up, false)].map(unfusedOnly));
  if (moe.activation === 'swiglu') ds.push(unfusedOnly(K.siluGate(act.gate, act.up, k * I, st)));
  else {
    const pipeline = K.pipeline('moe_clamped_swiglu', () => CLAMPED_SWIGLU);
    const params = K.params('clamped swiglu.params', [
      ['u32', k * I],
      ['f32', moe.swigluLimit],
    ]);
    ds.push(
      unfusedOnly({ label: 'clamped swiglu', pipeline, bindGroup: K.bind('clamped swiglu', pipeline, [params, st.buffer, act.gate, act.up]), grid: (n) => split(Math.ceil((n * k * I) / WG)) }),
    );
  }
  if (fused) ds.push(...decodeDown(K, L, moe, act, out, accumulate, st).map((d): Dispatch => ({ ...d, when: perToken })));
  ds.push(...both(L.down, act.gate, act.y, true).map(unfusedOnly));
  // out (+)= Σ_j weight · expert output, over this rank's experts.
  const combine = K.pipeline('moe_combine', () => COMBINE);
  const params = K.params('moe combine.params', [
    ['u32', hidden],
    ['u32', k],
    ['u32', L.e0],
    ['u32', L.e1],
    ['u32', accumulate ? 1 : 0],
  ]);
  ds.push(
    unfusedOnly({ label: 'moe combine', pipeline: combine, bindGroup: K.bind('moe combine', combine, [params, st.buffer, out, act.y, act.ids, act.weights]), grid: (n) => split(Math.ceil((n * hidden) / WG)) }),
  );
  // Shared experts see every token: out += down(silu(gate(x))·up(x)) over this rank's rows.
  if (L.shared) {
    const rows = L.shared.gate.rows;
    ds.push(...K.linear('shared gate', L.shared.gate, x, act.sharedGate, st));
    ds.push(...K.linear('shared up', L.shared.up, x, act.sharedUp, st));
    ds.push(K.siluGate(act.sharedGate, act.sharedUp, rows, st));
    ds.push(...K.linear('shared down', L.shared.down, act.sharedGate, out, st, { accumulate: true }));
  }
  return ds;
}

/**
 * Rows per workgroup of the fused decode kernels (of each matrix for gate+up). Down takes 8: its
 * workgroup walks the token's k experts, and 8 rows share each slot's activations; on lavapipe it ran at
 * 0.66-0.76x of the per-slot chain's CPU time for MLX 4-bit and FP8 against 0.65-1.14x with 4 rows
 * (bench/gpu-moe-experts.ts), where gate+up with 8 rows of each matrix was slower (0.85-1.03x against
 * 0.68-0.84x with 4). On a GPU with many compute units a token's down then has only rows/8
 * workgroups: a device choice, as the tiles are.
 */
export const MOE_GLU_ROWS = 4;
export const MOE_DOWN_ROWS = 8;

/** Whether decode takes the fused expert kernels: gate/up and down all decode 8 columns at a time. */
export function fusedDecode(L: GpuMoeLayer, hidden: number, I: number): boolean {
  return L.gate.cols === hidden && L.down.cols === I && weight8Accessor(L.gate.weight.dtype, hidden) !== null && weight8Accessor(L.down.weight.dtype, I) !== null;
}

const formKey = (rows: number, { factored = true }: ExpertDecodeForm): string => `r${rows}${factored ? '' : '_w8'}`;

/**
 * Gate and up rows of each slot's expert with the activation fused (one dispatch per buffer of whole
 * experts). `form`: the kernel shape (bench/gpu-moe-experts.ts times the others).
 */
export function decodeGlu(K: GpuKernels, L: GpuMoeLayer, moe: MoeConfig, act: GpuMoeActivations, x: GPUBuffer, st: StepUniform, form: ExpertDecodeForm = {}): Dispatch[] {
  const { gate, up } = L;
  const dtype = gate.weight.dtype;
  if (up.weight.dtype !== dtype || up.parts.length !== gate.parts.length) throw new Error(`MoE layer: gate and up experts differ in format or split (${dtype}, ${up.weight.dtype})`);
  const R = form.rows ?? MOE_GLU_ROWS;
  const pipeline = K.pipeline(`moe_expert_glu_${dtype}_${gate.cols}_${moe.activation}_${formKey(R, form)}_${layoutKey(K.matvec)}`, () =>
    expertGluShader(dtype, gate.cols, K.matvec, moe.activation, { ...form, rows: R }),
  );
  return gate.parts.map((part, i): Dispatch => {
    const params = K.params('moe expert glu.params', [
      ['u32', gate.rows],
      ['u32', gate.cols],
      ['u32', moe.topK],
      ['u32', part.e0],
      ['u32', part.e1],
      ['u32', gate.bias ? 1 : 0],
      ['f32', Number.isFinite(moe.swigluLimit) ? moe.swigluLimit : 3.4e38],
    ]);
    return {
      label: 'moe expert glu',
      pipeline,
      bindGroup: K.bind('moe expert glu', pipeline, [params, st.buffer, part.buffer, up.parts[i].buffer, x, act.ids, act.gate, gate.bias ?? K.dummy(), up.bias ?? K.dummy()]),
      grid: (n) => [Math.ceil(gate.rows / R), n * moe.topK, 1],
    };
  });
}

/** Down rows of each token's experts, weighted and summed into out (one dispatch per buffer of whole experts). */
export function decodeDown(
  K: GpuKernels,
  L: GpuMoeLayer,
  moe: MoeConfig,
  act: GpuMoeActivations,
  out: GPUBuffer,
  accumulate: boolean,
  st: StepUniform,
  form: ExpertDecodeForm = {},
): Dispatch[] {
  const { down } = L;
  const dtype = down.weight.dtype;
  const R = form.rows ?? MOE_DOWN_ROWS;
  const pipeline = K.pipeline(`moe_expert_down_${dtype}_${down.cols}_${formKey(R, form)}_${layoutKey(K.matvec)}`, () => expertDownShader(dtype, down.cols, K.matvec, { ...form, rows: R }));
  return down.parts.map((part, i): Dispatch => {
    const params = K.params('moe expert down.params', [
      ['u32', down.rows],
      ['u32', down.cols],
      ['u32', moe.topK],
      ['u32', part.e0],
      ['u32', part.e1],
      ['u32', down.bias ? 1 : 0],
      // a later buffer's experts add to the earlier ones' sum
      ['u32', accumulate || i > 0 ? 1 : 0],
    ]);
    return {
      label: 'moe expert down',
      pipeline,
      bindGroup: K.bind('moe expert down', pipeline, [params, st.buffer, part.buffer, act.gate, act.ids, act.weights, out, down.bias ?? K.dummy()]),
      grid: (n) => [Math.ceil(down.rows / R), n, 1],
    };
  });
}
