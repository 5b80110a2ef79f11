/**
 * The data-plane protocol of one instance, run by every rank over one `Group`:
 *
 *   rank 0 (driver)   --header-->  every other rank          (what to do next: begin / forward / stop)
 *   rank 0 (driver)   --rows---->  the other ranks of stage 0 (a forward's embedded tokens, n·hidden f32,
 *                                                            right after its header)
 *   stage s, rank 0   --hidden-->  every rank of stage s+1    (activations, n·hidden f32)
 *   last stage, rank t --logits--> sampler rank              (rank t's vocabulary slice, only when asked)
 *   sampler rank      --token--->  rank 0                     (the sampled id, only when asked)
 *
 * Only the driver holds the embedding, so its stage-0 peers need no meeting to embed; only the last
 * stage computes logits, each tensor rank over its vocabulary rows, and only the sampler (tensor rank
 * 0 of the last stage) joins them and samples. Inside a step a tensor stage meets only to sum partial
 * results after o_proj and down_proj, with the transport's all-reduce on the stage's sub-group (its own
 * messages on the shared links; every member ends with the same bits). Any failed operation (peer gone,
 * timeout) rejects the request that was running and breaks the loop: the instance is then dead and gets
 * replaced.
 */
import { penaltiesOf, penaltyHistory, pickToken, Sampler, samplerRank, stageMembers, validateSampling, type KVCache, type PromptLookupOptions } from '@orchard/engine';
import { HeaderCodec, type Header } from './header.js';
import { IDLE_TIMEOUT_MS, type LoopContext } from './loop-context.js';
import { LogitGather } from './logit-gather.js';
import { pollWhile } from './poll.js';
import { PrefillChunker } from './prefill-chunk.js';
import type { GenerateOutcome, GenerateRequest } from './requests.js';
import { encodePayload, TokenReply } from './sample-wire.js';
import { SplitPrefix } from './split-prefix.js';
import { withTimeout } from './with-timeout.js';
import { forwardSegments, kvBlocksOf, verifiesDrafts } from './step-forward.js';
import { confirmDraft, hiddenSegments, joinRows, type Pick } from './step-rows.js';
import { DRAFT_TOKENS, nextDraft } from './draft.js';
import { speculationOf } from './draft-model.js';
import { planStep, type PlannedRows } from './step-plan.js';
import { SequenceDraftPolicy, StepCost } from './step-draft-policy.js';
import { countDraft, outcomeOf, takeToken, type FinishReason, type OnToken, type Picked, type SequenceState } from './sequence.js';

/**
 * A decode step that takes this many times longer than the recent average means a stage is gone
 * silently (power, cable): the request fails then instead of after the generous `stepMs`.
 */
const STALL_FACTOR = 20;
/** Never fail a decode step faster than this (scheduling noise on a busy machine). */
const MIN_DECODE_TIMEOUT_MS = 3000;

/** One request the driver runs: its KV cache slot on every rank and where its prompt and tokens are. */
interface Running extends SequenceState {
  slot: number;
  cache: KVCache;
  /** Picked here when the driver samples, else the sampling rank's reply (one in flight at a time). */
  sampling: { pick: Pick } | { reply: TokenReply };
  /** Prompt tokens fed so far (the reused ones first). */
  fed: number;
  resolve: (o: GenerateOutcome) => void;
}

/** A sequence's rows in a step, going into its cache from position `pos`. */
interface Part extends PlannedRows<Running> {
  pos: number;
}

/** A group of sequences that step together: one micro-batch of the pipeline. */
interface Lane {
  seqs: Running[];
  running: Promise<void> | null;
  chunker: PrefillChunker;
  /** The lane's step cost (wall time: the step crosses every rank), which its sequences' draft policies read. */
  cost: StepCost;
}

/**
 * Rank 0: turns requests into headers, feeds stage 0 and collects sampled tokens. Up to `maxSequences`
 * requests run at once (one KV cache slot each on every rank), batched: they are spread over as many
 * lanes as the pipeline has stages, and each step of a lane runs all its sequences — the decoding ones
 * a token each, a prompt a chunk — in one forward on every rank (weights read once per step, tensor
 * ranks meet twice per layer for the whole step). Steps are issued in one order (header, stage-0
 * compute, hidden out) and their tokens come back in that order, so while stage 1 computes one lane's
 * step stage 0 computes the next lane's: a pipeline is kept busy by micro-batches.
 */
export class Driver {
  readonly #ctx: LoopContext;
  readonly #header: HeaderCodec;
  readonly maxSequences: number;
  readonly #free: number[];
  readonly #lanes: Lane[];
  /** Stage-0 ranks that take the embedded rows after a forward header. */
  readonly #rowPeers: number[];
  /** Joins the head ranks' logits when the driver is also the sampler (a single stage). */
  readonly #gather: LogitGather | null;
  /** The step's hidden rows for stage 1 when they come from several forwards. */
  readonly #rowsOut: Float32Array;
  #broken: Error | null = null;
  /** Moving average of one decode step over the whole ring, ms (0 = none measured yet). */
  #stepAvgMs = 0;
  /** Issue sections run one at a time, in call order. */
  #chain: Promise<unknown> = Promise.resolve();
  /** Sampled tokens still to come from the sampling rank, in issue order. */
  #waiters: { reply: TokenReply; draft: number; resolve: (p: Picked[]) => void; reject: (e: Error) => void; timeoutMs: number }[] = [];
  #receiving = false;
  /** Steps run, rows and sequences over all steps, the most sequences in one step, prompt tokens reused, draft tokens checked and confirmed. */
  readonly stats = { steps: 0, rows: 0, sequences: 0, widest: 0, cachedTokens: 0, drafted: 0, accepted: 0 };
  readonly #lookup: PromptLookupOptions = { draftTokens: DRAFT_TOKENS };
  readonly #prefix: SplitPrefix;
  /** Blocks every rank's prefix cache keeps: from --prefix-cache and this rank's K/V per block; 0 = none. */
  #prefixBlocks = 0;
  /**
   * What every rank can do (each follower says so once, when it starts): keep a prefix cache (copy its
   * K/V blocks), and check a draft (every row's 1-token bits, a cache cut back after a rejection).
   */
  readonly #everywhere: Promise<{ reuse: boolean; verify: boolean }>;

  constructor(ctx: LoopContext, maxSequences = Math.max(1, ctx.layout.stages.length)) {
    this.#ctx = ctx;
    this.#prefix = new SplitPrefix(kvBlocksOf(ctx.shard) ?? undefined);
    this.#header = new HeaderCodec(ctx.maxBatch);
    this.maxSequences = maxSequences;
    this.#free = Array.from({ length: maxSequences }, (_, i) => i);
    this.#lanes = Array.from({ length: Math.min(maxSequences, ctx.layout.stages.length) }, () => ({ seqs: [], running: null, chunker: new PrefillChunker(), cost: new StepCost() }));
    this.#rowPeers = stageMembers(ctx.layout, 0).slice(1);
    this.#gather = samplerRank(ctx.layout) === 0 ? new LogitGather(ctx.layout, ctx.shard.config.vocabSize) : null;
    this.#rowsOut = new Float32Array(ctx.maxBatch * ctx.shard.config.hiddenSize);
    const g = ctx.group;
    const said = Array.from({ length: g.size - 1 }, (_, i) => {
      const flag = new Int32Array(1);
      return g.recv(i + 1, flag, { timeoutMs: IDLE_TIMEOUT_MS }).then(() => flag[0]);
    });
    this.#everywhere = Promise.all(said).then(
      (all) => ({ reuse: all.every((f) => (f & 1) !== 0) && kvBlocksOf(ctx.shard) !== null, verify: all.every((f) => (f & 2) !== 0) && verifiesDrafts(ctx.shard) }),
      (err: Error) => {
        this.#fail(err);
        return { reuse: false, verify: false };
      },
    );
  }

  get broken(): Error | null {
    return this.#broken;
  }

  /** The instance is dead: every running request fails with the first error. */
  #fail(err: Error): Error {
    if (!this.#broken) this.#broken = err;
    for (const w of this.#waiters.splice(0)) w.reject(this.#broken);
    return this.#broken;
  }

  #serial<T>(f: () => Promise<T>): Promise<T> {
    const run = this.#chain.then(() => {
      if (this.#broken) throw this.#broken;
      return f();
    });
    this.#chain = run.catch(() => undefined);
    return run;
  }

  /**
   * Sends `header` to every other rank, followed on the same links by the `reused` prompt tokens to
   * every rank, `rows` to the stage-0 ranks and a request's sampling `payload` to the sampling rank.
   */
  async #broadcast(header: Header, timeoutMs = this.#ctx.stepMs, rows?: Float32Array, payload?: Uint8Array, reused?: Int32Array): Promise<void> {
    const g = this.#ctx.group;
    const bytes = this.#header.encode(header);
    const sends: Promise<void>[] = [];
    for (let r = 1; r < g.size; r++) sends.push(g.send(r, bytes, { timeoutMs }));
    if (reused) for (let r = 1; r < g.size; r++) sends.push(g.send(r, reused, { timeoutMs }));
    if (rows) for (const r of this.#rowPeers) sends.push(g.send(r, rows, { timeoutMs }));
    if (payload) sends.push(g.send(samplerRank(this.#ctx.layout), payload, { timeoutMs }));
    await Promise.all(sends);
  }

  /**
   * The driver's own forward of a step, after the header: with tensor peers in stage 0 it embeds, sends
   * them the rows and runs the rows itself; alone in its stage it runs the token ids directly.
   */
  async #forwardFirst(header: Extract<Header, { op: 'forward' }>, caches: KVCache[], timeoutMs: number): Promise<Float32Array[]> {
    const { shard } = this.#ctx;
    const ids = header.tokens;
    if (!this.#rowPeers.length) {
      let at = 0;
      await this.#broadcast(header, timeoutMs);
      return forwardSegments(shard, header.segments.map((seg, i) => ({ input: { tokens: ids.subarray(at, (at += seg.n)) }, cache: caches[i], allLogits: seg.draft > 0 })));
    }
    // Awaited: a GPU rank embeds on the device and reads the rows back.
    const rows = await shard.embed(ids);
    await this.#broadcast(header, timeoutMs, rows);
    return forwardSegments(shard, hiddenSegments(rows, shard.config.hiddenSize, header.segments, caches));
  }

  /** Deadline for one decode step: generous until measured, then a multiple of the usual time. */
  get decodeTimeoutMs(): number {
    if (!this.#stepAvgMs) return this.#ctx.stepMs;
    return Math.min(this.#ctx.stepMs, Math.max(MIN_DECODE_TIMEOUT_MS, STALL_FACTOR * this.#stepAvgMs));
  }

  /** Receives sampled tokens in issue order while steps wait for them. */
  async #receive(): Promise<void> {
    if (this.#receiving) return;
    this.#receiving = true;
    const { group, layout, pollMs } = this.#ctx;
    const from = samplerRank(layout);
    try {
      while (this.#waiters.length) {
        const w = this.#waiters[0];
        // A draft's check answers with how many tokens it confirmed, then those tokens.
        let n = 1;
        if (w.draft > 0) {
          const count = new Int32Array(1);
          await pollWhile(group.recv(from, count, { timeoutMs: w.timeoutMs }), pollMs);
          n = count[0];
          if (!(n >= 1 && n <= w.draft + 1)) throw new Error(`data plane: the sampling rank confirmed ${n} tokens of a ${w.draft}-token draft`);
        }
        const got: Picked[] = [];
        for (let k = 0; k < n; k++) {
          await pollWhile(group.recv(from, w.reply.buffer, { timeoutMs: w.timeoutMs }), pollMs);
          got.push(w.reply.decode());
        }
        this.#waiters.shift();
        w.resolve(got);
      }
    } catch (err) {
      this.#fail(err as Error);
    } finally {
      this.#receiving = false;
    }
  }

  /**
   * One forward step of several sequences over the whole instance: each part's ids continue its cache
   * from `pos`; returns, per part, its tokens when `sample` — one, or those a draft's check confirmed —
   * picked here when the driver samples, else the sampling rank's reply; null otherwise.
   */
  async #step(parts: Part[], decoding: boolean): Promise<(Picked[] | null)[]> {
    const { group, layout, pollMs } = this.#ctx;
    const S = layout.stages.length;
    const stepMs = decoding ? this.decodeTimeoutMs : this.#ctx.stepMs;
    const t0 = performance.now();
    const header: Extract<Header, { op: 'forward' }> = {
      op: 'forward',
      segments: parts.map((p) => ({ slot: p.seq.slot, n: p.ids.length, sample: p.last, pos: p.pos, draft: p.draft.length })),
      tokens: Float64Array.from(parts.flatMap((p) => p.ids)),
    };
    const issued = await this.#serial(async () => {
      const outs = await this.#forwardFirst(header, parts.map((p) => p.seq.cache), stepMs);
      if (S > 1) {
        const view = joinRows(outs, header.segments, this.#ctx.shard.config.hiddenSize, this.#rowsOut);
        await Promise.all(stageMembers(layout, 1).map((r) => group.send(r, view, { timeoutMs: stepMs })));
      }
      const picks: (Promise<Picked[]> | null)[] = [];
      for (let i = 0; i < parts.length; i++) {
        const { seq, last: sample, draft } = parts[i];
        const sampling = seq.sampling;
        if (!sample) picks.push(null);
        else if ('pick' in sampling) picks.push(Promise.resolve(await confirmDraft(await this.#gather!.join(group, outs[i], stepMs, pollMs, draft.length + 1), draft, sampling.pick)));
        // Registered inside the issue section, so waiters are in the order tokens will arrive.
        else picks.push(new Promise<Picked[]>((resolve, reject) => this.#waiters.push({ reply: sampling.reply, draft: draft.length, resolve, reject, timeoutMs: decoding ? stepMs : this.#ctx.stepMs * S })));
      }
      if (this.#waiters.length) void this.#receive();
      return picks;
    });
    const picked = await Promise.all(issued);
    if (decoding) {
      // A step's time includes the other lanes' steps on the shared stages.
      const ms = (performance.now() - t0) / this.#lanes.length;
      this.#stepAvgMs = this.#stepAvgMs ? 0.9 * this.#stepAvgMs + 0.1 * ms : ms;
    }
    return picked;
  }

  /**
   * Runs one request among the others: it joins a lane at that lane's next step and resolves when it
   * ends (a stop id, the budget, `onToken` returning false — client gone, stop string — or the context
   * full). At most `maxSequences` requests at once (the caller queues the rest).
   */
  async generate(req: GenerateRequest, onToken: OnToken): Promise<GenerateOutcome> {
    if (this.#broken) throw this.#broken;
    const slot = this.#free.shift();
    if (slot === undefined) throw new Error(`driver: ${this.maxSequences} sequences already running`);
    try {
      return await this.#run(slot, req, onToken);
    } catch (err) {
      if (!(err instanceof RangeError)) throw this.#fail(err as Error);
      throw err;
    } finally {
      this.#free.push(slot);
    }
  }

  async #run(slot: number, req: GenerateRequest, onToken: OnToken): Promise<GenerateOutcome> {
    const { shard, layout } = this.#ctx;
    const prompt = req.promptIds;
    const capacity = Math.min(shard.maxSeqLen, prompt.length + req.maxTokens);
    if (prompt.length === 0) throw new RangeError('the prompt has no tokens');
    if (prompt.length >= shard.maxSeqLen) throw new RangeError(`prompt of ${prompt.length} tokens does not fit the context of ${shard.maxSeqLen}`);
    const sampling = { temperature: req.temperature ?? 0, topP: req.topP ?? 1, topK: req.topK ?? 0, seed: req.seed ?? 0 };
    if (req.constraint && !this.#ctx.compile) throw new RangeError('this runner cannot compile output constraints');
    validateSampling(req);
    // Compiled here even when another stage samples: a constraint the grammar engine refuses is this
    // request's error, before anything reaches the other ranks.
    let constraint = req.constraint ? await this.#ctx.compile!(req.constraint, req.stopTokenIds) : null;
    const remote = samplerRank(layout) !== 0;
    // Penalties travel with the prompt's tail they start from (the header carries the four basic knobs).
    const penalties = penaltiesOf(req);
    const penalizes = Object.keys(penalties).length > 0;
    const payload = remote && (req.constraint || req.logprobs !== undefined || penalizes) ? encodePayload({ constraint: req.constraint, logprobs: req.logprobs, stopTokenIds: req.stopTokenIds, ...(penalizes ? { penalties, history: penaltyHistory(req, prompt) } : {}) }) : undefined;
    if (remote) {
      constraint?.dispose();
      constraint = null;
    }
    try {
      const can = await this.#canEverywhere();
      const reuse = can.reuse && (this.#ctx.prefixCacheBytes ?? 0) > 0;
      const speculates = can.verify ? speculationOf(req.speculate ?? this.#ctx.speculate, this.#ctx.draftModel) : null;
      const cache = shard.newCache(capacity);
      let entry: Running | undefined;
      try {
        // The prefix is restored and the begin sent in one issue section: every rank restores it at the same point.
        const cached = await this.#serial(async () => {
          this.#prefixBlocks ||= reuse ? this.#prefix.blocksFor(this.#ctx.prefixCacheBytes!, cache) : 0;
          const n = this.#prefix.restore(slot, cache, prompt, this.#prefixBlocks);
          const reused = n > 0 ? Int32Array.from(prompt.slice(0, n)) : undefined;
          await this.#broadcast({ op: 'begin', slot, capacity, sampling, payloadBytes: payload?.length ?? 0, cached: n, prefixBlocks: this.#prefixBlocks }, undefined, undefined, payload, reused);
          return n;
        });
        this.stats.cachedTokens += cached;
        const sampler = new Sampler({ ...sampling, ...penalties }, prompt);
        const pick: Pick = (logits) => pickToken(logits, sampler, constraint, req.logprobs);
        const t0 = performance.now();
        const lane = this.#lanes.reduce((a, b) => (b.seqs.length < a.seqs.length ? b : a));
        let seq: Running | undefined;
        const done = new Promise<GenerateOutcome>((resolve) => {
          seq = { slot, req, cache, capacity, sampling: remote ? { reply: new TokenReply(req.logprobs) } : { pick }, onToken, fed: cached, cached, tokens: [], draft: speculates ? new SequenceDraftPolicy(this.#lookup.draftTokens!, lane.cost, speculates === 'draft' ? this.#ctx.draftModel!.cost : undefined) : null, byModel: speculates === 'draft', drafted: 0, accepted: 0, t0, t1: t0, resolve };
          lane.seqs.push(seq);
        });
        entry = seq;
        lane.running ??= this.#laneLoop(lane);
        const failed = lane.running.then(() => (this.#broken ? Promise.reject(this.#broken) : new Promise<never>(() => undefined)));
        const outcome = await Promise.race([done, failed]);
        // Every rank keeps the sequence's blocks and frees its cache, at the same point of the header order.
        // (A failure here breaks the instance for the next request; this one has its tokens already.)
        await this.#serial(async () => {
          this.#prefix.end(slot, cache);
          await this.#broadcast({ op: 'end', slot, length: cache.length });
        }).catch((err: Error) => this.#fail(err));
        return outcome;
      } finally {
        shard.releaseCache(cache);
        if (entry) this.#ctx.draftModel?.release(entry);
      }
    } finally {
      constraint?.dispose();
    }
  }

  /** What every rank can do (waited for at most a step's time: the followers said it when they started). */
  #canEverywhere(): Promise<{ reuse: boolean; verify: boolean }> {
    return withTimeout(this.#everywhere, this.#ctx.stepMs, 'data plane: the other ranks did not report to the driver');
  }

  /** Steps a lane until none of its sequences is left (or the instance breaks). */
  async #laneLoop(lane: Lane): Promise<void> {
    try {
      while (lane.seqs.length && !this.#broken) await this.#laneStep(lane);
    } catch (err) {
      this.#fail(err as Error);
    } finally {
      // Cleared in the same turn as the last look at the lane: a request arriving later starts a new loop.
      lane.running = null;
      if (this.#broken) lane.seqs.length = 0;
    }
  }

  /** One step of a lane: all its sequences, their rows as planStep (step-plan.ts) lays them out. */
  async #laneStep(lane: Lane): Promise<void> {
    const clock = this.#ctx.stepClock ?? (() => performance.now());
    // The draft model times its own proposal, per drafted token (the policies add that to what rows cost).
    await this.#ctx.draftModel?.propose(lane.seqs, this.#ctx.maxBatch - lane.seqs.length, clock);
    const c0 = clock();
    const plan = planStep(lane.seqs, this.#ctx.maxBatch, lane.chunker, (seq, spare, step) => nextDraft(seq, spare, this.#lookup, step));
    const { decodeRows, promptRows } = plan;
    const parts: Part[] = plan.parts.map((p) => ({ ...p, pos: p.seq.cache.length }));
    const t0 = performance.now();
    const picked = await this.#step(parts, decodeRows === parts.length);
    lane.chunker.observe(decodeRows, promptRows, performance.now() - t0);
    this.stats.steps++;
    this.stats.rows += plan.rows;
    this.stats.sequences += parts.length;
    this.stats.widest = Math.max(this.stats.widest, parts.length);
    for (let i = 0; i < parts.length; i++) {
      const { seq, ids, pos, draft } = parts[i];
      const prompting = seq.fed < seq.req.promptIds.length;
      this.#prefix.fed(seq.slot, ids);
      if (prompting) {
        seq.fed += ids.length;
        if (seq.fed === seq.req.promptIds.length) seq.t1 = performance.now();
      }
      const got = picked[i];
      if (!got) continue;
      if (draft.length > 0) {
        // The cache keeps the rows of the tokens picked from; every rank drops the rest at the next header.
        seq.cache.length = pos + got.length;
        this.#prefix.rewind(seq.slot, pos + got.length);
      }
      countDraft(seq, this.stats, draft.length, got.length - 1);
      // Each token is judged against the cache length plain decode would have had when picking it.
      let ended: FinishReason | null = null;
      for (let j = 0; j < got.length && !ended; j++) ended = takeToken(seq, got[j], prompting ? pos + ids.length : pos + j + 1);
      if (ended) this.#finish(lane, seq, ended);
    }
    // Decode-only steps teach the lane's draft policies what a row costs.
    if (promptRows === 0 && decodeRows > 0) lane.cost.observe(plan.rows, clock() - c0);
  }

  #finish(lane: Lane, seq: Running, finishReason: FinishReason): void {
    lane.seqs.splice(lane.seqs.indexOf(seq), 1);
    seq.resolve(outcomeOf(seq, finishReason));
  }

  /** Tells every follower to return. */
  async stop(): Promise<void> {
    if (this.#broken) return;
    await this.#serial(() => this.#broadcast({ op: 'stop' })).catch(() => undefined);
  }
}
