/**
 * One shard of a decoder (Llama family, Qwen, Mistral, and the mixture-of-experts / latent-attention
 * ones), llama2.c style: weights, a run state allocated once, and a `forward` that reads like the maths.
 * Each layer is attention (grouped-query here, or latent: attention-mla.ts) and an MLP (dense SwiGLU,
 * or mixture of experts: moe.ts). A shard is a layer range [start, end) and/or one tensor rank;
 * tensor rank 0 of the first pipeline stage embeds tokens (its stage-0 peers are given its rows as
 * hidden states), the last stage computes logits, the others take and return hidden states. Tensor
 * ranks meet at the caller's all-reduce after o_proj and after down_proj only: a head rank returns the
 * logits of its own vocabulary rows, and whoever samples joins the slices (joinLogitSlices).
 */
import type { ModelConfig } from '../config/config.js';
import { loadModelConfig, openWeights } from '../format/model-files.js';
import { UnsupportedModelError } from '../errors.js';
import { type AttentionArgs, type Backend, matmuls } from '../kernels/backend.js';
import { createReferenceBackend } from '../kernels/reference.js';
import type { AllReduce, ShardSpec } from '../shard.js';
import { checkTokenIds, embedRows, noEmbeddingError } from './embedding.js';
import { MlaAttention } from './attention-mla.js';
import { addInto, attention, rmsnorm, rmsnormRows } from './math.js';
import { swigluMlp } from './mlp.js';
import { MoeBlock } from './moe.js';
import { applyRope, ropeAttentionFactor, ropeInverseFrequencies, ropeTables } from './rope.js';
import { tensorSlice, type TensorSlice } from './tensor-split.js';
import { planShardWeights, readPlanAsync, readPlanSync, type GqaWeights, type PendingRead, type ShardWeights } from './weights.js';
import type { MlaWeights } from './weights-mla.js';
import { kvCacheValuesPerToken } from './kv-cache-size.js';

export interface LoadShardOptions {
  /** @default the reference backend */
  backend?: Backend;
  /** Required when `spec.tensor.size > 1`: sums a buffer across the shard's tensor ranks. */
  allReduce?: AllReduce;
  /** Tokens per forward call (prompt chunk); larger prompts are fed in chunks. @default 32 */
  maxBatch?: number;
  /** Longest sequence a KV cache may hold. @default min(max_position_embeddings, 4096) */
  maxSeqLen?: number;
  /** Use this config instead of reading config.json again. */
  config?: ModelConfig;
}

/**
 * The KV cache of one sequence on one shard: per layer [capacity, localKv·headDim] for K and V; with
 * latent attention `k[l]` holds [capacity, kvLoraRank + rope] latents and `v[l]` is empty.
 */
export class KVCache {
  /** Tokens already processed. */
  length = 0;
  constructor(
    readonly capacity: number,
    readonly k: Float32Array[],
    readonly v: Float32Array[],
  ) {}
}

/** What a shard consumes: token ids (a shard holding the embedding) or hidden states [n, hidden] (rows embedded by rank 0, or the previous stage's output). */
export type ShardInput = { tokens: ArrayLike<number> } | { hidden: Float32Array; n: number };

/** One sequence's part of a batched step: its rows and its cache (positions continue from cache.length). */
export interface BatchSegment {
  input: ShardInput;
  cache: KVCache;
  /** Logits of every row of this segment, not only the last (to verify drafted tokens). Head shards only. */
  allLogits?: boolean;
}

export class ModelShard {
  readonly config: ModelConfig;
  readonly spec: ShardSpec;
  readonly slice: TensorSlice;
  readonly backend: Backend;
  readonly weights: ShardWeights;
  readonly maxBatch: number;
  readonly maxSeqLen: number;
  /** Tensor data bytes read from the checkpoint to load this shard. */
  readonly bytesRead: number;

  readonly #allReduce: AllReduce;
  #busy = false;
  readonly #invFreq: Float64Array;
  readonly #ropeScale: number;
  readonly #localHeads: number;
  readonly #localKv: number;
  // Run state, [maxBatch, ·] each, allocated once.
  readonly #x: Float32Array; // residual stream [B, hidden]
  readonly #xb: Float32Array; // normed input [B, hidden]
  readonly #xb2: Float32Array; // projection output [B, hidden]
  readonly #q: Float32Array; // [B, localHeads·hd]
  readonly #k: Float32Array; // [B, localKv·hd]
  readonly #v: Float32Array; // [B, localKv·hd]
  readonly #att: Float32Array; // attention output [B, localHeads·hd]
  readonly #scores: Float32Array; // [maxSeqLen]
  readonly #hb: Float32Array; // [B, localFfn]
  readonly #hb2: Float32Array; // [B, localFfn]
  readonly #cos: Float32Array; // [B, rope dims/2]
  readonly #sin: Float32Array;
  readonly #embedded: Float32Array; // [B, hidden], embedding holders only
  #logits: Float32Array; // [rows, vocabSlice]: each segment's last row, or all its rows when asked
  readonly #mla: MlaAttention | null;
  readonly #moe: MoeBlock | null;

  constructor(config: ModelConfig, spec: ShardSpec, weights: ShardWeights, slice: TensorSlice, backend: Backend, opts: { allReduce?: AllReduce; maxBatch: number; maxSeqLen: number; bytesRead: number }) {
    this.config = config;
    this.spec = spec;
    this.weights = weights;
    this.slice = slice;
    this.backend = backend;
    this.maxBatch = opts.maxBatch;
    this.maxSeqLen = opts.maxSeqLen;
    this.bytesRead = opts.bytesRead;
    const noReduce: AllReduce = async () => {};
    this.#allReduce = spec.tensor.size > 1 ? opts.allReduce! : noReduce;
    // Latent attention rotates only each head's RoPE part.
    const ropeDim = config.mla?.ropeDim ?? config.headDim;
    this.#invFreq = ropeInverseFrequencies({ ...config, headDim: ropeDim });
    this.#ropeScale = ropeAttentionFactor(config);
    const { hiddenSize: D, headDim: hd } = config;
    this.#localHeads = slice.heads[1] - slice.heads[0];
    this.#localKv = slice.kvHeads[1] - slice.kvHeads[0];
    const B = this.maxBatch;
    const gqa = !config.mla;
    const dense = !config.moe || config.moe.sparse.some((s, l) => !s && l >= spec.layers[0] && l < spec.layers[1]);
    const ffn = dense ? slice.ffn[1] - slice.ffn[0] : 0;
    const f = (n: number) => backend.allocF32(n);
    this.#x = f(B * D);
    this.#xb = f(B * D);
    this.#xb2 = f(B * D);
    this.#q = f(gqa ? B * this.#localHeads * hd : 0);
    this.#k = f(gqa ? B * this.#localKv * hd : 0);
    this.#v = f(gqa ? B * this.#localKv * hd : 0);
    this.#att = f(B * this.#localHeads * (config.mla?.vDim ?? hd));
    this.#scores = f(gqa ? this.maxSeqLen : 0);
    this.#hb = f(B * ffn);
    this.#hb2 = f(B * ffn);
    this.#cos = f((B * ropeDim) / 2);
    this.#sin = f((B * ropeDim) / 2);
    this.#mla = config.mla ? new MlaAttention(config, this.#localHeads, backend, B, this.maxSeqLen) : null;
    this.#moe = config.moe?.sparse.slice(spec.layers[0], spec.layers[1]).some(Boolean) ? new MoeBlock(config, slice, backend, B) : null;
    this.#embedded = f(weights.embed ? B * D : 0);
    this.#logits = f(spec.head ? slice.vocab[1] - slice.vocab[0] : 0);
  }

  /** A fresh KV cache for one sequence of up to `capacity` tokens. */
  newCache(capacity = this.maxSeqLen): KVCache {
    if (capacity > this.maxSeqLen) throw new RangeError(`KV cache capacity ${capacity} exceeds maxSeqLen ${this.maxSeqLen}`);
    // K and V take half each; a latent cache keeps everything in k.
    const mla = !!this.config.mla;
    const perToken = kvCacheValuesPerToken(this.config, this.slice);
    const layers = this.spec.layers[1] - this.spec.layers[0];
    const k = Array.from({ length: layers }, () => this.backend.allocF32(capacity * (mla ? perToken : perToken / 2)));
    const v = Array.from({ length: layers }, () => this.backend.allocF32(mla ? 0 : (capacity * perToken) / 2));
    return new KVCache(capacity, k, v);
  }

  /**
   * The embedding rows of `tokens`, widened: [n, hidden] f32, in `out` or else in a buffer of this
   * shard's that the next embed() overwrites (forward() does not touch it, so the rows can be sent to
   * the stage's other ranks while this one runs them). Needs the embedding (tensor rank 0 of stage 0).
   */
  embed(tokens: ArrayLike<number>, out?: Float32Array): Float32Array {
    const table = this.weights.embed;
    if (!table) throw noEmbeddingError(this.spec);
    const n = tokens.length;
    if (n < 1 || n > this.maxBatch) throw new RangeError(`embed: ${n} tokens per call; this shard takes 1..${this.maxBatch}`);
    checkTokenIds(tokens, this.config.vocabSize);
    const rows = (out ?? this.#embedded).subarray(0, n * this.config.hiddenSize);
    embedRows(rows, table, tokens);
    return rows;
  }

  /**
   * Runs up to `maxBatch` tokens at positions cache.length ... through this shard and appends their K/V.
   * Returns the last token's logits over this rank's vocabulary rows `slice.vocab` (head shards; the
   * whole vocabulary without a tensor split) or hidden states ([n, hidden], others).
   * The returned array is this shard's buffer: copy it before the next call. One call at a time.
   */
  async forward(input: ShardInput, cache: KVCache): Promise<Float32Array> {
    return (await this.forwardBatch([{ input, cache }]))[0];
  }

  /**
   * One step over several sequences: each segment's rows (`maxBatch` in all) continue its own cache.
   * The projections and the MLP run once over every row (weights read once per step); RoPE and
   * attention run per segment against its cache; tensor ranks all-reduce the whole step at once.
   * Returns per segment its last token's logits (or, with `allLogits`, every row's: [n, vocabSlice])
   * on a head shard, else its hidden rows [n, hidden]. The arrays are this shard's buffers.
   */
  async forwardBatch(segments: readonly BatchSegment[]): Promise<Float32Array[]> {
    // The run state is shared: a second forward while one waits on an all-reduce would corrupt it.
    if (this.#busy) throw new Error('forward: this shard is already running a forward; calls must not overlap');
    this.#busy = true;
    try {
      return await this.#forward(segments);
    } finally {
      this.#busy = false;
    }
  }

  async #forward(segments: readonly BatchSegment[]): Promise<Float32Array[]> {
    const c = this.config;
    const w = this.weights;
    const be = this.backend;
    const D = c.hiddenSize;
    const x = this.#x;
    const xb = this.#xb;
    const xb2 = this.#xb2;
    const rows = this.#placeRows(segments);
    const n = rows.total;
    this.#lastRows = n;
    const half = this.#invFreq.length;

    // Input: the tokens' embedding rows, or hidden states (rank 0's rows, or the previous stage's output).
    segments.forEach(({ input, cache }, s) => {
      const at = rows.first[s];
      const len = rows.count[s];
      if ('tokens' in input) this.embed(input.tokens, x.subarray(at * D));
      else x.set(input.hidden.subarray(0, len * D), at * D);
      ropeTables(this.#cos.subarray(at * half), this.#sin.subarray(at * half), this.#invFreq, cache.length, len, this.#ropeScale);
    });

    for (let li = 0; li < w.layers.length; li++) {
      const L = w.layers[li];
      const layer = this.spec.layers[0] + li;

      // x += all_reduce(attention(rmsnorm(x)))   (this rank's heads: a partial sum of o_proj)
      rmsnormRows(be, xb, x, L.inputNorm, n, D, c.rmsNormEps);
      const A = L.attention;
      if (A.kind === 'mla') {
        this.#mlaSegments(A, segments, rows, li);
        be.matmul(xb2, A.o, this.#att, n);
      } else this.#gqa(A, layer, segments, rows, li);
      await this.#allReduce(xb2.subarray(0, n * D));
      if (A.kind === 'gqa' && A.oBias) addBias(xb2, A.oBias, n, D);
      addInto(be, x, xb2, n * D);

      // x += all_reduce(mlp(rmsnorm(x)))   (dense: this rank's intermediate rows; MoE: its experts)
      rmsnormRows(be, xb, x, L.postNorm, n, D, c.rmsNormEps);
      if (L.mlp.kind === 'moe') this.#moe!.forward(xb2, xb, n, L.mlp);
      else swigluMlp(be, xb2, xb, n, L.mlp, this.#hb, this.#hb2);
      await this.#allReduce(xb2.subarray(0, n * D));
      addInto(be, x, xb2, n * D);
    }
    segments.forEach(({ cache }, s) => (cache.length += rows.count[s]));

    if (!this.spec.head) return segments.map((_, s) => x.subarray(rows.first[s] * D, (rows.first[s] + rows.count[s]) * D));

    // Logits over this rank's vocabulary rows: each segment's last row, or all of them when asked.
    const V = this.slice.vocab[1] - this.slice.vocab[0];
    const wanted = segments.map((seg, s) => (seg.allLogits ? rows.count[s] : 1));
    const total = wanted.reduce((a, b) => a + b, 0);
    const logits = this.#logitRows(total * V);
    // Every segment's wanted rows side by side, then one head matmul: the head is read once per step.
    let out = 0;
    const at = segments.map((_, s) => {
      const from = rows.first[s] + rows.count[s] - wanted[s];
      for (let b = 0; b < wanted[s]; b++) rmsnorm(xb, (out + b) * D, x, (from + b) * D, w.finalNorm!, D, c.rmsNormEps);
      out += wanted[s];
      return out - wanted[s];
    });
    be.matmul(logits, w.head!, xb, total);
    return segments.map((_, s) => logits.subarray(at[s] * V, (at[s] + wanted[s]) * V));
  }

  /** Where each segment's rows sit in the run state, after checking the step fits. */
  #placeRows(segments: readonly BatchSegment[]): { first: number[]; count: number[]; total: number } {
    if (segments.length === 0) throw new RangeError('forward: no sequences in the step');
    if (new Set(segments.map((s) => s.cache)).size !== segments.length) throw new RangeError('forward: a KV cache appears twice in one step');
    const first: number[] = [];
    const count: number[] = [];
    let total = 0;
    for (const { input, cache } of segments) {
      let n: number;
      if ('tokens' in input) {
        if (!this.weights.embed) throw noEmbeddingError(this.spec);
        n = input.tokens.length;
      } else {
        n = input.n;
        const need = n * this.config.hiddenSize;
        if (input.hidden.length < need) throw new RangeError(`forward: hidden states hold ${input.hidden.length} values, ${n} tokens × ${this.config.hiddenSize} need ${need}`);
      }
      if (n < 1) throw new RangeError(`forward: ${n} tokens for a sequence; each takes at least 1`);
      if (cache.length + n > cache.capacity) throw new RangeError(`sequence of ${cache.length + n} tokens exceeds the KV cache capacity ${cache.capacity}`);
      first.push(total);
      count.push(n);
      total += n;
    }
    if (total > this.maxBatch) throw new RangeError(`forward: ${total} tokens per call; this shard takes 1..${this.maxBatch}`);
    return { first, count, total };
  }

  /** The logits buffer, grown (once per size) when a step asks for more rows than it holds. */
  #logitRows(length: number): Float32Array {
    if (this.#logits.length < length) {
      this.backend.release?.(this.#logits);
      this.#logits = this.backend.allocF32(length);
    }
    return this.#logits;
  }

  /** Latent attention per segment (its own cache and positions), into #att's rows. */
  #mlaSegments(A: MlaWeights, segments: readonly BatchSegment[], rows: { first: number[]; count: number[] }, li: number): void {
    const D = this.config.hiddenSize;
    const half = this.#invFreq.length;
    const width = this.#localHeads * this.config.mla!.vDim;
    segments.forEach(({ cache }, s) => {
      const at = rows.first[s];
      const sub = (a: Float32Array, w: number) => a.subarray(at * w);
      this.#mla!.forward(sub(this.#att, width), sub(this.#xb, D), rows.count[s], cache.length, cache.k[li], A, sub(this.#cos, half), sub(this.#sin, half));
    });
  }

  /**
   * Grouped-query attention of a step's rows: xb2 = o_proj(attention(q, K, V)) over this rank's heads.
   * Projections run over all rows at once; each segment's K/V go to its cache and its queries attend to it.
   */
  #gqa(A: GqaWeights, layer: number, segments: readonly BatchSegment[], rows: { first: number[]; count: number[]; total: number }, li: number): void {
    const n = rows.total;
    const c = this.config;
    const be = this.backend;
    const xb = this.#xb;
    const hd = c.headDim;
    const nh = this.#localHeads;
    const nkv = this.#localKv;
    const qw = nh * hd;
    const kvw = nkv * hd;

    // q, k, v = xb·Wqᵀ, xb·Wkᵀ, xb·Wvᵀ (+ bias)
    matmuls(be, [{ out: this.#q, w: A.q }, { out: this.#k, w: A.k }, { out: this.#v, w: A.v }], xb, n);
    if (A.qBias) addBias(this.#q, A.qBias, n, qw);
    if (A.kBias) addBias(this.#k, A.kBias, n, kvw);
    if (A.vBias) addBias(this.#v, A.vBias, n, kvw);

    for (let b = 0; b < n; b++) {
      // Qwen3: RMSNorm each head of q and k; then rotate both by position.
      if (A.qNorm) for (let h = 0; h < nh; h++) rmsnorm(this.#q, b * qw + h * hd, this.#q, b * qw + h * hd, A.qNorm, hd, c.rmsNormEps);
      if (A.kNorm) for (let h = 0; h < nkv; h++) rmsnorm(this.#k, b * kvw + h * hd, this.#k, b * kvw + h * hd, A.kNorm, hd, c.rmsNormEps);
      applyRope(this.#q, b * qw, nh, hd, this.#cos, this.#sin, b);
      applyRope(this.#k, b * kvw, nkv, hd, this.#cos, this.#sin, b);
    }

    const sliding = c.slidingLayers ? c.slidingLayers[layer] : true;
    segments.forEach(({ cache }, s) => {
      const at = rows.first[s];
      const count = rows.count[s];
      const pos0 = cache.length;
      // Append the segment's K and V to its cache.
      cache.k[li].set(this.#k.subarray(at * kvw, (at + count) * kvw), pos0 * kvw);
      cache.v[li].set(this.#v.subarray(at * kvw, (at + count) * kvw), pos0 * kvw);
      // att = softmax(q·Kᵀ / √hd, causal [and sliding window] [with sinks]) · V, per query head over its KV head.
      this.#attend(A, {
        out: this.#att.subarray(at * qw),
        q: this.#q.subarray(at * qw),
        k: cache.k[li],
        v: cache.v[li],
        n: count,
        pos0,
        heads: nh,
        kvHeads: nkv,
        headDim: hd,
        group: c.numHeads / c.numKvHeads,
        headOffset: this.slice.heads[0],
        kvOffset: this.slice.kvHeads[0],
        scale: 1 / Math.sqrt(hd),
        window: sliding ? (c.slidingWindow ?? 0) : 0,
      });
    });

    // xb2 = att·Woᵀ (each rank holds Wo's columns of its heads: a partial sum)
    be.matmul(this.#xb2, A.o, this.#att, n);
  }

  #attend(A: GqaWeights, args: AttentionArgs): void {
    // Backend attention kernels know no sinks; the reference loop does.
    if (this.backend.attention && !A.sinks) this.backend.attention(args);
    else attention(args, this.#scores, A.sinks);
  }

  /** Rows the last forward ran (residual's valid rows). */
  get lastRows(): number {
    return this.#lastRows;
  }

  #lastRows = 0;

  /**
   * The residual stream of the last forward's first `n` rows, [n, hidden], before the final norm (what
   * embeddings pool; see embed.ts). This shard's buffer: the next forward overwrites it.
   */
  residual(n: number): Float32Array {
    return this.#x.subarray(0, n * this.config.hiddenSize);
  }

  /**
   * The final hidden states (after the model's final norm) of rows `from`..`from + n` of the last forward,
   * [n, hidden], a copy (the next forward overwrites the residual): what a multi-token-prediction drafter
   * (model/mtp.ts) starts from. Only on the shard that holds the final norm (the last stage).
   */
  finalHidden(from: number, n: number): Float32Array {
    const D = this.config.hiddenSize;
    const norm = this.weights.finalNorm;
    if (!norm) throw new Error('finalHidden: this shard holds no final norm (not the last stage)');
    if (!(Number.isInteger(from) && Number.isInteger(n) && from >= 0 && n >= 1 && from + n <= this.#lastRows)) {
      throw new RangeError(`finalHidden: rows [${from}, ${from + n}) asked; the last forward ran ${this.#lastRows}`);
    }
    const x = this.residual(from + n);
    const out = new Float32Array(n * D);
    for (let b = 0; b < n; b++) rmsnorm(out, b * D, x, (from + b) * D, norm, D, this.config.rmsNormEps);
    return out;
  }

  /** Hands a finished sequence's KV cache back to the backend for reuse. */
  releaseCache(cache: KVCache): void {
    if (!this.backend.release) return;
    for (const buf of [...cache.k, ...cache.v]) this.backend.release(buf);
    cache.k.length = 0;
    cache.v.length = 0;
  }

  /** Releases the backend's threads and memory (a WASM backend has workers). */
  dispose(): void {
    this.backend.dispose?.();
  }
}

function addBias(y: Float32Array, bias: Float32Array, n: number, width: number): void {
  for (let b = 0; b < n; b++) for (let i = 0; i < width; i++) y[b * width + i] += bias[i];
}

/**
 * Loads one shard of the model in `dir`, reading only the bytes of the tensors it needs.
 * `spec.layers` must lie within the model; a tensor split must divide heads and FFN evenly
 * (KV heads are replicated when there are fewer of them than ranks — see tensor-split.ts).
 */
export function loadShard(dir: string, spec: ShardSpec, options: LoadShardOptions = {}): ModelShard {
  const load = plannedLoad(dir, spec, options);
  const reads = planOf(load.next());
  try {
    readPlanSync(reads);
  } catch (err) {
    return shardOf(load.throw(err));
  }
  return shardOf(load.next());
}

/** `loadShard` with reads that do not block the event loop (for a daemon); abortable. */
export async function loadShardAsync(dir: string, spec: ShardSpec, options: LoadShardOptions & { signal?: AbortSignal } = {}): Promise<ModelShard> {
  const load = plannedLoad(dir, spec, options);
  const reads = planOf(load.next());
  try {
    await readPlanAsync(reads, options.signal);
  } catch (err) {
    return shardOf(load.throw(err));
  }
  return shardOf(load.next());
}

/**
 * The one body of both loads: plans the shard's weights, hands the planned reads out (the caller
 * reads them, blocking or not, and resumes it, or throws the read's failure into it), then builds.
 * A failure anywhere disposes a backend it created; the weights file is closed either way.
 */
function* plannedLoad(dir: string, spec: ShardSpec, options: LoadShardOptions): Generator<readonly PendingRead[], ModelShard, void> {
  const { config, slice, backend, ckpt } = prepare(dir, spec, options);
  try {
    const { weights, reads } = planShardWeights(ckpt, config, spec, slice, backend);
    yield reads;
    return build(config, spec, weights, slice, backend, options, ckpt.bytesRead);
  } catch (err) {
    if (!options.backend) backend.dispose?.();
    throw err;
  } finally {
    ckpt.close();
  }
}

function planOf(step: IteratorResult<readonly PendingRead[], ModelShard>): readonly PendingRead[] {
  if (step.done) throw new Error('shard load finished before its reads were planned');
  return step.value;
}

function shardOf(step: IteratorResult<readonly PendingRead[], ModelShard>): ModelShard {
  if (!step.done) throw new Error('shard load planned a second set of reads');
  return step.value;
}

function prepare(dir: string, spec: ShardSpec, options: LoadShardOptions) {
  const config = options.config ?? loadModelConfig(dir);
  const [start, end] = spec.layers;
  if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0 || end > config.numLayers || start > end) {
    throw new UnsupportedModelError(`shard layers [${start}, ${end}) are outside the model's ${config.numLayers} layers`);
  }
  if (spec.tensor.size > 1 && !options.allReduce) throw new UnsupportedModelError('a tensor-parallel shard needs an allReduce callback');
  const slice = tensorSlice(config, spec.tensor.rank, spec.tensor.size, spec.tensor.heads);
  // `dir` may also name a GGUF file: its tensors are read under their Hugging Face names.
  const ckpt = openWeights(dir, config);
  return { config, slice, backend: options.backend ?? createReferenceBackend(), ckpt };
}

function build(config: ModelConfig, spec: ShardSpec, weights: ShardWeights, slice: TensorSlice, backend: Backend, options: LoadShardOptions, bytesRead: number): ModelShard {
  return new ModelShard(config, spec, weights, slice, backend, {
    allReduce: options.allReduce,
    maxBatch: options.maxBatch ?? 32,
    maxSeqLen: options.maxSeqLen ?? Math.min(config.maxPositionEmbeddings, 4096),
    bytesRead,
  });
}
