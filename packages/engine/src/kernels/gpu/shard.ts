/**
 * One shard of a Llama-family decoder on the GPU, with the same contract as model/forward.ts's
 * ModelShard: layers [start, end) and/or a tensor slice, token ids or hidden states in, hidden states
 * or last-token logits out, for one sequence or a step of several (forwardBatch). Weights are uploaded
 * once (storage dtype, row-split when over the binding limit); the KV caches live on the GPU; every
 * dispatch of a call is recorded into one command buffer and submitted once. Only what must leave the
 * GPU is read back: the hidden states a pipeline stage hands on, the logits of this rank's vocabulary
 * rows (or just the sampled token id with `forwardSample`), the partial sums the caller's all-reduce
 * joins after o_proj and down_proj of a tensor-parallel shard (each one ends a submission), and the
 * embedding rows `embed()` reads back.
 */
import type { ModelConfig } from '../../config/config.js';
import { layerMatrices, type ShardWeights } from '../../model/weights.js';
import { gpuInvFreq, gpuRopeScaling } from './model-support.js';
import { allocateMlaActivations, mlaDispatches, uploadMlaLayer, type GpuMlaActivations, type GpuMlaLayer } from './mla.js';
import { kvCacheValuesPerToken } from '../../model/kv-cache-size.js';
import { ropeAttentionFactor } from '../../model/rope.js';
import { MOE_GROUPED_MIN_ROWS, allocateMoeActivations, moeDispatches, uploadMoeLayer, type GpuMoeActivations, type GpuMoeLayer } from './moe.js';
import type { TensorSlice } from '../../model/tensor-split.js';
import type { AllReduce, ShardSpec } from '../../shard.js';
import { checkTokenIds, noEmbeddingError } from '../../model/embedding.js';
import type { ShardInput } from '../../model/forward.js';
import { GpuValidationError, type GpuContext } from './context.js';
import { Readback, createStorage, uploadF32, uploadWeight, type GpuWeight } from './buffers.js';
import { GpuKernels, MATVEC_MAX_BATCH, StepUniform, recordInto, recordPass, type Dispatch } from './ops.js';
import { ropeCosSin, ropeInvFreq } from './rope.js';

export interface GpuShardOptions {
  config: ModelConfig;
  spec: ShardSpec;
  slice: TensorSlice;
  weights: ShardWeights;
  /** Tokens per call. @default 32 */
  maxBatch?: number;
  /** @default min(max_position_embeddings, 4096) */
  maxSeqLen?: number;
  /** Required when spec.tensor.size > 1. */
  allReduce?: AllReduce;
  /**
   * Which kernels a step of several sequences takes. 'sequence': each segment those it takes alone
   * (decode rows the row-block matvec, grouped: weights read once per ROW_BLOCK_TOKENS rows; prompt
   * chunks the tiled matmul; a step mixing both runs two passes), so each segment gets the bits of its
   * own forward; 'step': those the step's total rows take, one pass, so more than MATVEC_MAX_BATCH rows
   * go through the tiled matmul (a decode row's logits then differ from its own decode's by rounding).
   * @default 'sequence'
   */
  batchKernels?: 'sequence' | 'step';
  /**
   * MoE layers: the smallest batch that groups its slots by expert and runs the tiled matmul per expert
   * (moe.ts); Infinity keeps the per-(token, slot) matvec for every batch (tests compare the two).
   * @default MOE_GROUPED_MIN_ROWS (3)
   */
  moeGroupedMinRows?: number;
}

/**
 * Rows that want every row's logits, up to this many (a speculative draft's check: the runner's drafts
 * are at most 8 tokens, so 9 rows), take the row-block kernels like decode rows: each row then gets the
 * bits of its own 1-token decode, so a verified draft gives exactly plain decode's tokens.
 */
export const EXACT_ROWS_MAX = 16;

/** Whether a segment of `n` rows runs as decode rows (see EXACT_ROWS_MAX). */
const decodeLike = (s: GpuBatchSegment, n: number): boolean => s.allLogits === true && n <= EXACT_ROWS_MAX;

/** Per-call overhead figures, for benchmarks and the closing notes of speed work. */
export interface CallStats {
  submissions: number;
  readbackBytes: number;
  /** Compute dispatches recorded (all submissions of the call). */
  dispatches: number;
  /** Host time recording command buffers (setPipeline/setBindGroup/dispatch calls), ms. */
  encodeMs: number;
  /** Host time in finish() + queue.submit(), ms. */
  submitMs: number;
  /** Host time from the last submission until its readback was in hand, ms (GPU work + completion + copy). */
  waitMs: number;
}

const emptyStats = (): CallStats => ({ submissions: 0, readbackBytes: 0, dispatches: 0, encodeMs: 0, submitMs: 0, waitMs: 0 });

/**
 * A sequence's KV cache in GPU memory, with the dispatches that read and write it (per layer: RoPE +
 * KV append and attention, or the whole latent-attention chain) bound to it and to its own Step.
 */
export class GpuKVCache {
  length = 0;
  /** @internal */ layers: Dispatch[][] = [];
  /** @internal pos0, n and the first row of this sequence's tokens in a step. */ step: StepUniform | null = null;
  /** @internal The parameter buffers of `layers`, freed with the cache. */ readonly owned: GPUBuffer[] = [];
  #destroyed = false;
  constructor(
    readonly capacity: number,
    readonly k: GPUBuffer[],
    readonly v: GPUBuffer[],
  ) {}
  get destroyed(): boolean {
    return this.#destroyed;
  }
  destroy(): void {
    for (const b of [...this.k, ...this.v]) b.destroy();
    this.k.length = 0;
    this.v.length = 0;
    this.layers = [];
    for (const b of this.owned) b.destroy();
    this.owned.length = 0;
    this.step?.destroy();
    this.step = null;
    this.#destroyed = true;
  }
}

/** One sequence of a step (ModelShard's BatchSegment, with a GPU cache). */
export interface GpuBatchSegment {
  input: ShardInput;
  cache: GpuKVCache;
  /** Logits of every row of this segment, not only the last (head shards); a draft's check: its rows run as decode rows (EXACT_ROWS_MAX). */
  allLogits?: boolean;
}

/**
 * Dispatches up to a point where the tensor ranks must meet (all-reduce of `reduce`), or the end:
 * dispatches shared by every row of a step, and the layers whose per-sequence dispatches (each
 * cache's `layers[i]`) are recorded in their place.
 */
interface Span {
  parts: (Dispatch[] | { layer: number })[];
  /** Read back `width`·n floats, all-reduce them, write them back. */
  reduce?: { buffer: GPUBuffer; width: number };
}

/** Where a step's sequences sit in the activations. */
interface Placed {
  first: number[];
  count: number[];
  total: number;
  /** Rows of the largest sequence: the batch size the kernels are chosen for (Dispatch.when). */
  kernelRows: number;
  /**
   * Per sequence, the batch size its attention kernel is chosen for: its rows, or 1 for a draft's
   * check, whose rows each get their 1-token decode bits.
   */
  attnRows: number[];
  /** The rows the LM head reads, per sequence (its last, or all with allLogits), in order. */
  wanted: number[];
}

interface LayerBuffers {
  inputNorm: GPUBuffer;
  postNorm: GPUBuffer;
  /** Grouped-query attention (null on latent-attention layers, which have `mla`). */
  q: GpuWeight | null;
  k: GpuWeight | null;
  v: GpuWeight | null;
  o: GpuWeight | null;
  mla: GpuMlaLayer | null;
  /** Dense MLP (null on mixture-of-experts layers, which have `moe`). */
  gate: GpuWeight | null;
  up: GpuWeight | null;
  down: GpuWeight | null;
  moe: GpuMoeLayer | null;
  qBias: GPUBuffer | null;
  kBias: GPUBuffer | null;
  vBias: GPUBuffer | null;
  oBias: GPUBuffer | null;
  qNorm: GPUBuffer | null;
  kNorm: GPUBuffer | null;
  /** gpt-oss's per-head sink logits, or null. */
  sinks: GPUBuffer | null;
}

export class GpuShard {
  readonly maxBatch: number;
  readonly maxSeqLen: number;
  readonly batchKernels: 'sequence' | 'step';
  readonly moeGroupedMinRows: number;
  /** Bytes of weights held on the GPU. */
  weightBytes = 0;
  /** What the last call cost (measurement): see CallStats. */
  lastCall: CallStats = emptyStats();

  readonly #ctx: GpuContext;
  readonly #config: ModelConfig;
  readonly #spec: ShardSpec;
  readonly #slice: TensorSlice;
  readonly #allReduce: AllReduce | null;
  readonly #kernels: GpuKernels;
  readonly #step: StepUniform;
  readonly #invFreq: Float64Array;
  /** Yarn's attention factor on cos/sin (1 otherwise). */
  readonly #ropeScale: number;
  readonly #nh: number;
  readonly #nkv: number;
  readonly #ffn: number;
  readonly #vocabSlice: number;
  #layers: LayerBuffers[] = [];
  #embed: GpuWeight | null = null;
  #head: GpuWeight | null = null;
  #finalNorm: GPUBuffer | null = null;
  #owned: GPUBuffer[] = [];
  #act!: Record<'x' | 'xb' | 'xb2' | 'xg' | 'rows' | 'q' | 'k' | 'v' | 'att' | 'hb' | 'hb2' | 'cs' | 'tokens' | 'scores' | 'logits' | 'result', GPUBuffer>;
  /** The layers' dispatches over a step's rows, built once. */
  #program: Span[] = [];
  /** The LM head over the step's rows (`all`, when it wants every row) or over the gathered ones. */
  #headDispatches: { all: Dispatch[]; gathered: Dispatch[] } | null = null;
  /** Step uniform of the head (n: the rows it reads). */
  #headStep: StepUniform;
  #readback!: Readback;
  #moeAct: GpuMoeActivations | null = null;
  #mlaAct: GpuMlaActivations | null = null;
  #sampleDispatch: Map<number, Dispatch> = new Map();
  /** Token ids → rows of x, recorded ahead of the program when a call gets token ids. */
  #embedDispatches: Dispatch[] = [];
  #cs: Float32Array;
  #busy = false;

  private constructor(ctx: GpuContext, o: GpuShardOptions) {
    this.#ctx = ctx;
    this.#config = o.config;
    this.#spec = o.spec;
    this.#slice = o.slice;
    this.maxBatch = o.maxBatch ?? 32;
    this.maxSeqLen = o.maxSeqLen ?? Math.min(o.config.maxPositionEmbeddings, 4096);
    this.batchKernels = o.batchKernels ?? 'sequence';
    this.moeGroupedMinRows = o.moeGroupedMinRows ?? MOE_GROUPED_MIN_ROWS;
    if (!(this.moeGroupedMinRows >= 1) || (Number.isFinite(this.moeGroupedMinRows) && !Number.isInteger(this.moeGroupedMinRows))) {
      throw new GpuValidationError(`moeGroupedMinRows must be a whole number of rows >= 1 or Infinity, got ${o.moeGroupedMinRows}`);
    }
    if (o.spec.tensor.size > 1 && !o.allReduce) throw new GpuValidationError('a tensor-parallel GPU shard needs an allReduce callback');
    this.#allReduce = o.spec.tensor.size > 1 ? o.allReduce! : null;
    this.#kernels = new GpuKernels(ctx);
    this.#step = new StepUniform(ctx);
    this.#headStep = new StepUniform(ctx);
    this.#invFreq = gpuInvFreq(o.config) ?? ropeInvFreq(o.config.headDim, o.config.ropeTheta, gpuRopeScaling(o.config));
    this.#ropeScale = ropeAttentionFactor(o.config);
    this.#nh = o.slice.heads[1] - o.slice.heads[0];
    this.#nkv = o.slice.kvHeads[1] - o.slice.kvHeads[0];
    this.#ffn = o.slice.ffn[1] - o.slice.ffn[0];
    this.#vocabSlice = o.slice.vocab[1] - o.slice.vocab[0];
    this.#cs = new Float32Array(this.maxBatch * o.config.headDim);
  }

  /** Uploads the shard's weights (loaded by model/weights.ts) and allocates its activations. */
  static async create(ctx: GpuContext, options: GpuShardOptions): Promise<GpuShard> {
    const s = new GpuShard(ctx, options);
    try {
      await s.#upload(options.weights);
      await s.#allocate();
      const dtypes = new Set(options.weights.layers.flatMap((l) => layerMatrices(l).map((m) => m.dtype)));
      if (options.weights.embed) dtypes.add(options.weights.embed.dtype);
      if (options.weights.head) dtypes.add(options.weights.head.dtype);
      await s.#kernels.warm([...dtypes]);
    } catch (err) {
      s.dispose();
      throw err;
    }
    return s;
  }

  async #upload(w: ShardWeights): Promise<void> {
    const ctx = this.#ctx;
    const vec = async (a: Float32Array | null, name: string) => {
      if (!a) return null;
      const b = await uploadF32(ctx, a, name);
      this.#owned.push(b);
      return b;
    };
    const mat = async (m: Parameters<typeof uploadWeight>[1], name: string) => {
      const g = await uploadWeight(ctx, m, name);
      this.weightBytes += g.bytes;
      return g;
    };
    for (let i = 0; i < w.layers.length; i++) {
      const layer = w.layers[i];
      const A = layer.attention;
      const L = A.kind === 'gqa' ? A : null;
      const mlp = layer.mlp;
      const p = `model.layers.${this.#spec.layers[0] + i}`;
      this.#layers.push({
        inputNorm: (await vec(layer.inputNorm, `${p}.input_layernorm.weight`))!,
        postNorm: (await vec(layer.postNorm, `${p}.post_attention_layernorm.weight`))!,
        q: L && (await mat(L.q, `${p}.self_attn.q_proj.weight`)),
        k: L && (await mat(L.k, `${p}.self_attn.k_proj.weight`)),
        v: L && (await mat(L.v, `${p}.self_attn.v_proj.weight`)),
        o: L && (await mat(L.o, `${p}.self_attn.o_proj.weight`)),
        mla: A.kind === 'mla' ? await uploadMlaLayer(ctx, A, `${p}.self_attn`) : null,
        gate: mlp.kind === 'dense' ? await mat(mlp.gate, `${p}.mlp.gate_proj.weight`) : null,
        up: mlp.kind === 'dense' ? await mat(mlp.up, `${p}.mlp.up_proj.weight`) : null,
        down: mlp.kind === 'dense' ? await mat(mlp.down, `${p}.mlp.down_proj.weight`) : null,
        moe: mlp.kind === 'moe' ? await uploadMoeLayer(ctx, mlp, `${p}.mlp`) : null,
        qBias: await vec(L?.qBias ?? null, `${p}.self_attn.q_proj.bias`),
        kBias: await vec(L?.kBias ?? null, `${p}.self_attn.k_proj.bias`),
        vBias: await vec(L?.vBias ?? null, `${p}.self_attn.v_proj.bias`),
        oBias: await vec(L?.oBias ?? null, `${p}.self_attn.o_proj.bias`),
        qNorm: await vec(L?.qNorm ?? null, `${p}.self_attn.q_norm.weight`),
        kNorm: await vec(L?.kNorm ?? null, `${p}.self_attn.k_norm.weight`),
        sinks: await vec(L?.sinks ?? null, `${p}.self_attn.sinks`),
      });
    }
    if (w.embed) this.#embed = await mat(w.embed, 'model.embed_tokens.weight');
    // A tied head shares the table's buffer when it is the whole table; a tensor rank 0's tied head (the
    // table's leading rows) is uploaded on its own, as GPU weights have no row views.
    if (w.head) this.#head = w.head === w.embed && this.#embed ? this.#embed : await mat(w.head, 'lm_head.weight');
    this.#finalNorm = await vec(w.finalNorm, 'model.norm.weight');
  }

  async #allocate(): Promise<void> {
    const c = this.#config;
    const B = this.maxBatch;
    const D = c.hiddenSize;
    const hd = c.headDim;
    const f = async (name: string, floats: number, usage = 0) => {
      const b = await createStorage(this.#ctx, floats * 4, `activation ${name}`, usage);
      this.#owned.push(b);
      return b;
    };
    this.#act = {
      x: await f('x', B * D),
      xb: await f('xb', B * D),
      xb2: await f('xb2', B * D),
      xg: await f('head rows', B * D),
      rows: await f('head row indices', B),
      q: await f('q', B * this.#nh * hd),
      k: await f('k', B * this.#nkv * hd),
      v: await f('v', B * this.#nkv * hd),
      att: await f('att', B * this.#nh * hd),
      hb: await f('hb', B * this.#ffn),
      hb2: await f('hb2', B * this.#ffn),
      cs: await f('rope cos/sin', B * hd),
      tokens: await f('tokens', B),
      scores: await f('attention scores', B * this.#nh * this.maxSeqLen),
      logits: await f('logits', B * Math.max(1, this.#vocabSlice)),
      result: await f('sample result', 2),
    };
    if (c.mla) this.#mlaAct = await allocateMlaActivations(this.#ctx, c.mla, this.#nh, B);
    if (this.#layers.some((L) => L.moe)) {
      const shared = this.#slice.sharedFfn[1] - this.#slice.sharedFfn[0];
      this.#moeAct = await allocateMoeActivations(this.#ctx, c.moe!, D, shared, B);
    }
    const readbackFloats = Math.max(B * D, this.#spec.head ? B * this.#vocabSlice : 0, 2);
    this.#readback = new Readback(this.#ctx, readbackFloats * 4);
    if (this.#embed) this.#embedDispatches = this.#kernels.embed(this.#embed, this.#act.tokens, this.#act.x, this.#step);
    this.#program = this.#buildProgram();
    if (this.#head) {
      const a = this.#act;
      const gather = this.#kernels.gatherRows(a.rows, a.x, a.xg, this.#config.hiddenSize, this.#headStep);
      this.#headDispatches = { all: this.#headOn(a.x), gathered: [gather, ...this.#headOn(a.xg)] };
    }
  }

  /** Floats of one token's K row and V row in a layer's cache (latent attention: [latent, rope key] rows in K, no V). */
  #kvWidths(): { k: number; v: number } {
    const perToken = kvCacheValuesPerToken(this.#config, this.#slice);
    return this.#config.mla ? { k: perToken, v: 0 } : { k: perToken / 2, v: perToken / 2 };
  }

  /** Bytes of `tokens` tokens' K and V rows over this shard's layers: a prefix-cache block's size. */
  kvBlockBytes(tokens: number): number {
    const { k, v } = this.#kvWidths();
    return this.#layers.length * tokens * (k + v) * 4;
  }

  /**
   * Token rows [from, from + tokens) of every layer's K and V of `cache` copied into a new device buffer
   * (per layer its K rows, then its V rows): the prefix cache's block. The copy is submitted after the
   * work submitted before it, and the rows never leave the device.
   */
  async copyKvOut(cache: GpuKVCache, from: number, tokens: number): Promise<GPUBuffer> {
    if (from + tokens > cache.capacity) throw new RangeError(`K/V rows ${from}..${from + tokens} are past the cache's ${cache.capacity}`);
    const block = await createStorage(this.#ctx, this.kvBlockBytes(tokens), `prefix-cache block, layers ${this.#spec.layers[0]}..${this.#spec.layers[1]}`);
    this.#copyKv(cache, from, tokens, block, 'out');
    return block;
  }

  /** Writes a block from copyKvOut into token rows [at, at + tokens) of `cache`; its length becomes at least at + tokens. */
  copyKvIn(block: GPUBuffer, cache: GpuKVCache, at: number, tokens: number): void {
    if (at + tokens > cache.capacity) throw new RangeError(`K/V rows ${at}..${at + tokens} are past the cache's ${cache.capacity}`);
    if (block.size < this.kvBlockBytes(tokens)) throw new RangeError(`a prefix-cache block of ${block.size} bytes is smaller than ${tokens} tokens of this shard's K/V`);
    this.#copyKv(cache, at, tokens, block, 'in');
    cache.length = Math.max(cache.length, at + tokens);
  }

  #copyKv(cache: GpuKVCache, row: number, tokens: number, block: GPUBuffer, way: 'in' | 'out'): void {
    if (cache.destroyed) throw new Error('the KV cache was released');
    const { k, v } = this.#kvWidths();
    const enc = this.#ctx.device.createCommandEncoder({ label: `prefix-cache copy ${way}` });
    let at = 0;
    for (let l = 0; l < this.#layers.length; l++) {
      for (const [buf, width] of [[cache.k[l], k], [cache.v[l], v]] as const) {
        const bytes = tokens * width * 4;
        if (bytes === 0) continue;
        if (way === 'out') enc.copyBufferToBuffer(buf, row * width * 4, block, at, bytes);
        else enc.copyBufferToBuffer(block, at, buf, row * width * 4, bytes);
        at += bytes;
      }
    }
    this.#ctx.device.queue.submit([enc.finish()]);
  }

  /** A fresh KV cache on the GPU for one sequence of up to `capacity` tokens. */
  async newCache(capacity = this.maxSeqLen): Promise<GpuKVCache> {
    if (capacity > this.maxSeqLen) throw new RangeError(`KV cache capacity ${capacity} exceeds maxSeqLen ${this.maxSeqLen}`);
    // Latent attention caches [latent, rope key] rows in k (the same formula as the CPU, kv-cache-size.ts); v is unused.
    const mla = !!this.#config.mla;
    const width = this.#kvWidths().k;
    const k: GPUBuffer[] = [];
    const v: GPUBuffer[] = [];
    const cache = new GpuKVCache(capacity, k, v);
    try {
      for (let l = 0; l < this.#layers.length; l++) {
        k.push(await createStorage(this.#ctx, capacity * width * 4, `KV cache k, layer ${this.#spec.layers[0] + l}`));
        v.push(await createStorage(this.#ctx, mla ? 4 : capacity * width * 4, `KV cache v, layer ${this.#spec.layers[0] + l}`));
      }
    } catch (err) {
      cache.destroy();
      throw err;
    }
    cache.step = new StepUniform(this.#ctx);
    const step = cache.step;
    cache.layers = this.#kernels.ownedBy(cache.owned, () => this.#cacheLayers(cache, step));
    return cache;
  }

  /**
   * The dispatches of each layer that read or write one sequence's cache, bound to it and to its own
   * Step (positions, and where its rows start in a step): RoPE + KV append and attention, or the
   * whole latent-attention chain (whose kernels take rows from 0: a step of one sequence only).
   */
  #cacheLayers(cache: GpuKVCache, st: StepUniform): Dispatch[][] {
    const K = this.#kernels;
    const a = this.#act;
    const c = this.#config;
    const hd = c.headDim;
    const nh = this.#nh;
    const nkv = this.#nkv;
    return this.#layers.map((L, li) => {
      if (L.mla) {
        // Latent attention (mla.ts): att from the compressed cache.
        return [
          K.rmsnorm(a.x, L.inputNorm, a.xb, c.hiddenSize, 1, c.rmsNormEps, st),
          ...mlaDispatches(K, L.mla, c.mla!, this.#mlaAct!, { x: a.xb, q: a.q, att: a.att, scores: a.scores, cs: a.cs, cache: cache.k[li], maxSeq: cache.capacity }, nh, st),
        ];
      }
      return [
        K.ropeStore(a.q, a.k, a.v, cache.k[li], cache.v[li], a.cs, { heads: nh, kvHeads: nkv, headDim: hd }, st),
        ...K.attention(a.q, cache.k[li], cache.v[li], a.scores, a.att, {
          heads: nh,
          kvHeads: nkv,
          headDim: hd,
          maxSeq: cache.capacity,
          // gpt-oss alternates sliding-window and full layers.
          window: c.slidingLayers && !c.slidingLayers[this.#spec.layers[0] + li] ? null : c.slidingWindow,
          group: c.numHeads / c.numKvHeads,
          headOffset: this.#slice.heads[0],
          kvOffset: this.#slice.kvHeads[0],
          sinks: L.sinks,
        }, st),
      ];
    });
  }

  /**
   * The layers over a step's rows, bound once: projections, norms and MLP read every row at once;
   * each layer's per-sequence part (#cacheLayers) is recorded in its place for each sequence.
   */
  #buildProgram(): Span[] {
    const K = this.#kernels;
    const st = this.#step;
    const a = this.#act;
    const c = this.#config;
    const D = c.hiddenSize;
    const hd = c.headDim;
    const nh = this.#nh;
    const nkv = this.#nkv;
    const tp = this.#allReduce !== null;
    const spans: Span[] = [];
    let parts: Span['parts'] = [];
    let cur: Dispatch[] = [];
    const perCache = (layer: number) => {
      parts.push(cur, { layer });
      cur = [];
    };
    const cut = (reduce: Span['reduce']) => {
      parts.push(cur);
      spans.push({ parts, reduce });
      parts = [];
      cur = [];
    };

    this.#layers.forEach((L, li) => {
      // Decode folds each RMSNorm into the row-block kernels that read it (K.withNorm).
      const inputNorm = { weight: L.inputNorm, eps: c.rmsNormEps, dim: D };
      if (!L.mla) {
        cur.push(
          ...K.withNorm(a.x, a.xb, inputNorm, st, [L.q!, L.k!, L.v!], (x, norm) => [
            ...K.linear('q_proj', L.q!, x, a.q, st, { bias: L.qBias ?? undefined, norm }),
            ...K.linear('k_proj', L.k!, x, a.k, st, { bias: L.kBias ?? undefined, norm }),
            ...K.linear('v_proj', L.v!, x, a.v, st, { bias: L.vBias ?? undefined, norm }),
          ]),
        );
        if (L.qNorm) cur.push(K.rmsnorm(a.q, L.qNorm, null, hd, nh, c.rmsNormEps, st));
        if (L.kNorm) cur.push(K.rmsnorm(a.k, L.kNorm, null, hd, nkv, c.rmsNormEps, st));
      }
      perCache(li);
      const o = L.mla ? L.mla.o : L.o!;
      if (tp) {
        cur.push(...K.linear('o_proj', o, a.att, a.xb2, st));
        cut({ buffer: a.xb2, width: D });
        cur.push(K.add(a.x, a.xb2, L.oBias, D, st));
      } else {
        cur.push(...K.linear('o_proj', o, a.att, a.x, st, { accumulate: true, bias: L.oBias ?? undefined }));
      }
      const postNorm = { weight: L.postNorm, eps: c.rmsNormEps, dim: D };
      if (L.moe) {
        cur.push(K.rmsnorm(a.x, L.postNorm, a.xb, D, 1, c.rmsNormEps, st));
        // Mixture of experts (moe.ts): unsplit it adds into the residual; a tensor rank's share is all-reduced.
        cur.push(...moeDispatches(K, L.moe, c.moe!, this.#moeAct!, a.xb, tp ? a.xb2 : a.x, D, !tp, st, this.moeGroupedMinRows));
        if (tp) {
          cut({ buffer: a.xb2, width: D });
          cur.push(K.add(a.x, a.xb2, null, D, st));
        }
        return;
      }
      cur.push(...K.withNorm(a.x, a.xb, postNorm, st, [L.gate!, L.up!], (x, norm) => K.glu('mlp', L.gate!, L.up!, x, a.hb, a.hb2, st, norm)));
      if (tp) {
        cur.push(...K.linear('down_proj', L.down!, a.hb, a.xb2, st));
        cut({ buffer: a.xb2, width: D });
        cur.push(K.add(a.x, a.xb2, null, D, st));
      } else {
        cur.push(...K.linear('down_proj', L.down!, a.hb, a.x, st, { accumulate: true }));
      }
    });
    cut(undefined);
    return spans;
  }

  /**
   * The LM head over rows of `x` ([n, hidden] → logits [n, vocabSlice], n in the head's Step). Always
   * the row-block matvec, one workgroup row per token: a row's logits do not depend on which other
   * rows share the step (the tiled matmul would be chosen for large n otherwise).
   */
  #headOn(x: GPUBuffer): Dispatch[] {
    const head = this.#head!;
    const st = this.#headStep;
    const c = this.#config;
    const finalNorm = { weight: this.#finalNorm!, eps: c.rmsNormEps, dim: c.hiddenSize };
    return [
      ...this.#kernels.withNorm(x, this.#act.xb, finalNorm, st, [head], (input, norm) =>
        this.#kernels.linear('lm_head', head, input, this.#act.logits, st, { only: 'matvec', norm }),
      ),
    ];
  }

  /**
   * @internal Every dispatch a one-sequence call on `cache` may record, in order (the body, then the
   * head over gathered rows), for the prefill profile (bench/gpu-prefill-profile.ts).
   */
  dispatchesOf(cache: GpuKVCache): Dispatch[] {
    const body = this.#program.flatMap((span) => span.parts.flatMap((part) => (Array.isArray(part) ? part : cache.layers[part.layer])));
    return [...body, ...(this.#headDispatches?.gathered ?? [])];
  }

  /** Checks a step's sequences and places their rows side by side (as ModelShard.forwardBatch does). */
  #place(segments: readonly GpuBatchSegment[]): Placed {
    this.#ctx.assertAlive();
    if (segments.length === 0) throw new RangeError('forward: no sequences in the step');
    if (new Set(segments.map((s) => s.cache)).size !== segments.length) throw new RangeError('forward: a KV cache appears twice in one step');
    const tokens = segments.filter((s) => 'tokens' in s.input).length;
    if (tokens !== 0 && tokens !== segments.length) throw new RangeError('forward: a GPU step takes token ids for every sequence or hidden states for every sequence, not both');
    const first: number[] = [];
    const count: number[] = [];
    const wanted: number[] = [];
    let total = 0;
    for (const { input, cache, allLogits } of segments) {
      if (cache.destroyed) throw new Error('forward: this KV cache was destroyed');
      let n: number;
      if ('tokens' in input) n = input.tokens.length;
      else {
        n = input.n;
        const need = n * this.#config.hiddenSize;
        if (input.hidden.length < need) throw new RangeError(`forward: hidden states hold ${input.hidden.length} values, ${n} tokens × ${this.#config.hiddenSize} need ${need}`);
      }
      if (n < 1) throw new RangeError(`forward: ${n} tokens for a sequence; each takes at least 1`);
      if (cache.length + n > cache.capacity) throw new RangeError(`sequence of ${cache.length + n} tokens exceeds the KV cache capacity ${cache.capacity}`);
      // Without the head, allLogits only marks a draft's check (its rows run as decode rows), as on the CPU.
      for (let b = allLogits && this.#head ? 0 : n - 1; b < n; b++) wanted.push(total + b);
      first.push(total);
      count.push(n);
      total += n;
    }
    if (total > this.maxBatch) throw new RangeError(`forward: ${total} tokens per call; this shard takes 1..${this.maxBatch}`);
    const attnRows = segments.map((s, i) => (decodeLike(s, count[i]) ? 1 : count[i]));
    const kernelRows = this.batchKernels === 'step' ? total : Math.max(...attnRows);
    return { first, count, total, kernelRows, attnRows, wanted };
  }

  /**
   * Writes a step's inputs ahead of its submission: the tokens (or hidden rows) side by side, the
   * shard's Step (all rows), each sequence's Step (its positions and first row), the RoPE table at
   * each sequence's positions, and the rows the head reads.
   */
  #writeInputs(segments: readonly GpuBatchSegment[], p: Placed, seed: number): void {
    const q = this.#ctx.device.queue;
    const D = this.#config.hiddenSize;
    if ('tokens' in segments[0].input) {
      this.#writeTokens(segments.flatMap((s) => Array.from((s.input as { tokens: ArrayLike<number> }).tokens)));
    } else {
      segments.forEach((s, i) => {
        const input = s.input as { hidden: Float32Array; n: number };
        q.writeBuffer(this.#act.x, p.first[i] * D * 4, input.hidden, 0, p.count[i] * D);
      });
    }
    this.#step.write(this.#ctx, segments[0].cache.length, p.total, seed);
    const width = 2 * this.#invFreq.length;
    segments.forEach(({ cache }, i) => {
      cache.step!.write(this.#ctx, cache.length, p.count[i], seed, p.first[i]);
      ropeCosSin(cache.length, p.count[i], this.#invFreq, this.#cs.subarray(p.first[i] * width));
    });
    if (this.#ropeScale !== 1) for (let i = 0; i < p.total * width; i++) this.#cs[i] *= this.#ropeScale;
    q.writeBuffer(this.#act.cs, 0, this.#cs, 0, p.total * width);
    if (this.#head) {
      this.#headStep.write(this.#ctx, 0, p.wanted.length, seed);
      if (p.wanted.length !== p.total) q.writeBuffer(this.#act.rows, 0, Uint32Array.from(p.wanted));
    }
  }

  /** Checks token ids and writes them for the embed dispatches (which need the table). */
  #writeTokens(tokens: ArrayLike<number>): void {
    if (!this.#embed) throw noEmbeddingError(this.#spec);
    checkTokenIds(tokens, this.#config.vocabSize);
    this.#ctx.device.queue.writeBuffer(this.#act.tokens, 0, Uint32Array.from(tokens));
  }

  /**
   * Runs the program over a step's rows, after the embed dispatches when the step got token ids, then
   * the head over the wanted rows (gathered first unless it wants every row). Each all-reduce point
   * ends a submission: the partial sums of all rows are read back, joined by the caller, written
   * back, and the next span is submitted.
   */
  async #run(segments: readonly GpuBatchSegment[], p: Placed, tail: (enc: GPUCommandEncoder) => number): Promise<void> {
    const dev = this.#ctx.device;
    const stats = (this.lastCall = emptyStats());
    const embed = 'tokens' in segments[0].input;
    const n = p.total;
    for (let i = 0; i < this.#program.length; i++) {
      const span = this.#program[i];
      const t0 = performance.now();
      const enc = dev.createCommandEncoder();
      if (i === 0 && embed) stats.dispatches += recordPass(enc, this.#embedDispatches, n, 'embed');
      const pass = enc.beginComputePass({ label: 'forward' });
      for (const part of span.parts) {
        if (Array.isArray(part)) stats.dispatches += recordInto(pass, part, n, p.kernelRows);
        else for (let s = 0; s < segments.length; s++) stats.dispatches += recordInto(pass, segments[s].cache.layers[part.layer], p.count[s], p.attnRows[s]);
      }
      if (!span.reduce && this.#headDispatches) {
        const m = p.wanted.length;
        stats.dispatches += recordInto(pass, m === n ? this.#headDispatches.all : this.#headDispatches.gathered, m, p.kernelRows);
      }
      pass.end();
      if (span.reduce) {
        const count = span.reduce.width * n;
        this.#readback.encodeCopy(enc, span.reduce.buffer, count * 4);
        this.#submit(enc, t0);
        const part = new Float32Array(await this.#read(count * 4));
        await this.#allReduce!(part);
        dev.queue.writeBuffer(span.reduce.buffer, 0, part);
      } else {
        stats.dispatches += tail(enc);
        this.#submit(enc, t0);
      }
    }
  }

  #submit(enc: GPUCommandEncoder, recordingSince: number): void {
    const t = performance.now();
    this.#ctx.device.queue.submit([enc.finish()]);
    this.lastCall.submissions++;
    this.lastCall.encodeMs += t - recordingSince;
    this.lastCall.submitMs += performance.now() - t;
  }

  /** Waits for the last submission's copy into the staging buffer and takes `bytes` of it. */
  async #read(bytes: number): Promise<ArrayBuffer> {
    const t0 = performance.now();
    const out = await this.#readback.read(bytes);
    this.lastCall.waitMs += performance.now() - t0;
    this.lastCall.readbackBytes += bytes;
    return out;
  }

  /**
   * Same contract as ModelShard.forward: `n` tokens (or hidden states) at positions cache.length ...;
   * returns the last token's logits over this rank's vocabulary rows on head shards, hidden states
   * [n, hidden] otherwise.
   */
  async forward(input: ShardInput, cache: GpuKVCache): Promise<Float32Array> {
    return this.#exclusive(async () => (await this.#forward([{ input, cache }]))[0]);
  }

  /**
   * ModelShard.forwardBatch's contract: one step over several sequences, each segment's rows
   * (`maxBatch` in all) continuing its own cache. Projections, norms and the MLP run once over every
   * row (weights read once per step); RoPE + KV append and attention run per segment against its
   * cache; a tensor rank all-reduces the whole step at each point. Returns per segment its last
   * row's logits (every row's with `allLogits`: [n, vocabSlice]) on a head shard, else its hidden
   * rows [n, hidden]. With batchKernels 'sequence' every segment takes the kernels it takes alone:
   * a step mixing decode rows (≤ MATVEC_MAX_BATCH per segment: row-block kernels) with prompt chunks
   * (tiled matmul) runs as two passes, one per kind, so each segment gets the bits its own forward
   * gives (see the GPU README). Latent-attention models run the segments one after another (their
   * kernels take one sequence's rows). `lastCall` sums the passes.
   */
  async forwardBatch(segments: readonly GpuBatchSegment[]): Promise<Float32Array[]> {
    return this.#exclusive(async () => {
      const passes = this.#passes(segments);
      if (passes.length === 1) return this.#forward(segments);
      this.#place(segments); // the whole step is checked before any pass runs
      const outs: Float32Array[] = new Array(segments.length);
      const total = emptyStats();
      for (const pass of passes) {
        const got = await this.#forward(pass.map((i) => segments[i]));
        pass.forEach((i, j) => (outs[i] = got[j]));
        for (const key of Object.keys(total) as (keyof CallStats)[]) total[key] += this.lastCall[key];
      }
      this.lastCall = total;
      return outs;
    });
  }

  /** The step's segments (indices) grouped into the forwards that run them (see forwardBatch). */
  #passes(segments: readonly GpuBatchSegment[]): number[][] {
    const all = segments.map((_, i) => i);
    if (segments.length === 1) return [all];
    if (this.#config.mla) return all.map((i) => [i]);
    if (this.batchKernels === 'step') return [all];
    const rows = (s: GpuBatchSegment) => ('tokens' in s.input ? s.input.tokens.length : s.input.n);
    const small = all.filter((i) => rows(segments[i]) <= MATVEC_MAX_BATCH || decodeLike(segments[i], rows(segments[i])));
    const large = all.filter((i) => !small.includes(i));
    return small.length && large.length ? [small, large] : [all];
  }

  async #forward(segments: readonly GpuBatchSegment[]): Promise<Float32Array[]> {
    const p = this.#place(segments);
    this.#writeInputs(segments, p, 0);
    const D = this.#config.hiddenSize;
    const V = this.#vocabSlice;
    const floats = this.#head ? p.wanted.length * V : p.total * D;
    const src = this.#head ? this.#act.logits : this.#act.x;
    await this.#run(segments, p, (enc) => {
      this.#readback.encodeCopy(enc, src, floats * 4);
      return 0;
    });
    const out = new Float32Array(await this.#read(floats * 4));
    segments.forEach(({ cache }, i) => (cache.length += p.count[i]));
    if (!this.#head) return segments.map((_, i) => out.subarray(p.first[i] * D, (p.first[i] + p.count[i]) * D));
    let at = 0;
    return segments.map(({ allLogits }, i) => {
      const rows = allLogits ? p.count[i] : 1;
      at += rows;
      return out.subarray((at - rows) * V, at * V);
    });
  }

  /**
   * The tokens' embedding rows [n, hidden], embedded on the GPU and read back, for the first stage's
   * other tensor ranks (ModelShard.embed's contract). Read back rather than widened from a host copy
   * of the table: the table is often the largest tensor (vocab × hidden) and would sit in memory
   * twice, while the rows are n·hidden floats in one submission, next to the 2 per layer that a
   * tensor-parallel step already reads back. Leaves x to be overwritten by the next forward.
   */
  async embed(tokens: ArrayLike<number>): Promise<Float32Array> {
    return this.#exclusive(() => this.#embedRows(tokens));
  }

  async #embedRows(tokens: ArrayLike<number>): Promise<Float32Array> {
    this.#ctx.assertAlive();
    const n = tokens.length;
    if (n < 1 || n > this.maxBatch) throw new RangeError(`embed: ${n} tokens per call; this shard takes 1..${this.maxBatch}`);
    this.#writeTokens(tokens);
    this.#step.write(this.#ctx, 0, n);
    const bytes = n * this.#config.hiddenSize * 4;
    this.lastCall = emptyStats();
    const t0 = performance.now();
    const enc = this.#ctx.device.createCommandEncoder();
    this.lastCall.dispatches = recordPass(enc, this.#embedDispatches, n, 'embed');
    this.#readback.encodeCopy(enc, this.#act.x, bytes);
    this.#submit(enc, t0);
    return new Float32Array(await this.#read(bytes));
  }

  /**
   * Runs the tokens and picks the next one on the GPU (temperature 0: argmax; else an exact sample from
   * softmax(logits / T) keyed by `seed`), reading back 8 bytes instead of the logits. Head shards
   * without a tensor split only (a vocab-split head needs the ranks' logits joined first).
   */
  async forwardSample(tokens: ArrayLike<number>, cache: GpuKVCache, sampling: { temperature?: number; seed?: number } = {}): Promise<number> {
    return this.#exclusive(() => this.#forwardSample(tokens, cache, sampling));
  }

  async #forwardSample(tokens: ArrayLike<number>, cache: GpuKVCache, sampling: { temperature?: number; seed?: number }): Promise<number> {
    if (!this.#head || this.#allReduce) throw new Error('forwardSample: needs a head shard without a tensor split; use forward()');
    const segments = [{ input: { tokens }, cache }];
    const p = this.#place(segments);
    this.#writeInputs(segments, p, sampling.seed ?? 0);
    const T = sampling.temperature ?? 0;
    let d = this.#sampleDispatch.get(T);
    if (!d) {
      d = this.#kernels.sample(this.#act.logits, this.#act.result, this.#vocabSlice, T, this.#step, false);
      this.#sampleDispatch.set(T, d);
    }
    const sample = d;
    await this.#run(segments, p, (enc) => {
      const count = recordPass(enc, [sample], p.total, 'sample');
      this.#readback.encodeCopy(enc, this.#act.result, 8);
      return count;
    });
    const r = new Uint32Array(await this.#read(8));
    cache.length += p.total;
    return r[0];
  }

  /** Activations and the staging buffer are shared by all calls: one call at a time per shard. */
  async #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#busy) throw new Error('GpuShard: a forward call is already running on this shard; await it first');
    this.#busy = true;
    try {
      return await fn();
    } finally {
      this.#busy = false;
    }
  }

  dispose(): void {
    for (const L of this.#layers) {
      for (const w of [L.q, L.k, L.v, L.o, L.gate, L.up, L.down]) w?.destroy();
      L.moe?.uploads.destroy();
      L.mla?.uploads.destroy();
    }
    if (this.#moeAct) for (const b of Object.values(this.#moeAct)) b.destroy();
    if (this.#mlaAct) for (const b of Object.values(this.#mlaAct)) b.destroy();
    this.#layers = [];
    this.#embed?.destroy();
    if (this.#head !== this.#embed) this.#head?.destroy();
    for (const b of this.#owned) b.destroy();
    this.#owned = [];
    this.#readback?.destroy();
    this.#kernels.destroy();
    this.#step.destroy();
    this.#headStep.destroy();
  }
}
