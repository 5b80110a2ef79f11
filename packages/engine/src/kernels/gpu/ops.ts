/**
 * Host side of the WGSL kernels: compiled pipelines (cached per context) and bind-once dispatches.
 * An op returns `Dispatch`es whose bind groups are built at setup time; recording a token is then just
 * setPipeline/setBindGroup/dispatch per kernel into one compute pass, with the batch size `n` only
 * deciding the grid. Everything that changes per token lives in the `Step` uniform and in buffers the
 * caller writes before submitting (token ids, RoPE cos/sin).
 */
import type { DType } from '../backend.js';
import { guarded, type GpuContext } from './context.js';
import { Usage, type GpuWeight, type GpuWeightChunk } from './buffers.js';
import { weight8Accessor } from './quant-wgsl.js';
import {
  ADD,
  ATTENTION,
  ATTENTION_TILED,
  ATTN_TILE,
  ATTN_TILED_MAX_HEAD_DIM,
  GATHER_ROWS,
  KV_STORE,
  ROPE,
  ROPE_QK_STORE,
  SAMPLE,
  SILU_GATE,
  SOFTMAX,
  WG,
  embedShader,
  matvecFastShader,
  matvecShader,
  matvec8Shader,
  vectorWidth,
  MATVEC_ROWS,
  matvecLayout,
  rmsnormShader,
  type MatvecLayout,
  type RowBlockOptions,
} from './wgsl.js';
import { MATMUL_TILES, matmulLoader, matmulTileFor, tiledMatmulShader, type MatmulTile } from './wgsl-matmul.js';

export type Grid = [number, number, number];

export interface Dispatch {
  readonly label: string;
  readonly pipeline: GPUComputePipeline;
  readonly bindGroup: GPUBindGroup;
  /** Workgroups for a batch of n tokens. */
  grid(n: number): Grid;
  /**
   * Recorded only when this holds (picks matvec vs tiled matmul). `n`: the batch size the kernels are
   * chosen for — the rows of one sequence, which in a step of several sequences is the largest
   * sequence's (so each row gets the kernels it gets alone); `rows`: the step's rows (the grid's; n when absent).
   */
  when?(n: number, rows?: number): boolean;
}

/**
 * A sequence's prompt rows from this many on take the query-tiled attention kernel (ATTENTION_TILED:
 * K/V rows read once per 8 queries); fewer (decode, short speculative verifies) the per-token kernel,
 * which spreads one query's positions over the workgroup.
 */
export const ATTN_TILED_MIN_TOKENS = 8;

/** Batches up to this size use the matvec kernels (one token per workgroup); larger ones the tiled matmul. */
export const MATVEC_MAX_BATCH = 2;

/**
 * Tokens per workgroup of the row-block kernel when a step of decode rows has more rows than
 * MATVEC_MAX_BATCH (several sequences' decode rows): the weights are read once per this many rows,
 * each row's result the bits of the one-token kernel.
 */
export const ROW_BLOCK_TOKENS = 4;

export interface LinearOptions {
  bias?: GPUBuffer;
  accumulate?: boolean;
  outStride?: number;
  xStride?: number;
  rowOffset?: number;
  only?: 'matvec' | 'matmul';
  /** Only the batch's last token (x row n - 1 → out row 0), e.g. the LM head. Uses matvec. */
  lastToken?: boolean;
  /** Use the per-element matvec even where the row-block one applies (tests compare both). */
  generic?: boolean;
  /** x is un-normalised: the row-block kernel applies this RMSNorm itself (matvec only; see withNorm). */
  norm?: RowNorm;
}

/** An RMSNorm folded into the row-block matvec: its weight [cols] and epsilon. */
export interface RowNorm {
  weight: GPUBuffer;
  eps: number;
}

/**
 * The per-submission uniform: position of the first token, batch size, sampling seed, and the row of
 * the step's activations where these tokens start (a sequence's own Step in a step of several).
 */
export class StepUniform {
  readonly buffer: GPUBuffer;
  readonly #data = new Uint32Array(4);
  constructor(ctx: GpuContext) {
    this.buffer = ctx.device.createBuffer({ label: 'step', size: 16, usage: Usage.UNIFORM | Usage.COPY_DST });
  }
  /** Queues the write; it lands before the next submit on this queue. */
  write(ctx: GpuContext, pos0: number, n: number, seed = 0, row0 = 0): void {
    this.#data[0] = pos0;
    this.#data[1] = n;
    this.#data[2] = seed >>> 0;
    this.#data[3] = row0;
    ctx.device.queue.writeBuffer(this.buffer, 0, this.#data);
  }
  destroy(): void {
    this.buffer.destroy();
  }
}

/** Splits `count` workgroups over x and y so no dimension exceeds the per-dimension limit. */
export function split(count: number, maxPerDim = 65535): Grid {
  if (count <= maxPerDim) return [count, 1, 1];
  return [maxPerDim, Math.ceil(count / maxPerDim), 1];
}

const flat = (total: number): Grid => split(Math.ceil(total / WG));

/**
 * The one-token row-block kernel's form for `form` on `dtype`: the fused SwiGLU of Q8_0/Q4_0 takes 8
 * rows per workgroup (x, its norm weight and Σx² are loaded once per 16 weight rows instead of 8) with
 * each block decoded in halves (fewer decoded values live at once). Same sums in the same order, so each
 * row keeps its bits, and the grouped form (4 rows) matches it. Q4_K takes 8 rows (plain, SwiGLU) or 16
 * (a single matrix with the folded norm: q/k/v, the LM head). f16/bf16 were slower with 8 rows on lavapipe and keep the plain form (README:
 * "Fused gate+up cost", "Q4_K decode").
 */
export function oneTokenForm(dtype: DType, form: RowBlockOptions): RowBlockOptions {
  if (form.tokens) return form;
  if (form.glu && (dtype === 'q8_0' || dtype === 'q4_0')) return { ...form, rows: 2 * MATVEC_ROWS, halves: true };
  // Q4_K decodes each step's sub-blocks one at a time already (no halves option). A folded norm's x loads
  // (x, its norm weight, Σx²) are shared by 16 rows of one matrix, as by the SwiGLU's 8 rows of two.
  if (dtype === 'q4_k') return { ...form, rows: form.norm && !form.glu ? 4 * MATVEC_ROWS : 2 * MATVEC_ROWS };
  return form;
}

/** Batches the row-block (decode) kernels take. */
const decode = (n: number): boolean => n <= MATVEC_MAX_BATCH;

/** A matvec layout's part of a pipeline key (kernels built for one layout differ from another's). */
export const layoutKey = (l: MatvecLayout): string => `${l.lanes}${l.subgroups ? '_sg' : ''}`;

/** `d`, recorded only for batch sizes where `pred` also holds. */
const onlyWhen = (d: Dispatch, pred: (n: number) => boolean): Dispatch => ({ ...d, when: (n, rows) => pred(n) && (d.when?.(n, rows) ?? true) });

type Field = ['u32' | 'f32', number];

/** Compiled pipelines per device: compiling is the slow part (seconds per kernel on lavapipe). */
const PIPELINES = new WeakMap<GPUDevice, Map<string, GPUComputePipeline>>();

export class GpuKernels {
  /** Threads per workgroup and reduction of the decode matvec on this device. */
  readonly matvec: MatvecLayout;
  readonly #pipelines: Map<string, GPUComputePipeline>;
  readonly #owned: GPUBuffer[] = [];
  /** Where params() puts the buffers it makes while `ownedBy` runs (else #owned). */
  #sink: GPUBuffer[] | null = null;
  #dummy: GPUBuffer | null = null;

  /** `matvec` overrides the device's layout (tests run the workgroup-memory reduction this way). */
  constructor(
    readonly ctx: GpuContext,
    options: { matvec?: MatvecLayout } = {},
  ) {
    this.matvec = options.matvec ?? matvecLayout(ctx.features);
    let cache = PIPELINES.get(ctx.device);
    if (!cache) PIPELINES.set(ctx.device, (cache = new Map()));
    this.#pipelines = cache;
  }

  pipeline(key: string, code: () => string): GPUComputePipeline {
    let p = this.#pipelines.get(key);
    if (!p) {
      const module = this.ctx.device.createShaderModule({ label: key, code: code() });
      p = this.ctx.device.createComputePipeline({ label: key, layout: 'auto', compute: { module, entryPoint: 'main' } });
      this.#pipelines.set(key, p);
    }
    return p;
  }

  /** Compiles every pipeline the given dtypes need now, so shader errors surface at load time. */
  async warm(dtypes: DType[]): Promise<void> {
    await guarded(this.ctx, 'WGSL pipelines', () => {
      for (const d of dtypes) {
        this.pipeline(`matvec_${d}`, () => matvecShader(d));
        if (vectorWidth(d) > 0) {
          for (const form of [{}, { norm: true }, { glu: true, norm: true }]) {
            this.#matvecFast(d, oneTokenForm(d, form));
            this.#matvecFast(d, { ...form, tokens: ROW_BLOCK_TOKENS });
          }
        }
        for (const { tile } of MATMUL_TILES) this.#matmul(d, vectorWidth(d) > 0 ? 'step' : 'element', tile);
        this.pipeline(`embed_${d}`, () => embedShader(d));
      }
      this.pipeline('rmsnorm', () => rmsnormShader(false));
      this.pipeline('rmsnorm_inplace', () => rmsnormShader(true));
      this.pipeline('rope', () => ROPE);
      this.pipeline('kv_store', () => KV_STORE);
      this.pipeline('rope_qk_store', () => ROPE_QK_STORE);
      this.pipeline('attention', () => ATTENTION);
      this.pipeline('attention_tiled', () => ATTENTION_TILED);
      this.pipeline('silu_gate', () => SILU_GATE);
      this.pipeline('add', () => ADD);
      this.pipeline('gather_rows', () => GATHER_ROWS);
      this.pipeline('softmax', () => SOFTMAX);
      this.pipeline('sample', () => SAMPLE);
    });
  }

  #matvecFast(dtype: DType, form: RowBlockOptions): GPUComputePipeline {
    const l = this.matvec;
    const { glu = false, norm = false, tokens = 1, rows = MATVEC_ROWS, halves = false } = form;
    const key = `matvec_fast_${dtype}_${layoutKey(l)}${glu ? '_glu' : ''}${norm ? '_norm' : ''}${tokens > 1 ? `_tk${tokens}` : ''}${rows !== MATVEC_ROWS ? `_r${rows}` : ''}${halves ? '_h' : ''}`;
    return this.pipeline(key, () => matvecFastShader(dtype, l, { glu, norm, tokens, rows, halves }));
  }

  #matmul(dtype: DType, loader: 'step' | 'element', t: MatmulTile): GPUComputePipeline {
    return this.pipeline(`matmul_${dtype}_${loader}_${t.rows}x${t.tokens}`, () => tiledMatmulShader(dtype, loader, t));
  }

  /** A 16-byte-aligned uniform of u32/f32 fields, owned (destroyed) by these kernels. */
  params(label: string, fields: Field[]): GPUBuffer {
    const size = Math.max(16, Math.ceil((fields.length * 4) / 16) * 16);
    const buf = this.ctx.device.createBuffer({ label, size, usage: Usage.UNIFORM, mappedAtCreation: true });
    const range = buf.getMappedRange();
    const u = new Uint32Array(range);
    const f = new Float32Array(range);
    fields.forEach(([t, v], i) => (t === 'u32' ? (u[i] = v >>> 0) : (f[i] = v)));
    buf.unmap();
    (this.#sink ?? this.#owned).push(buf);
    return buf;
  }

  /**
   * Runs `build` with the parameter buffers it makes owned by `owner` instead of these kernels: the
   * dispatches of something shorter-lived (a sequence's KV cache) are freed with it.
   */
  ownedBy<T>(owner: GPUBuffer[], build: () => T): T {
    const prev = this.#sink;
    this.#sink = owner;
    try {
      return build();
    } finally {
      this.#sink = prev;
    }
  }

  /** Bound where a kernel's optional input (bias) is absent. */
  dummy(): GPUBuffer {
    this.#dummy ??= this.ctx.device.createBuffer({ label: 'dummy', size: 16, usage: Usage.STORAGE });
    return this.#dummy;
  }

  /** Binding i = buffers[i]; null leaves binding i out (a kernel form that does not declare it). */
  bind(label: string, pipeline: GPUComputePipeline, buffers: (GPUBuffer | null)[]): GPUBindGroup {
    return this.ctx.device.createBindGroup({
      label,
      layout: pipeline.getBindGroupLayout(0),
      entries: buffers.flatMap((buffer, binding) => (buffer ? [{ binding, resource: { buffer } }] : [])),
    });
  }

  /**
   * out[b, rowOffset + r] (+)= Σ_c W[r, c] · x[b, c] (+ bias[r]) for every chunk of `w`: the row-block
   * matvec for batches up to MATVEC_MAX_BATCH, the tiled matmul for larger ones.
   */
  linear(label: string, w: GpuWeight, x: GPUBuffer, out: GPUBuffer, step: StepUniform, opts: LinearOptions = {}): Dispatch[] {
    const flags = (opts.bias ? 1 : 0) | (opts.accumulate ? 2 : 0) | (opts.lastToken ? 4 : 0);
    if (opts.lastToken || opts.norm) opts = { ...opts, only: 'matvec' };
    if (opts.norm && (!this.rowBlocks(w) || opts.generic || (opts.xStride ?? w.cols) !== w.cols)) {
      throw new Error(`${label}: a fused RMSNorm needs the row-block matvec (columns ${w.cols} in whole ${vectorWidth(w.dtype)}-element steps)`);
    }
    return w.chunks.flatMap((chunk) => {
      const params = this.#weightParams(label, w, chunk, opts, flags);
      // The bias is indexed by rowOffset + r, so it is bound whole.
      const buffers = [params, step.buffer, chunk.buffer, x, out, opts.bias ?? this.dummy(), null, opts.norm?.weight ?? null];
      return this.#linearChunk(label, w.dtype, w.cols, chunk.rows, buffers, opts);
    });
  }

  /**
   * SwiGLU: out = silu(gate·x) · (up·x) over [n, ffn]. For decode (n <= MATVEC_MAX_BATCH) one fused row-block kernel
   * reads both weights (no gate/up activations written, no separate gate kernel); for a batch, the gate
   * and up projections (`up` into `tmp`) and the elementwise gate. With `norm` (from withNorm), x is
   * un-normalised and only the fused kernel is returned, with that RMSNorm folded in.
   */
  glu(label: string, gate: GpuWeight, up: GpuWeight, x: GPUBuffer, out: GPUBuffer, tmp: GPUBuffer, step: StepUniform, norm?: RowNorm): Dispatch[] {
    const same = gate.dtype === up.dtype && gate.rows === up.rows && gate.cols === up.cols && gate.chunks.length === up.chunks.length;
    if (!same) throw new Error(`${label}: gate_proj and up_proj differ in shape or dtype`);
    const fused = (when: (n: number) => boolean) =>
      gate.chunks.flatMap((chunk, i) => {
        const params = this.#weightParams(label, gate, chunk, { norm }, 0);
        const buffers = [params, step.buffer, chunk.buffer, x, out, this.dummy(), up.chunks[i].buffer, norm?.weight ?? null];
        return this.#rowBlock(label, gate.dtype, chunk.rows, buffers, { glu: true, norm: !!norm }, when);
      });
    if (norm) {
      if (!this.rowBlocks(gate)) throw new Error(`${label}: a fused RMSNorm needs the row-block matvec`);
      return fused(() => true);
    }
    const gateDispatch = this.siluGate(out, tmp, gate.rows, step);
    const unfused: Dispatch[] = [
      ...this.linear(`${label}.gate`, gate, x, out, step),
      ...this.linear(`${label}.up`, up, x, tmp, step),
      gateDispatch,
    ];
    if (!this.rowBlocks(gate)) return unfused;
    return [...fused(decode), ...unfused.map((d) => onlyWhen(d, (n) => !decode(n)))];
  }

  /**
   * RMSNorm of x [n, dim] feeding the kernels `emit` records. `emit(input, norm)` is called twice: for
   * decode batches (n <= MATVEC_MAX_BATCH), when every one of `weights` takes the row-block matvec, with
   * x itself and the norm to fold into those kernels (no norm dispatch, no normalised copy of x);
   * otherwise with `xn`, which one RMSNorm dispatch fills first.
   */
  withNorm(
    x: GPUBuffer,
    xn: GPUBuffer,
    norm: RowNorm & { dim: number },
    step: StepUniform,
    weights: GpuWeight[],
    emit: (input: GPUBuffer, norm?: RowNorm) => Dispatch[],
  ): Dispatch[] {
    const separate = [this.rmsnorm(x, norm.weight, xn, norm.dim, 1, norm.eps, step), ...emit(xn)];
    if (!weights.every((w) => this.rowBlocks(w) && w.cols === norm.dim)) return separate;
    return [...emit(x, norm).map((d) => onlyWhen(d, decode)), ...separate.map((d) => onlyWhen(d, (n) => !decode(n)))];
  }

  /** Whether `w` takes the row-block matvec (its rows in whole 16-byte steps or GGUF blocks). */
  rowBlocks(w: GpuWeight): boolean {
    return this.#fast(w.dtype, w.cols, w.cols);
  }

  #weightParams(label: string, w: GpuWeight, chunk: GpuWeightChunk, opts: LinearOptions, flags: number): GPUBuffer {
    return this.params(`${label}.params`, [
      ['u32', chunk.rows],
      ['u32', w.cols],
      ['u32', (opts.rowOffset ?? 0) + chunk.rowStart],
      ['u32', opts.outStride ?? w.rows],
      ['u32', opts.xStride ?? w.cols],
      ['u32', flags],
      ['f32', opts.norm?.eps ?? 0],
    ]);
  }

  /** 16-byte (or whole-block) steps need every row and x row to start on a step boundary. */
  #fast(dtype: DType, cols: number, xStride: number): boolean {
    // vectorWidth 0: a format without a row-block decoder (Q5_K/Q6_K, MXFP4, MLX, FP8: matvec8Shader or per element).
    const vw = vectorWidth(dtype);
    return vw > 0 && cols % vw === 0 && xStride % vw === 0;
  }

  #linearChunk(label: string, dtype: DType, cols: number, rows: number, buffers: (GPUBuffer | null)[], opts: LinearOptions): Dispatch[] {
    const small = (n: number) => opts.only === 'matvec' || (opts.only !== 'matmul' && n <= MATVEC_MAX_BATCH);
    const out: Dispatch[] = [];
    if (opts.only !== 'matmul') {
      if (this.#fast(dtype, cols, opts.xStride ?? cols) && !opts.generic) {
        out.push(...this.#rowBlock(label, dtype, rows, buffers, { norm: !!opts.norm }, small, !!opts.lastToken));
      } else if (vectorWidth(dtype) === 0 && weight8Accessor(dtype, cols) && !opts.generic) {
        // MLX 4/8-bit, FP8, Q5_K/Q6_K, MXFP4: 4 rows per workgroup, 8 columns (one scale lookup) per thread step.
        const l = this.matvec;
        const m8 = this.pipeline(`matvec8_${dtype}_${layoutKey(l)}`, () => matvec8Shader(dtype, cols, l));
        out.push({ label: `${label} (matvec)`, pipeline: m8, bindGroup: this.bind(label, m8, buffers.slice(0, 6)), grid: () => split(Math.ceil(rows / MATVEC_ROWS)), when: small });
      } else {
        const generic = this.pipeline(`matvec_${dtype}`, () => matvecShader(dtype));
        out.push({ label: `${label} (matvec)`, pipeline: generic, bindGroup: this.bind(label, generic, buffers.slice(0, 6)), grid: () => split(rows), when: small });
      }
    }
    if (opts.only !== 'matvec') {
      // One dispatch per tile shape; the batch size picks which one is recorded.
      for (const { tile: t } of MATMUL_TILES) {
        const matmul = this.#matmul(dtype, matmulLoader(dtype, cols), t);
        out.push({
          label: `${label} (matmul)`,
          pipeline: matmul,
          bindGroup: this.bind(label, matmul, buffers.slice(0, 6)),
          grid: (n) => [Math.ceil(rows / t.rows), Math.ceil(n / t.tokens), 1],
          when: (n) => !small(n) && matmulTileFor(n) === t,
        });
      }
    }
    return out;
  }

  /**
   * The row-block kernel, one workgroup per 4 rows and token (only the last token's with `lastToken`);
   * for a step of more than MATVEC_MAX_BATCH rows, per 4 rows and ROW_BLOCK_TOKENS tokens.
   */
  #rowBlock(label: string, dtype: DType, rows: number, buffers: (GPUBuffer | null)[], form: RowBlockOptions, when: (n: number) => boolean, lastToken = false): Dispatch[] {
    const single = oneTokenForm(dtype, form);
    const blocks = split(Math.ceil(rows / (single.rows ?? MATVEC_ROWS)));
    const pipeline = this.#matvecFast(dtype, single);
    const one: Dispatch = {
      label: `${label} (matvec)`,
      pipeline,
      bindGroup: this.bind(label, pipeline, buffers),
      // The LM head of a prompt batch reads one token's x: one grid layer, not n identical ones.
      grid: (n: number): Grid => [blocks[0], blocks[1], lastToken ? 1 : n],
      when: lastToken ? when : (n, stepRows = n) => when(n) && stepRows <= MATVEC_MAX_BATCH,
    };
    if (lastToken) return [one];
    const grouped = this.#matvecFast(dtype, { glu: form.glu, norm: form.norm, tokens: ROW_BLOCK_TOKENS });
    const groupBlocks = split(Math.ceil(rows / MATVEC_ROWS));
    return [
      one,
      {
        label: `${label} (matvec ×${ROW_BLOCK_TOKENS})`,
        pipeline: grouped,
        bindGroup: this.bind(label, grouped, buffers),
        grid: (n: number): Grid => [groupBlocks[0], groupBlocks[1], Math.ceil(n / ROW_BLOCK_TOKENS)],
        when: (n, stepRows = n) => when(n) && stepRows > MATVEC_MAX_BATCH,
      },
    ];
  }

  /**
   * OUT[b] = row TOK[b] of the embedding table `w`, widened to f32 (one dispatch per row chunk, each
   * writing the tokens its rows hold).
   */
  embed(w: GpuWeight, tokens: GPUBuffer, out: GPUBuffer, step: StepUniform): Dispatch[] {
    const pipeline = this.pipeline(`embed_${w.dtype}`, () => embedShader(w.dtype));
    return w.chunks.map((chunk) => {
      const params = this.params('embed.params', [
        ['u32', chunk.rows],
        ['u32', w.cols],
        ['u32', chunk.rowStart],
      ]);
      return {
        label: 'embed',
        pipeline,
        bindGroup: this.bind('embed', pipeline, [params, step.buffer, chunk.buffer, tokens, out]),
        grid: (n: number) => flat(n * w.cols),
      };
    });
  }

  /** RMSNorm of rows of `dim` (`groups` per token); in place when `out` is null. */
  rmsnorm(x: GPUBuffer, weight: GPUBuffer, out: GPUBuffer | null, dim: number, groups: number, eps: number, step: StepUniform): Dispatch {
    const inPlace = out === null;
    const pipeline = this.pipeline(inPlace ? 'rmsnorm_inplace' : 'rmsnorm', () => rmsnormShader(inPlace));
    const params = this.params('rmsnorm.params', [
      ['u32', dim],
      ['u32', groups],
      ['f32', eps],
    ]);
    const buffers = [params, step.buffer, weight, x];
    if (out) buffers.push(out);
    return { label: 'rmsnorm', pipeline, bindGroup: this.bind('rmsnorm', pipeline, buffers), grid: (n) => split(n * groups) };
  }

  /** Rotate-half RoPE in place on x [n, heads, headDim] with cos/sin from `cs` [n, headDim/2, 2]. */
  rope(x: GPUBuffer, cs: GPUBuffer, heads: number, headDim: number, step: StepUniform): Dispatch {
    const pipeline = this.pipeline('rope', () => ROPE);
    const params = this.params('rope.params', [
      ['u32', heads],
      ['u32', headDim],
    ]);
    return {
      label: 'rope',
      pipeline,
      bindGroup: this.bind('rope', pipeline, [params, step.buffer, cs, x]),
      grid: (n) => flat((n * heads * headDim) / 2),
    };
  }

  /**
   * RoPE of q [n, heads, headDim] in place and of k [n, kvHeads, headDim] into the caches with v, at
   * the batch's positions: ROPE_QK_STORE, one dispatch for rope(q), rope(k) and kvStore.
   */
  ropeStore(q: GPUBuffer, k: GPUBuffer, v: GPUBuffer, kCache: GPUBuffer, vCache: GPUBuffer, cs: GPUBuffer, shape: { heads: number; kvHeads: number; headDim: number }, step: StepUniform): Dispatch {
    const pipeline = this.pipeline('rope_qk_store', () => ROPE_QK_STORE);
    const params = this.params('rope_qk_store.params', [
      ['u32', shape.heads],
      ['u32', shape.kvHeads],
      ['u32', shape.headDim],
    ]);
    return {
      label: 'rope_qk_store',
      pipeline,
      bindGroup: this.bind('rope_qk_store', pipeline, [params, step.buffer, cs, q, k, v, kCache, vCache]),
      grid: (n) => flat((n * (shape.heads + shape.kvHeads) * shape.headDim) / 2),
    };
  }

  kvStore(k: GPUBuffer, v: GPUBuffer, kCache: GPUBuffer, vCache: GPUBuffer, kvDim: number, step: StepUniform): Dispatch {
    const pipeline = this.pipeline('kv_store', () => KV_STORE);
    const params = this.params('kv_store.params', [['u32', kvDim]]);
    return {
      label: 'kv_store',
      pipeline,
      bindGroup: this.bind('kv_store', pipeline, [params, step.buffer, k, v, kCache, vCache]),
      grid: (n) => flat(n * kvDim),
    };
  }

  attention(
    q: GPUBuffer,
    kCache: GPUBuffer,
    vCache: GPUBuffer,
    scratch: GPUBuffer,
    out: GPUBuffer,
    shape: {
      heads: number;
      kvHeads: number;
      headDim: number;
      maxSeq: number;
      window: number | null;
      /** Query heads per KV head in the whole model. @default heads / kvHeads */
      group?: number;
      headOffset?: number;
      kvOffset?: number;
      /** Per local head sink logits (gpt-oss), joining each softmax. */
      sinks?: GPUBuffer | null;
    },
    step: StepUniform,
    kernel: 'auto' | 'per-token' | 'tiled' = 'auto',
  ): Dispatch[] {
    const params = this.params('attention.params', [
      ['u32', shape.heads],
      ['u32', shape.kvHeads],
      ['u32', shape.headDim],
      ['u32', shape.maxSeq],
      ['u32', shape.window ?? 0],
      ['f32', 1 / Math.sqrt(shape.headDim)],
      ['u32', shape.group ?? shape.heads / shape.kvHeads],
      ['u32', shape.headOffset ?? 0],
      ['u32', shape.kvOffset ?? 0],
      ['u32', shape.sinks ? 1 : 0],
    ]);
    const sinks = shape.sinks ?? this.dummy();
    const perToken = (): Dispatch => {
      const pipeline = this.pipeline('attention', () => ATTENTION);
      return {
        label: 'attention',
        pipeline,
        bindGroup: this.bind('attention', pipeline, [params, step.buffer, q, kCache, vCache, scratch, out, sinks]),
        grid: (n) => [shape.heads, n, 1],
      };
    };
    const tiled = (): Dispatch => {
      if (shape.headDim > ATTN_TILED_MAX_HEAD_DIM) throw new Error(`tiled attention takes head dims up to ${ATTN_TILED_MAX_HEAD_DIM}, not ${shape.headDim}`);
      const pipeline = this.pipeline('attention_tiled', () => ATTENTION_TILED);
      return {
        label: 'attention_tiled',
        pipeline,
        bindGroup: this.bind('attention_tiled', pipeline, [params, step.buffer, q, kCache, vCache, out, sinks]),
        grid: (n) => [shape.heads, Math.ceil(n / ATTN_TILE), 1],
      };
    };
    if (kernel === 'per-token' || (kernel === 'auto' && shape.headDim > ATTN_TILED_MAX_HEAD_DIM)) return [perToken()];
    if (kernel === 'tiled') return [tiled()];
    return [onlyWhen(perToken(), (n) => n < ATTN_TILED_MIN_TOKENS), onlyWhen(tiled(), (n) => n >= ATTN_TILED_MIN_TOKENS)];
  }

  /** x += y (+ bias) over [n, width]. */
  add(x: GPUBuffer, y: GPUBuffer, bias: GPUBuffer | null, width: number, step: StepUniform): Dispatch {
    const pipeline = this.pipeline('add', () => ADD);
    const params = this.params('add.params', [
      ['u32', width],
      ['u32', bias ? 1 : 0],
    ]);
    return {
      label: 'add',
      pipeline,
      bindGroup: this.bind('add', pipeline, [params, step.buffer, x, y, bias ?? this.dummy()]),
      grid: (n) => flat(n * width),
    };
  }

  /** OUT[b] = X[ROWS[b]] over [n, width] (`rows`: u32 row indices the caller writes per step). */
  gatherRows(rows: GPUBuffer, x: GPUBuffer, out: GPUBuffer, width: number, step: StepUniform): Dispatch {
    const pipeline = this.pipeline('gather_rows', () => GATHER_ROWS);
    const params = this.params('gather_rows.params', [['u32', width]]);
    return {
      label: 'gather_rows',
      pipeline,
      bindGroup: this.bind('gather_rows', pipeline, [params, step.buffer, rows, x, out]),
      grid: (n) => flat(n * width),
    };
  }

  siluGate(gate: GPUBuffer, up: GPUBuffer, width: number, step: StepUniform): Dispatch {
    const pipeline = this.pipeline('silu_gate', () => SILU_GATE);
    const params = this.params('silu_gate.params', [['u32', width]]);
    return {
      label: 'silu_gate',
      pipeline,
      bindGroup: this.bind('silu_gate', pipeline, [params, step.buffer, gate, up]),
      grid: (n) => flat(n * width),
    };
  }

  softmax(x: GPUBuffer, cols: number, groups: number, step: StepUniform): Dispatch {
    const pipeline = this.pipeline('softmax', () => SOFTMAX);
    const params = this.params('softmax.params', [
      ['u32', cols],
      ['u32', groups],
    ]);
    return { label: 'softmax', pipeline, bindGroup: this.bind('softmax', pipeline, [params, step.buffer, x]), grid: (n) => split(n * groups) };
  }

  /**
   * Picks a token from `logits` into `result` ([token, score bits]): from row n - 1 of [n, count] when
   * `lastRow`, else from row 0.
   */
  sample(logits: GPUBuffer, result: GPUBuffer, count: number, temperature: number, step: StepUniform, lastRow = true): Dispatch {
    const pipeline = this.pipeline('sample', () => SAMPLE);
    const params = this.params('sample.params', [
      ['u32', count],
      ['f32', temperature],
      ['u32', lastRow ? 1 : 0],
    ]);
    return { label: 'sample', pipeline, bindGroup: this.bind('sample', pipeline, [params, step.buffer, logits, result]), grid: () => [1, 1, 1] };
  }

  destroy(): void {
    for (const b of this.#owned) b.destroy();
    this.#owned.length = 0;
    this.#dummy?.destroy();
    this.#dummy = null;
  }
}

/** Records the dispatches that apply to a batch of `n` tokens into one compute pass; returns how many. */
export function recordPass(encoder: GPUCommandEncoder, dispatches: readonly Dispatch[], n: number, label = 'forward'): number {
  const pass = encoder.beginComputePass({ label });
  const count = recordInto(pass, dispatches, n);
  pass.end();
  return count;
}

/**
 * Records into an open pass the dispatches that apply, for `n` rows with the kernels chosen for
 * batches of `kernelRows` (see Dispatch.when); returns how many.
 */
export function recordInto(pass: GPUComputePassEncoder, dispatches: readonly Dispatch[], n: number, kernelRows = n): number {
  let count = 0;
  for (const d of dispatches) {
    if (d.when && !d.when(kernelRows, n)) continue;
    const [x, y, z] = d.grid(n);
    if (x === 0 || y === 0 || z === 0) continue;
    pass.setPipeline(d.pipeline);
    pass.setBindGroup(0, d.bindGroup);
    pass.dispatchWorkgroups(x, y, z);
    count++;
  }
  return count;
}

/** Records `dispatches` for `n` tokens into one command buffer and submits it. */
export function submit(ctx: GpuContext, dispatches: readonly Dispatch[], n: number): void {
  ctx.assertAlive();
  const encoder = ctx.device.createCommandEncoder();
  recordPass(encoder, dispatches, n);
  ctx.device.queue.submit([encoder.finish()]);
}
