/**
 * A runner rank on the GPU: a GpuShard (engine/kernels/gpu) behind the ModelShard surface the shard
 * loop uses (config, maxBatch, maxSeqLen, bytesRead, embed, forward, newCache, releaseCache, dispose);
 * embed() is asynchronous here (the rows are read back from the GPU), which the loop awaits.
 *
 * Two differences are bridged here. GPU caches are allocated asynchronously (out-of-memory shows up
 * then), while the loop's newCache() is synchronous: the cache handed out is a placeholder whose GPU
 * buffers are awaited by the first forward(). And a GpuShard takes one call at a time, while the loop
 * may have several sequences in flight: calls are queued, with their inputs copied when queued.
 * GPU caches are freed by releaseCache(), or when the placeholder is garbage-collected.
 *
 * A step of several sequences runs as one GpuShard.forwardBatch (weights read once per step). The K/V
 * stay on the device (`cachesOnDevice`), and so do the prefix cache's blocks (`kvBlocks`): their copies
 * out of and into caches are device-side copies queued with the calls, so a block is copied out after
 * the forwards that wrote its rows and into a cache before the forward that reads them, and a released
 * cache is destroyed only after the copies queued before. A draft's check runs
 * its rows as decode rows (engine EXACT_ROWS_MAX), and a call takes the handle's length as the cache's
 * (the loop cuts it back after a rejected draft), so the drivers speculate here (`verifiesDrafts`).
 */
import {
  createGpuContext,
  describeAdapter,
  GpuShard,
  loadModelConfig,
  loadShard,
  type GpuContext,
  type GpuKVCache,
  type KvBlocks,
  type ModelConfig,
  type BatchSegment,
  type ModelShard,
  type ShardInput,
} from '@orchard/engine';
import { loadRankShard, type LoadRankOptions } from './local.js';
import { type InstanceLayout, shardSpecOf, stageMembers, stageOf } from '@orchard/engine';
import { stageAllReduce } from './poll.js';
import type { Group } from './transport.js';

/**
 * The KV cache the loop holds: `length` kept in step with the GPU cache it stands for. The loop sets a
 * smaller length to drop a rejected draft's rows: that cut reaches the device cache with the next call.
 */
export class GpuCacheHandle {
  #length = 0;
  #cut: number | null = null;
  /** The prefix-cache copies into this cache, queued before its next call: it fails if one failed. */
  #restored: Promise<void> = Promise.resolve();
  get length(): number {
    return this.#length;
  }
  set length(v: number) {
    if (v < this.#length) this.#cut = v;
    this.#length = v;
  }
  /** @internal The device cache's length after a call. */
  settle(v: number): void {
    this.#length = v;
  }
  /** @internal A queued copy into this cache; the next call waits for it and fails if it failed. */
  restoring(copy: Promise<void>): void {
    const before = this.#restored;
    this.#restored = copy.then(() => before);
    this.#restored.catch(() => undefined); // reported by the call that awaits it
  }
  /** @internal */
  get restored(): Promise<void> {
    return this.#restored;
  }
  /** @internal The length the loop cut the cache back to since the last call, once. */
  takeCut(): number | null {
    const c = this.#cut;
    this.#cut = null;
    return c;
  }
  constructor(
    readonly capacity: number,
    /** @internal */ readonly gpu: Promise<GpuKVCache>,
  ) {
    gpu.catch(() => undefined); // reported by the forward() that awaits it
  }
}

/** A prefix-cache block of a GPU rank: a device buffer, made in the rank's queue. */
export interface GpuKvBlock {
  buffer: Promise<GPUBuffer>;
}

const freeOnCollect = new FinalizationRegistry<Promise<GpuKVCache>>((p) => {
  void p.then((c) => c.destroy(), () => undefined);
});

export class GpuRankShard {
  readonly config: ModelConfig;
  readonly maxBatch: number;
  readonly maxSeqLen: number;
  readonly bytesRead: number;
  /** The adapter this rank runs on, for logs. */
  readonly adapter: string;
  /** Its KV caches live on the GPU (step-forward.ts keepsCpuCaches). */
  readonly cachesOnDevice = true;
  /** A draft's check gives every row its 1-token bits (step-forward.ts verifiesDrafts). */
  readonly verifiesDrafts = true;
  /**
   * The prefix cache's blocks on this rank (step-forward.ts kvBlocksOf): device buffers, copied in the
   * queue's order. A block that could not be made (out of GPU memory) fails the call of the cache it is
   * copied into, with the reason, rather than leaving rows unwritten.
   */
  readonly kvBlocks: KvBlocks<GpuCacheHandle, GpuKvBlock> = {
    copyOut: (handle, from, tokens) => {
      const buffer = this.#queue(async () => this.gpu.copyKvOut(await handle.gpu, from, tokens));
      buffer.catch(() => undefined); // reported where the block is copied in
      return { buffer };
    },
    copyIn: (block, handle, at, tokens) => {
      handle.restoring(this.#queue(async () => this.gpu.copyKvIn(await block.buffer, await handle.gpu, at, tokens)));
    },
    bytesPerToken: () => this.gpu.kvBlockBytes(1),
    free: (block) => void this.#queue(async () => (await block.buffer).destroy()).catch(() => undefined),
  };
  #chain: Promise<unknown> = Promise.resolve();
  #live = 0;

  constructor(
    readonly gpu: GpuShard,
    readonly context: GpuContext,
    config: ModelConfig,
    bytesRead: number,
    private readonly ownsContext: boolean,
  ) {
    this.config = config;
    this.maxBatch = gpu.maxBatch;
    this.maxSeqLen = gpu.maxSeqLen;
    this.bytesRead = bytesRead;
    this.adapter = describeAdapter(context.adapter);
  }

  newCache(capacity = this.maxSeqLen): GpuCacheHandle {
    if (capacity > this.maxSeqLen) throw new RangeError(`KV cache capacity ${capacity} exceeds maxSeqLen ${this.maxSeqLen}`);
    const handle = new GpuCacheHandle(capacity, this.gpu.newCache(capacity));
    freeOnCollect.register(handle, handle.gpu, handle);
    this.#live++;
    return handle;
  }

  /** One sequence's rows: a step of one (GpuShard.forward is the same), queued like the others. */
  async forward(input: ShardInput, cache: GpuCacheHandle): Promise<Float32Array> {
    const [out] = await this.forwardBatch([{ input, cache: cache as unknown as BatchSegment['cache'] }]);
    return out;
  }

  /** One step over several sequences (ModelShard.forwardBatch's contract), queued like forward. */
  forwardBatch(segments: readonly BatchSegment[]): Promise<Float32Array[]> {
    const own = segments.map((s) => {
      const handle = s.cache as unknown as GpuCacheHandle;
      return { input: this.#own(s.input), handle, cut: handle.takeCut(), allLogits: s.allLogits };
    });
    return this.#queue(async () => {
      const kvs = await Promise.all(own.map((s) => s.handle.gpu));
      for (const s of own) await s.handle.restored.catch((err: Error) => Promise.reject(new Error(`prefix cache: a K/V block could not be copied on the GPU: ${err.message}`)));
      own.forEach((s, i) => s.cut !== null && (kvs[i].length = s.cut)); // a rejected draft's rows dropped
      const outs = await this.gpu.forwardBatch(own.map((s, i) => ({ input: s.input, cache: kvs[i], allLogits: s.allLogits })));
      own.forEach((s, i) => s.handle.settle(kvs[i].length));
      return outs;
    });
  }

  /** The input copied: the caller may reuse its buffers before a queued call runs. */
  #own(input: ShardInput): ShardInput {
    return 'tokens' in input ? { tokens: Array.from(input.tokens) } : { hidden: input.hidden.slice(0, input.n * this.config.hiddenSize), n: input.n };
  }

  /** The tokens' embedding rows (tensor rank 0 of stage 0), queued behind the calls before it. */
  embed(tokens: ArrayLike<number>): Promise<Float32Array> {
    const own = Array.from(tokens);
    return this.#queue(() => this.gpu.embed(own));
  }

  #queue<T>(call: () => Promise<T>): Promise<T> {
    const run = this.#chain.then(call);
    this.#chain = run.catch(() => undefined);
    return run;
  }

  /** KV caches handed out and not released yet (GPU memory held until then). */
  get liveCaches(): number {
    return this.#live;
  }

  releaseCache(cache: GpuCacheHandle): void {
    if (!freeOnCollect.unregister(cache)) return; // released already
    this.#live--;
    // behind the calls and prefix-cache copies queued before it
    void this.#queue(async () => (await cache.gpu).destroy()).catch(() => undefined);
  }

  dispose(): void {
    this.gpu.dispose();
    if (this.ownsContext) this.context.destroy();
  }
}

export interface LoadGpuRankOptions {
  /** Use this device; otherwise the rank opens its own (and closes it on dispose). */
  context?: GpuContext;
  allowSoftware?: boolean;
  maxBatch?: number;
  maxSeqLen?: number;
  stepMs?: number;
  pollMs?: number;
}

/** Loads `rank`'s shard onto the GPU, its stage's all-reduce wired to the group (as loadRankShard does on the CPU). */
export async function loadRankGpuShard(dir: string, layout: InstanceLayout, rank: number, group: Group | (() => Group), o: LoadGpuRankOptions = {}): Promise<GpuRankShard> {
  const groupOf = typeof group === 'function' ? group : () => group;
  const config = loadModelConfig(dir);
  const spec = shardSpecOf(layout, rank);
  const allReduce = layout.tensor > 1 ? stageAllReduce(groupOf, rank, stageMembers(layout, stageOf(layout, rank).stage), o.stepMs ?? 30_000, o.pollMs) : undefined;
  const ctx = o.context ?? (await createGpuContext({ allowSoftware: o.allowSoftware }));
  try {
    // The CPU shard only reads this rank's bytes; its weights are uploaded and then dropped.
    const cpu = loadShard(dir, spec, { config, allReduce, maxBatch: 1, maxSeqLen: 1 });
    const gpu = await GpuShard.create(ctx, {
      config,
      spec,
      slice: cpu.slice,
      weights: cpu.weights,
      allReduce,
      maxBatch: o.maxBatch,
      maxSeqLen: o.maxSeqLen ?? Math.min(config.maxPositionEmbeddings, 4096),
    });
    return new GpuRankShard(gpu, ctx, config, cpu.bytesRead, !o.context);
  } catch (err) {
    if (!o.context) ctx.destroy();
    throw err;
  }
}

/** What a runner was told to compute on. */
export interface RankBackend {
  kind: 'reference' | 'wasm' | 'gpu';
  threads?: number;
  /** gpu: accept a software adapter (lavapipe). */
  allowSoftware?: boolean;
}

/**
 * Loads a rank on `backend`. A GPU that cannot be used (no adapter, out of memory, over a limit) makes
 * the rank fall back to the CPU (wasm) kernels, with the reason in `note`, so the instance still runs.
 */
export async function loadRankOn(
  backend: RankBackend,
  dir: string,
  layout: InstanceLayout,
  rank: number,
  group: Group | (() => Group),
  o: Omit<LoadRankOptions, 'backend'> & { cpuBackend: (kind: 'reference' | 'wasm') => LoadRankOptions['backend'] },
): Promise<{ shard: ModelShard; note: string | null }> {
  const cpu = (kind: 'reference' | 'wasm') => loadRankShard(dir, layout, rank, group, { ...o, backend: o.cpuBackend(kind) });
  if (backend.kind !== 'gpu') return { shard: cpu(backend.kind), note: null };
  try {
    const g = await loadRankGpuShard(dir, layout, rank, group, { allowSoftware: backend.allowSoftware, maxBatch: o.maxBatch, maxSeqLen: o.maxSeqLen, stepMs: o.stepMs, pollMs: o.pollMs });
    // The loop only uses the members GpuRankShard has (see the header comment).
    return { shard: g as unknown as ModelShard, note: `rank ${rank} on the GPU (${g.adapter})` };
  } catch (err) {
    if (!/^Gpu\w+Error$/.test((err as Error).name)) throw err;
    return { shard: cpu('wasm'), note: `rank ${rank}: GPU unusable (${(err as Error).message.split('\n')[0]}); running on the CPU (wasm)` };
  }
}
