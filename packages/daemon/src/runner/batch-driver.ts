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
 * Speculation (a request's `speculate`, else the driver's): a decoding sequence may draft tokens from
 * its own context (prompt lookup) and feed them after its last token as extra rows of the same step,
 * every row's logits kept; its tokens are then picked from those rows in order while they agree with
 * the draft (engine's pickVerified: the plain decode's tokens, greedy or sampled), and its KV cache
 * forgets the rows past the last picked token. Draft rows are given only from the rows the step's
 * prompt chunks leave, and their number is chosen per sequence by what drafts earn in this batch
 * (step-draft-policy.ts: the sequence's own acceptance, the driver's fitted step cost; decode-only
 * steps that hold a speculating sequence are timed, in this process's CPU time on a CPU shard, else wall time).
 *
 * Split instances run the data-plane Driver (driver.ts), which batches, reuses prefixes and
 * speculates the same way over every rank.
 * A GPU rank batches its steps the same way (GpuShard.forwardBatch) and keeps its K/V, and its prefix
 * cache's blocks, on the device (kvBlocksOf); it speculates, its draft checks exact (verifiesDrafts).
 * A shard without forwardBatch runs the step's sequences one forward each.
 */
import { cpuTimeMs, DraftCost, DraftPolicy, MtpDrafter, penaltiesOf, pickToken, pickVerified, PrefixCache, Sampler, type KVCache, type ModelShard, type MtpHead, type PrefixCacheable, type PromptLookupOptions, type TokenConstraint } from '@orchard/engine';
import { PrefillChunker, type PrefillChunkOptions } from './prefill-chunk.js';
import { forwardSegments, keepsCpuCaches, kvBlocksOf, verifiesDrafts } from './step-forward.js';
import { DRAFT_TOKENS, nextDraft } from './draft.js';
import { speculationOf, type DraftModel } from './draft-model.js';
import { planStep } from './step-plan.js';
import { SequenceDraftPolicy, StepCost } from './step-draft-policy.js';
import { proposeMtp } from './mtp-draft.js';
import { countDraft, outcomeOf, takeToken, type FinishReason, type OnToken, type Picked, type SequenceState } from './sequence.js';
import type { CompileConstraint, GenerateOutcome, GenerateRequest, Speculate } from './requests.js';

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
  /** Speculation of requests that do not say. @default 'off' */
  speculate?: Speculate;
  /** Prompt lookup's most draft tokens per step and n-gram lengths. @default draftTokens 8 */
  promptLookup?: PromptLookupOptions;
  /** The draft model for requests that speculate with `draft` (draft-model.ts). */
  draftModel?: DraftModel;
  /**
   * What the draft policy times steps with, ms. @default this process's CPU time on a CPU shard (other
   * processes stretch wall time at random on a shared machine), wall time on a GPU rank.
   */
  stepClock?: () => number;
  /** The served checkpoint's multi-token-prediction layer, for requests that speculate with `mtp` (mtp-draft.ts). */
  mtp?: MtpHead;
}



/** One running request. */
interface Sequence extends SequenceState {
  cache: KVCache;
  sampler: Sampler;
  constraint: TokenConstraint | null;
  /** Prompt tokens not fed yet (from `fed`). */
  fed: number;
  /** Everything fed, in order: the prefix cache's keys. */
  history: number[];
  /** Its MTP drafter when it speculates with `mtp`. */
  mtp?: MtpDrafter;
  resolve: (o: GenerateOutcome) => void;
  reject: (e: Error) => void;
}

export class BatchDriver {
  readonly maxSequences: number;
  readonly prefix: PrefixCache<PrefixCacheable, unknown> | null;
  readonly #shard: ModelShard;
  readonly #compile?: CompileConstraint;
  readonly #active: Sequence[] = [];
  readonly #chunker: PrefillChunker;
  readonly #now: () => number;
  readonly #speculate: Speculate;
  readonly #lookup: PromptLookupOptions;
  readonly #draftModel?: DraftModel;
  readonly #mtp?: MtpHead;
  /** Every speculating sequence's policy reads this one fit: they share the steps. */
  readonly #stepCost = new StepCost();
  /** What MTP drafts cost per token, timed apart from the steps (the draft model keeps its own). */
  readonly #mtpCost = new DraftCost();
  readonly #stepClock: () => number;
  #running: Promise<void> | null = null;
  #broken: Error | null = null;
  #stopped = false;
  /**
   * Steps run, rows and sequences over all steps, the most sequences in one step, prompt tokens
   * prefilled and reused, steps that fed a prompt chunk while other sequences decoded, and draft
   * tokens fed and confirmed.
   */
  readonly stats = { steps: 0, rows: 0, sequences: 0, widest: 0, prefilledTokens: 0, cachedTokens: 0, mixedSteps: 0, drafted: 0, accepted: 0 };

  constructor(shard: ModelShard, o: BatchDriverOptions = {}) {
    this.#shard = shard;
    this.#compile = o.compile;
    this.#chunker = new PrefillChunker(o.prefill);
    this.#now = o.now ?? (() => performance.now());
    this.maxSequences = o.maxSequences ?? BATCH_SEQUENCES;
    this.#speculate = o.speculate ?? 'off';
    this.#lookup = { draftTokens: DRAFT_TOKENS, ...o.promptLookup };
    this.#draftModel = o.draftModel;
    this.#mtp = o.mtp;
    new DraftPolicy(this.#lookup.draftTokens!); // checks it
    // a CPU shard's step costs the CPU time of its threads, whatever else runs on the machine
    this.#stepClock = o.stepClock ?? (keepsCpuCaches(shard) ? cpuTimeMs : () => performance.now());
    const bytes = o.prefixCacheBytes ?? 64 * 2 ** 20;
    // CPU arrays, or a GPU rank's device buffers (kvBlocksOf)
    const blocks = kvBlocksOf(shard);
    this.prefix = bytes > 0 && blocks ? new PrefixCache({ maxBytes: bytes, blockTokens: o.prefixBlockTokens, blocks }) : null;
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
    const speculates = verifiesDrafts(shard) ? speculationOf(req.speculate ?? this.#speculate, this.#draftModel, this.#mtp) : null;
    const constraint = req.constraint ? await this.#compile!(req.constraint, req.stopTokenIds) : null;
    const capacity = Math.min(shard.maxSeqLen, prompt.length + req.maxTokens);
    const cache = shard.newCache(capacity);
    // The MTP layer needs every position's hidden state, which a copied prefix does not bring.
    const cached = speculates === 'mtp' ? 0 : (this.prefix?.restore(cache, prompt) ?? 0);
    const sampling = { temperature: req.temperature ?? 0, topP: req.topP ?? 1, topK: req.topK ?? 0, seed: req.seed ?? 0 };
    const t0 = performance.now();
    const done = new Promise<GenerateOutcome>((resolve, reject) => {
      this.#active.push({
        req,
        cache,
        capacity,
        sampler: new Sampler({ ...sampling, ...penaltiesOf(req) }, prompt),
        constraint,
        onToken,
        fed: cached,
        history: prompt.slice(0, cached),
        tokens: [],
        cached,
        draft: speculates ? new SequenceDraftPolicy(this.#lookup.draftTokens!, this.#stepCost, speculates === 'draft' ? this.#draftModel!.cost : speculates === 'mtp' ? this.#mtpCost : undefined) : null,
        byModel: speculates === 'draft' || speculates === 'mtp',
        mtp: speculates === 'mtp' ? new MtpDrafter(this.#mtp!, capacity) : undefined,
        drafted: 0,
        accepted: 0,
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

  /** One forward of every active sequence, its rows as planStep (step-plan.ts) lays them out. */
  async #step(): Promise<void> {
    const shard = this.#shard;
    // The drafters time themselves, per drafted token (the policies add that to what a draft's rows cost).
    await this.#draftModel?.propose(this.#active, shard.maxBatch - this.#active.length, this.#stepClock);
    if (this.#mtp) await proposeMtp(this.#active, shard.maxBatch - this.#active.length, this.#stepClock);
    // Only a speculating sequence's policy reads the step's cost: a step without one is not timed (on a
    // CPU shard the clock is a getrusage call, twice a step: ~2 us each, and a point where the OS preempts).
    const timed = this.#active.some((s) => s.draft !== null);
    const c0 = timed ? this.#stepClock() : 0;
    const { parts: batch, decodeRows, promptRows, rows } = planStep(this.#active, shard.maxBatch, this.#chunker, (seq, spare, step) => nextDraft(seq, spare, this.#lookup, step));
    const t0 = this.#now();
    const outs = await forwardSegments(shard, batch.map(({ seq, ids, draft }) => ({ input: { tokens: ids }, cache: seq.cache, allLogits: draft.length > 0 })));
    this.#chunker.observe(decodeRows, promptRows, this.#now() - t0);
    if (decodeRows > 0 && promptRows > 0) this.stats.mixedSteps++;
    this.stats.steps++;
    this.stats.sequences += batch.length;
    this.stats.widest = Math.max(this.stats.widest, batch.length);
    this.stats.rows += rows;
    // MTP drafters take their sequences' final hidden rows, copied before anything else runs the shard.
    let row = 0;
    const hidden = batch.map(({ seq, ids }) => {
      const h = seq.mtp ? shard.finalHidden(row, ids.length) : null;
      row += ids.length;
      return h;
    });
    for (let i = 0; i < batch.length; i++) {
      const { seq, ids, last, draft } = batch[i];
      if (seq.fed < seq.req.promptIds.length) {
        seq.mtp?.confirm(seq.fed, hidden[i]!, ids.length);
        seq.history.push(...ids);
        seq.fed += ids.length;
        this.stats.prefilledTokens += ids.length;
        if (!last) continue;
        seq.t1 = performance.now();
        const ended = takeToken(seq, await this.#pick(seq, outs[i]), seq.cache.length);
        if (ended) this.#finish(seq, ended);
        continue;
      }
      await this.#verify(seq, ids, draft, outs[i], hidden[i]);
    }
    // Decode-only steps teach the draft policy what a row costs (a prompt chunk's rows cost otherwise).
    if (timed && promptRows === 0 && decodeRows > 0) this.#stepCost.observe(rows, this.#stepClock() - c0);
  }

  /**
   * A decoding sequence's tokens from its step: `ids` (its last token, then `draft`) were fed and
   * `out` holds their logits (only the last row's without a draft). The cache keeps the rows of the
   * tokens picked from; the sequence ends where plain decode would end it.
   */
  async #verify(seq: Sequence, ids: number[], draft: number[], out: Float32Array, hidden: Float32Array | null): Promise<void> {
    const base = seq.cache.length - ids.length;
    const V = out.length / (draft.length + 1);
    let ended: FinishReason | null = null;
    let at = 0;
    // Each token is judged against the cache length plain decode would have had when picking it.
    const picks = await pickVerified((j) => out.subarray(j * V, (j + 1) * V), draft, (logits) => this.#pick(seq, logits), (p) => !(ended = takeToken(seq, p, base + ++at)));
    seq.cache.length = base + picks;
    if (hidden) seq.mtp!.confirm(base, hidden, picks);
    seq.history.push(...ids.slice(0, picks));
    countDraft(seq, this.stats, draft.length, picks - 1);
    if (ended) this.#finish(seq, ended);
  }

  #pick(seq: Sequence, logits: Float32Array): Promise<Picked> {
    return pickToken(logits, seq.sampler, seq.constraint, seq.req.logprobs);
  }

  #finish(seq: Sequence, finishReason: FinishReason): void {
    this.#active.splice(this.#active.indexOf(seq), 1);
    this.prefix?.store(seq.cache, seq.history);
    this.#end(seq, outcomeOf(seq, finishReason));
  }

  #end(seq: Sequence, outcome: GenerateOutcome | Error): void {
    this.#shard.releaseCache(seq.cache);
    this.#draftModel?.release(seq);
    seq.mtp?.dispose();
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
