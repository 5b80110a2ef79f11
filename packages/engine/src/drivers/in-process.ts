/**
 * Runs a whole model in this process as a grid of shards: `pipeline` stages (layer ranges) × `tensor`
 * ranks per stage, joined by an in-process all-reduce (stages.ts moves the embedding rows, hidden states
 * and logit slices between them). One stage × one rank is the plain unsplit model.
 * Used by `orchard run --pipeline N / --tensor N`, by tests proving split equivalence, and as the
 * shape the daemon's distributed runners follow (one shard per machine instead of per array slot).
 */
import type { ModelConfig } from '../config/config.js';
import { loadModelConfig } from '../format/model-files.js';
import type { Backend } from '../kernels/backend.js';
import { createReferenceBackend } from '../kernels/reference.js';
import { loadShard, type KVCache, type ModelShard } from '../model/forward.js';
import { checkLayout, pipelineStages, shardSpecOf, stageMembers, type InstanceLayout } from '../layout.js';
import { createInProcessAllReduce } from './all-reduce.js';
import { PrefixCache, type PrefixCacheOptions } from '../model/prefix-cache.js';
import { forwardThroughStages, stepThroughStages } from './stages.js';

/** Something that turns token ids into next-token logits, one sequence at a time. */
export interface LanguageModel {
  readonly config: ModelConfig;
  /** Longest sequence a session may hold. */
  readonly maxSeqLen: number;
  /** A new sequence with its own KV cache. */
  newSession(capacity?: number): Session;
}

export interface Session {
  /** Tokens processed so far. */
  readonly length: number;
  /**
   * Feeds `tokens` (any number; prompts go in batches) and returns the logits after the last one.
   * The array belongs to the model and is valid until the next call.
   */
  forward(tokens: ArrayLike<number>): Promise<Float32Array>;
  /** Frees the KV caches; the session is unusable afterwards. */
  dispose?(): void;
  /** Forgets every token after the first `length` (rejected draft tokens): the next forward continues from there. */
  rewind?(length: number): void;
  /**
   * On a fresh session: copies the longest prefix of `tokens` the model's prefix cache holds into the
   * KV caches and returns its length (0 without a prefix cache); feed the rest with forward().
   */
  reusePrefix?(tokens: ArrayLike<number>): number;
  /** Offers the tokens this session has processed to the prefix cache (before dispose). */
  keepPrefix?(): void;
  /** Feeds `tokens` (at most the model's maxBatch) and returns every one's logits, [n, vocab]: to verify drafted tokens. */
  forwardAll?(tokens: ArrayLike<number>): Promise<Float32Array>;
  /**
   * The final hidden states (after the model's last norm) of the last `n` rows the last forward ran in
   * one step, [n, hidden], a copy: what a multi-token-prediction drafter (model/mtp.ts) starts from.
   */
  finalHidden?(n: number): Float32Array;
}

/** One sequence's part of a batched step (InProcessModel.forwardBatch). */
export interface BatchStep {
  session: Session;
  tokens: ArrayLike<number>;
  /** Logits of every token, [n, vocab], not only the last. */
  allLogits?: boolean;
}

export interface InProcessOptions {
  /** Number of pipeline stages (layers split as evenly as possible), or the layer count of each stage. @default 1 */
  pipeline?: number | number[];
  /** Tensor-parallel ranks per stage. @default 1 */
  tensor?: number;
  /** Query heads of each tensor rank, for an uneven split (the same in every stage). @default equal shares */
  heads?: number[];
  /** One backend per shard, created by this factory. @default the reference backend */
  backend?: () => Backend;
  /** Prompt chunk size. @default 32 */
  maxBatch?: number;
  /** @default min(max_position_embeddings, 4096) */
  maxSeqLen?: number;
  /** Bytes of K/V each shard keeps for prefix reuse (prefix-cache.ts). @default 0: no prefix cache */
  prefixCacheBytes?: number;
  /** Tokens per prefix-cache block. @default 16 */
  prefixBlockTokens?: number;
}

/** What the model keeps of a live session. */
interface SessionState {
  caches: KVCache[][];
  /** The tokens its caches hold, in order: the prefix cache's keys. */
  history: number[];
}

export class InProcessModel implements LanguageModel {
  readonly config: ModelConfig;
  /** stages[s][r]: stage s, tensor rank r. */
  readonly stages: ModelShard[][];
  readonly maxSeqLen: number;

  /** prefix[s][r]: the prefix cache of stage s, rank r; null without one. */
  readonly prefix: PrefixCache[][] | null;

  constructor(config: ModelConfig, stages: ModelShard[][], prefix: PrefixCacheOptions | null = null) {
    this.config = config;
    this.stages = stages;
    this.maxSeqLen = stages[0][0].maxSeqLen;
    this.prefix = prefix && prefix.maxBytes > 0 ? stages.map((ranks) => ranks.map(() => new PrefixCache(prefix))) : null;
  }

  /** Releases every shard's backend. */
  dispose(): void {
    for (const s of this.stages.flat()) s.dispose();
  }

  /** Tensor bytes read by all shards together. */
  get bytesRead(): number {
    return this.stages.flat().reduce((s, sh) => s + sh.bytesRead, 0);
  }

  /**
   * One step of several sessions together: their tokens (at most `maxBatch` in all) run through every
   * shard in one forward each, the weights read once. Returns each session's logits (its last token's,
   * or every token's with `allLogits`), owned by the caller.
   */
  async forwardBatch(steps: readonly BatchStep[]): Promise<Float32Array[]> {
    const total = steps.reduce((a, st) => a + st.tokens.length, 0);
    const maxBatch = Math.min(...this.stages.flat().map((s) => s.maxBatch));
    if (total > maxBatch) throw new RangeError(`forwardBatch: ${total} tokens in one step; this model takes at most ${maxBatch} (maxBatch)`);
    const states = steps.map((st) => {
      const state = this.#sessions.get(st.session);
      if (!state) throw new Error('forwardBatch: a session of another model, or one already disposed');
      if (st.tokens.length === 0) throw new RangeError('forwardBatch: a session with no tokens in the step');
      return state;
    });
    const withCaches = steps.map((st, i) => ({ caches: states[i].caches, tokens: st.tokens, allLogits: st.allLogits }));
    const out = await stepThroughStages(this.stages, withCaches, this.config.hiddenSize, this.config.vocabSize);
    steps.forEach((st, i) => states[i].history.push(...Array.from(st.tokens)));
    return out;
  }

  readonly #sessions = new WeakMap<Session, SessionState>();

  newSession(capacity = this.maxSeqLen): Session {
    const caches: KVCache[][] = this.stages.map((ranks) => ranks.map((sh) => sh.newCache(capacity)));
    const state: SessionState = { caches, history: [] };
    const owners = this.#sessions;
    const prefix = this.prefix;
    const model = this;
    const stages = this.stages;
    const D = this.config.hiddenSize;
    const maxBatch = Math.min(...stages.flat().map((s) => s.maxBatch));
    const buffers = { transfer: new Float32Array(maxBatch * D), logits: new Float32Array(this.config.vocabSize) };
    const session: Session = {
      get length() {
        return caches[0][0].length;
      },
      async forward(tokens) {
        const logits = await forwardThroughStages(stages, caches, tokens, maxBatch, buffers, D);
        state.history.push(...Array.from(tokens));
        return logits;
      },
      async forwardAll(tokens) {
        return (await model.forwardBatch([{ session, tokens, allLogits: true }]))[0];
      },
      dispose() {
        owners.delete(session);
        stages.forEach((ranks, s) => ranks.forEach((sh, r) => sh.releaseCache(caches[s][r])));
      },
      rewind(length) {
        const now = caches[0][0].length;
        if (!Number.isInteger(length) || length < 0 || length > now) throw new RangeError(`rewind: ${length} is not within the session's 0..${now} tokens`);
        for (const c of caches.flat()) c.length = length;
        state.history.length = length;
      },
      reusePrefix(tokens) {
        if (caches[0][0].length !== 0) throw new Error('reusePrefix: the session has already processed tokens');
        if (!prefix) return 0;
        // Each shard holds what its own byte budget allowed: the prefix all of them hold is reused.
        const held = Math.min(...prefix.flatMap((ranks, s) => ranks.map((pc, r) => pc.restore(caches[s][r], tokens))));
        for (const c of caches.flat()) c.length = held;
        state.history = Array.from(tokens).slice(0, held);
        return held;
      },
      keepPrefix() {
        prefix?.forEach((ranks, s) => ranks.forEach((pc, r) => pc.store(caches[s][r], state.history)));
      },
      finalHidden(n) {
        // The last stage's rank 0 holds every row's whole residual stream after the step's all-reduces.
        const last = stages[stages.length - 1][0];
        const rows = last.lastRows;
        if (!Number.isInteger(n) || n < 1 || n > rows) throw new RangeError(`finalHidden: ${n} rows asked; the last step ran ${rows} (a prompt longer than maxBatch runs in several)`);
        return last.finalHidden(rows - n, n);
      },
    };
    owners.set(session, state);
    return session;
  }
}

/** Loads the model in `dir` as `pipeline` stages × `tensor` ranks in this process. */
export function loadInProcessModel(dir: string, options: InProcessOptions = {}): InProcessModel {
  const config = loadModelConfig(dir);
  const stages = pipelineStages(config.numLayers, options.pipeline ?? 1);
  const tensor = options.tensor ?? 1;
  const layout: InstanceLayout = { stages, tensor, ...(options.heads ? { heads: stages.map(() => options.heads!) } : {}) };
  checkLayout(config, layout);
  const newBackend = options.backend ?? createReferenceBackend;
  const shards = stages.map((_, s) => {
    const reduces = tensor > 1 ? createInProcessAllReduce(tensor) : [];
    return stageMembers(layout, s).map((rank, r) =>
      loadShard(dir, shardSpecOf(layout, rank), { config, backend: newBackend(), allReduce: reduces[r], maxBatch: options.maxBatch, maxSeqLen: options.maxSeqLen }),
    );
  });
  const prefix = options.prefixCacheBytes ? { maxBytes: options.prefixCacheBytes, blockTokens: options.prefixBlockTokens } : null;
  return new InProcessModel(config, shards, prefix);
}
