/**
 * Host side of the WGSL kernels: compiled pipelines (cached per context) and bind-once dispatches.
 * An op returns `Dispatch`es whose bind groups are built at setup time; recording a token is then just
 * setPipeline/setBindGroup/dispatch per kernel into one compute pass, with the batch size `n` only
 * deciding the grid. Everything that changes per token lives in the `Step` uniform and in buffers the
 * caller writes before submitting (token ids, RoPE cos/sin).
 */
import type { DType } from '../backend.js';
import { guarded, type GpuContext } from './context.js';
import { Usage, type GpuWeight } from './buffers.js';
import {
  ADD,
  ATTENTION,
  KV_STORE,
  ROPE,
  SAMPLE,
  SILU_GATE,
  SOFTMAX,
  MM_ROWS,
  MM_TOKENS,
  WG,
  embedShader,
  matmulShader,
  matvecFastShader,
  matvecShader,
  vectorWidth,
  MATVEC_ROWS,
  rmsnormShader,
} from './wgsl.js';

export type Grid = [number, number, number];

export interface Dispatch {
  readonly label: string;
  readonly pipeline: GPUComputePipeline;
  readonly bindGroup: GPUBindGroup;
  /** Workgroups for a batch of n tokens. */
  grid(n: number): Grid;
  /** Recorded only when this holds for the batch (picks matvec vs tiled matmul). */
  when?(n: number): boolean;
}

/** Batches up to this size use the per-row matvec kernel; larger ones the tiled matmul. */
export const MATVEC_MAX_BATCH = 2;

/** The per-submission uniform: position of the first token, batch size, sampling seed. */
export class StepUniform {
  readonly buffer: GPUBuffer;
  readonly #data = new Uint32Array(4);
  constructor(ctx: GpuContext) {
    this.buffer = ctx.device.createBuffer({ label: 'step', size: 16, usage: Usage.UNIFORM | Usage.COPY_DST });
  }
  /** Queues the write; it lands before the next submit on this queue. */
  write(ctx: GpuContext, pos0: number, n: number, seed = 0): void {
    this.#data[0] = pos0;
    this.#data[1] = n;
    this.#data[2] = seed >>> 0;
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

type Field = ['u32' | 'f32', number];

/** Compiled pipelines per device: compiling is the slow part (seconds per kernel on lavapipe). */
const PIPELINES = new WeakMap<GPUDevice, Map<string, GPUComputePipeline>>();

export class GpuKernels {
  readonly #pipelines: Map<string, GPUComputePipeline>;
  readonly #owned: GPUBuffer[] = [];
  #dummy: GPUBuffer | null = null;

  constructor(readonly ctx: GpuContext) {
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
        if (vectorWidth(d) > 0) this.pipeline(`matvec_fast_${d}`, () => matvecFastShader(d));
        this.pipeline(`matmul_${d}`, () => matmulShader(d));
        this.pipeline(`embed_${d}`, () => embedShader(d));
      }
      this.pipeline('rmsnorm', () => rmsnormShader(false));
      this.pipeline('rmsnorm_inplace', () => rmsnormShader(true));
      this.pipeline('rope', () => ROPE);
      this.pipeline('kv_store', () => KV_STORE);
      this.pipeline('attention', () => ATTENTION);
      this.pipeline('silu_gate', () => SILU_GATE);
      this.pipeline('add', () => ADD);
      this.pipeline('softmax', () => SOFTMAX);
      this.pipeline('sample', () => SAMPLE);
    });
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
    this.#owned.push(buf);
    return buf;
  }

  /** Bound where a kernel's optional input (bias) is absent. */
  dummy(): GPUBuffer {
    this.#dummy ??= this.ctx.device.createBuffer({ label: 'dummy', size: 16, usage: Usage.STORAGE });
    return this.#dummy;
  }

  bind(label: string, pipeline: GPUComputePipeline, buffers: GPUBuffer[]): GPUBindGroup {
    return this.ctx.device.createBindGroup({
      label,
      layout: pipeline.getBindGroupLayout(0),
      entries: buffers.map((buffer, binding) => ({ binding, resource: { buffer } })),
    });
  }

  /**
   * out[b, rowOffset + r] (+)= Σ_c W[r, c] · x[b, c] (+ bias[r]) for every chunk of `w`, with the
   * per-row matvec kernel for small batches and the tiled matmul for larger ones.
   */
  linear(
    label: string,
    w: GpuWeight,
    x: GPUBuffer,
    out: GPUBuffer,
    step: StepUniform,
    opts: {
      bias?: GPUBuffer;
      accumulate?: boolean;
      outStride?: number;
      xStride?: number;
      rowOffset?: number;
      only?: 'matvec' | 'matmul';
      /** Only the batch's last token (x row n - 1 → out row 0), e.g. the LM head. Uses matvec. */
      lastToken?: boolean;
      /** Use the per-element matvec even where the vectorised one applies (tests compare both). */
      generic?: boolean;
    } = {},
  ): Dispatch[] {
    const flags = (opts.bias ? 1 : 0) | (opts.accumulate ? 2 : 0) | (opts.lastToken ? 4 : 0);
    if (opts.lastToken) opts = { ...opts, only: 'matvec' };
    const out_: Dispatch[] = [];
    // 16-byte loads when every row (and x row) starts on a vector boundary.
    const vw = vectorWidth(w.dtype);
    const fast = vw > 0 && w.cols % vw === 0 && (opts.xStride ?? w.cols) % vw === 0 && !opts.generic;
    const matvec = fast
      ? this.pipeline(`matvec_fast_${w.dtype}`, () => matvecFastShader(w.dtype))
      : this.pipeline(`matvec_${w.dtype}`, () => matvecShader(w.dtype));
    const matmul = this.pipeline(`matmul_${w.dtype}`, () => matmulShader(w.dtype));
    for (const chunk of w.chunks) {
      const params = this.params(`${label}.params`, [
        ['u32', chunk.rows],
        ['u32', w.cols],
        ['u32', (opts.rowOffset ?? 0) + chunk.rowStart],
        ['u32', opts.outStride ?? w.rows],
        ['u32', opts.xStride ?? w.cols],
        ['u32', flags],
      ]);
      // The bias is indexed by rowOffset + r, so it is bound whole.
      const buffers = [params, step.buffer, chunk.buffer, x, out, opts.bias ?? this.dummy()];
      const rows = chunk.rows;
      if (opts.only !== 'matmul') {
        out_.push({
          label: `${label} (matvec)`,
          pipeline: matvec,
          bindGroup: this.bind(label, matvec, buffers),
          grid: () => split(fast ? Math.ceil(rows / MATVEC_ROWS) : rows),
          when: opts.only === 'matvec' ? undefined : (n) => n <= MATVEC_MAX_BATCH,
        });
      }
      if (opts.only !== 'matvec') {
        out_.push({
          label: `${label} (matmul)`,
          pipeline: matmul,
          bindGroup: this.bind(label, matmul, buffers),
          grid: (n) => [Math.ceil(rows / MM_ROWS), Math.ceil(n / MM_TOKENS), 1],
          when: opts.only === 'matmul' ? undefined : (n) => n > MATVEC_MAX_BATCH,
        });
      }
    }
    return out_;
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
  ): Dispatch {
    const pipeline = this.pipeline('attention', () => ATTENTION);
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
    return {
      label: 'attention',
      pipeline,
      bindGroup: this.bind('attention', pipeline, [params, step.buffer, q, kCache, vCache, scratch, out, shape.sinks ?? this.dummy()]),
      grid: (n) => [shape.heads, n, 1],
    };
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

/** Records the dispatches that apply to a batch of `n` tokens into one compute pass. */
export function recordPass(encoder: GPUCommandEncoder, dispatches: readonly Dispatch[], n: number, label = 'forward'): void {
  const pass = encoder.beginComputePass({ label });
  for (const d of dispatches) {
    if (d.when && !d.when(n)) continue;
    const [x, y, z] = d.grid(n);
    if (x === 0 || y === 0 || z === 0) continue;
    pass.setPipeline(d.pipeline);
    pass.setBindGroup(0, d.bindGroup);
    pass.dispatchWorkgroups(x, y, z);
  }
  pass.end();
}

/** Records `dispatches` for `n` tokens into one command buffer and submits it. */
export function submit(ctx: GpuContext, dispatches: readonly Dispatch[], n: number): void {
  ctx.assertAlive();
  const encoder = ctx.device.createCommandEncoder();
  recordPass(encoder, dispatches, n);
  ctx.device.queue.submit([encoder.finish()]);
}
