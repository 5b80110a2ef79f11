/**
 * The driver of a one-rank instance (the whole model in this runner): continuous batching. Requests
 * join at the next step boundary and every step runs all active sequences in one forwardBatch — the
 * decoding ones one token each, the ones still prefilling a chunk of their prompt — and sequences leave
 * as they finish. While others decode, a prompt chunk is sized from measured step times
 * (prefill-chunk.ts) so a long prompt stretches their inter-token time by a bounded share instead of
 * stalling them; with nobody decoding a prompt takes every row of the step. A client
 * that goes away (onToken false) frees its slot at the next step. A new request copies the longest
 * prefix a finished one left in the prefix cache (a chat's history) and prefills only the rest.
 *
 * Split instances keep the data-plane Driver (shard-loop.ts): one sequence per step and stage.
 * A shard without forwardBatch (the GPU rank) runs the step's sequences one forward each, with no
 * prefix cache.
 */
import { pickToken, PrefixCache, Sampler, type KVCache, type ModelShard, type TokenConstraint, type TokenLogprob } from '@orchard/engine';
import { PrefillChunker, type PrefillChunkOptions } from './prefill-chunk.js';
import { batches, forwardSegments } from './step-forward.js';
import type { CompileConstraint, GenerateOutcome, GenerateRequest } from './shard-loop.js';

/** Sequences a one-rank instance decodes together unless told otherwise (the executor's concurrency for it). */
export const BATCH_SEQUENCES = 8;

export interface BatchDriverOptions {
  /** Sequences decoded together. @default BATCH_SEQUENCES */
  maxSequences?: number;
  /** Bytes of K/V kept for prefix reuse. @default 64 MiB */
  prefixCacheBytes?: number;
  /** Tokens per prefix-cache block. @default 16 */
  prefixBlockTokens?: number;
  compile?: CompileConstraint;
  /** Chunked prefill while others decode: how much a prompt chunk may stretch a decode step. */
  prefill?: PrefillChunkOptions;
  /** The clock steps are timed with, ms. @default performance.now */
  now?: () => number;
}

type OnToken = (id: number, logprob?: TokenLogprob) => boolean;

/** One running request. */
interface Sequence {
  req: GenerateRequest;
  cache: KVCache;
  capacity: number;
  sampler: Sampler;
  constraint: TokenConstraint | null;
  onToken: OnToken;
  /** Prompt tokens not fed yet (from `fed`). */
  fed: number;
  /** Everything fed, in order: the prefix cache's keys. */
  history: number[];
  tokens: number[];
  cached: number;
  t0: number;
  t1: number;
  resolve: (o: GenerateOutcome) => void;
  reject: (e: Error) => void;
}

export class BatchDriver {
  readonly maxSequences: number;
  readonly prefix: PrefixCache | null;
  readonly #shard: ModelShard;
  /** A CPU shard (forwardBatch, KV caches in memory); a GPU rank runs a step's sequences one by one. */
  readonly #batches: boolean;
  readonly #compile?: CompileConstraint;
  readonly #active: Sequence[] = [];
  readonly #chunker: PrefillChunker;
  readonly #now: () => number;
  #running: Promise<void> | null = null;
  #broken: Error | null = null;
  #stopped = false;
  /**
   * Steps run, rows and sequences over all steps, the most sequences in one step, prompt tokens
   * prefilled and reused, and steps that fed a prompt chunk while other sequences decoded.
   */
  readonly stats = { steps: 0, rows: 0, sequences: 0, widest: 0, prefilledTokens: 0, cachedTokens: 0, mixedSteps: 0 };

  constructor(shard: ModelShard, o: BatchDriverOptions = {}) {
    this.#shard = shard;
    this.#batches = batches(shard);
    this.#compile = o.compile;
    this.#chunker = new PrefillChunker(o.prefill);
    this.#now = o.now ?? (() => performance.now());
    this.maxSequences = o.maxSequences ?? BATCH_SEQUENCES;
    const bytes = o.prefixCacheBytes ?? 64 * 2 ** 20;
    // The prefix cache copies CPU KV caches; a GPU rank's caches live on the device.
    this.prefix = bytes > 0 && this.#batches ? new PrefixCache({ maxBytes: bytes, blockTokens: o.prefixBlockTokens }) : null;
  }

  get broken(): Error | null {
    return this.#broken;
  }

  /**
   * Runs one request among the others: it joins the batch at the next step and resolves when it ends
   * (a stop id, the budget, the context full, or onToken returning false).
   */
  async generate(req: GenerateRequest, onToken: OnToken): Promise<GenerateOutcome> {
    if (this.#broken) throw this.#broken;
    if (this.#stopped) throw new Error('driver: stopped');
    if (this.#active.length >= this.maxSequences) throw new Error(`driver: ${this.maxSequences} sequences already running`);
    const shard = this.#shard;
    const prompt = req.promptIds;
    if (prompt.length === 0) throw new RangeError('the prompt has no tokens');
    if (prompt.length >= shard.maxSeqLen) throw new RangeError(`prompt of ${prompt.length} tokens does not fit the context of ${shard.maxSeqLen}`);
    if (req.constraint && !this.#compile) throw new RangeError('this runner cannot compile output constraints');
    const constraint = req.constraint ? await this.#compile!(req.constraint, req.stopTokenIds) : null;
    const capacity = Math.min(shard.maxSeqLen, prompt.length + req.maxTokens);
    const cache = shard.newCache(capacity);
    const cached = this.prefix?.restore(cache, prompt) ?? 0;
    const sampling = { temperature: req.temperature ?? 0, topP: req.topP ?? 1, topK: req.topK ?? 0, seed: req.seed ?? 0 };
    const t0 = performance.now();
    const done = new Promise<GenerateOutcome>((resolve, reject) => {
      this.#active.push({
        req,
        cache,
        capacity,
        sampler: new Sampler(sampling),
        constraint,
        onToken,
        fed: cached,
        history: prompt.slice(0, cached),
        tokens: [],
        cached,
        t0,
        t1: t0,
        resolve,
        reject,
      });
    });
    this.stats.cachedTokens += cached;
    this.#running ??= this.#loop();
    return done;
  }

  /** Steps until no sequence is left. */
  async #loop(): Promise<void> {
    try {
      while (this.#active.length && !this.#broken) {
        // Stopping: every sequence ends as if its client left.
        if (this.#stopped) for (const s of [...this.#active]) this.#finish(s, 'abort');
        if (!this.#active.length) return;
        try {
          await this.#step();
          // A step is microtasks only on the CPU: yield so the runner's messages (new requests, cancels) get in.
          await new Promise((resolve) => setImmediate(resolve));
        } catch (err) {
          this.#broken = err as Error;
          for (const s of this.#active.splice(0)) this.#end(s, err as Error);
        }
      }
    } finally {
      // Cleared in the same turn as the last look at #active: a request arriving later starts a new loop.
      this.#running = null;
    }
  }

  /**
   * One forward of every active sequence: decode rows first, then prompt chunks in the rows left —
   * all of them when nobody decodes, else as many as the measured step times allow (prefill-chunk.ts),
   * and at least one per waiting prompt.
   */
  async #step(): Promise<void> {
    const shard = this.#shard;
    let room = shard.maxBatch;
    const batch: { seq: Sequence; ids: number[]; last: boolean }[] = [];
    for (const seq of this.#active.filter((s) => s.fed >= s.req.promptIds.length)) {
      if (room === 0) break;
      batch.push({ seq, ids: [seq.tokens[seq.tokens.length - 1]], last: true });
      room--;
    }
    const decodeRows = batch.length;
    let budget = decodeRows > 0 ? this.#chunker.rows(room) : room;
    for (const seq of this.#active.filter((s) => s.fed < s.req.promptIds.length)) {
      if (room === 0) break;
      // Every waiting prompt advances at least a row per step, so all of them are in the batch at once.
      const prompt = seq.req.promptIds;
      const ids = prompt.slice(seq.fed, seq.fed + Math.min(room, Math.max(1, budget)));
      batch.push({ seq, ids, last: seq.fed + ids.length === prompt.length });
      budget -= ids.length;
      room -= ids.length;
    }
    const promptRows = shard.maxBatch - room - decodeRows;
    const t0 = this.#now();
    const outs = await forwardSegments(shard, batch.map(({ seq, ids }) => ({ input: { tokens: ids }, cache: seq.cache })));
    this.#chunker.observe(decodeRows, promptRows, this.#now() - t0);
    if (decodeRows > 0 && promptRows > 0) this.stats.mixedSteps++;
    this.stats.steps++;
    this.stats.sequences += batch.length;
    this.stats.widest = Math.max(this.stats.widest, batch.length);
    this.stats.rows += shard.maxBatch - room;
    for (let i = 0; i < batch.length; i++) {
      const { seq, ids, last } = batch[i];
      seq.history.push(...ids);
      if (seq.fed < seq.req.promptIds.length) {
        seq.fed += ids.length;
        this.stats.prefilledTokens += ids.length;
        if (last) seq.t1 = performance.now();
      }
      if (last) this.#advance(seq, await pickToken(outs[i], seq.sampler, seq.constraint, seq.req.logprobs));
    }
  }

  /** A sequence's new token: hand it out, and end the sequence if it is done. */
  #advance(seq: Sequence, picked: { id: number; logprob?: TokenLogprob }): void {
    const { req } = seq;
    if (req.maxTokens === 0) return this.#finish(seq, 'length');
    seq.tokens.push(picked.id);
    const goOn = seq.onToken(picked.id, picked.logprob);
    if (req.stopTokenIds.includes(picked.id)) return this.#finish(seq, 'stop');
    if (!goOn) return this.#finish(seq, 'abort');
    if (seq.tokens.length >= req.maxTokens || seq.cache.length >= seq.capacity) this.#finish(seq, 'length');
  }

  #finish(seq: Sequence, finishReason: GenerateOutcome['finishReason']): void {
    this.#active.splice(this.#active.indexOf(seq), 1);
    this.prefix?.store(seq.cache, seq.history);
    this.#end(seq, {
      tokens: seq.tokens,
      finishReason,
      promptTokens: seq.req.promptIds.length,
      prefillMs: seq.t1 - seq.t0,
      decodeMs: seq.req.maxTokens === 0 ? 0 : performance.now() - seq.t1,
      cachedPromptTokens: seq.cached,
    });
  }

  #end(seq: Sequence, outcome: GenerateOutcome | Error): void {
    this.#shard.releaseCache(seq.cache);
    seq.constraint?.dispose();
    if (outcome instanceof Error) seq.reject(outcome);
    else seq.resolve(outcome);
  }

  /** Ends the running sequences at the next step boundary (finish reason abort) and refuses new ones. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#running;
  }
}
