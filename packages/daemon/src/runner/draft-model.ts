/**
 * Speculation with a small draft model, run on CPU by the driving process (a one-rank runner, or rank 0
 * of a split instance). Before a step is planned, every sequence that drafts with it gets up to the
 * length its policy asks (step-draft-policy.ts; the step it is timed by includes the draft's forwards),
 * proposed greedily: the draft model first takes the sequence's confirmed tokens it has not seen (its own KV cache per sequence; a prompt is taken chunk by chunk as the target
 * prefills it), then feeds back its own argmax, one row per sequence per forward, all such sequences
 * batched in one forwardBatch. Verification is the target's
 * (pickVerified): a deterministic draft needs nothing more for output identical to plain decode, greedy
 * or sampled. After verification the draft cache keeps only the rows of tokens the sequence confirmed
 * (the longest prefix it shares with the confirmed text), so a rejected proposal costs nothing later.
 *
 * Each proposal times itself (on the driver's step clock) into `cost`, per drafted token, which the
 * policies of the sequences it drafts for weigh against what its tokens earn (step-draft-policy.ts): a
 * draft about as slow as the target turns itself off.
 *
 * The draft and target must share a tokenizer (the same ids for the same text): checked at load.
 */
import { argmax, DraftCost, loadModelConfig, loadShard, loadTokenizer, pipelineStages, shardSpecOf, type Backend, type KVCache, type ModelShard } from '@orchard/engine';
import { draftLimit, type Drafting } from './draft.js';
import type { Speculate } from './requests.js';
import type { StepSoFar } from './step-draft-policy.js';

export interface DraftModelOptions {
  /** Rows per draft forward (a sequence's unseen tokens are fed in chunks of this). @default 32 */
  maxBatch?: number;
  /** @default the reference kernels */
  backend?: Backend;
  /** The target's context: the draft's KV caches hold as much, up to its own max_position_embeddings. @default 4096 */
  maxSeqLen?: number;
}

/** A sequence's draft cache and the ids it holds rows of, in order. */
interface DraftState {
  cache: KVCache;
  fed: number[];
}

/** A sequence's part of one proposal: ids still to feed, tokens proposed so far, how many it wants. */
interface Job {
  seq: Drafting;
  state: DraftState;
  pending: number[];
  want: number;
  out: number[];
}

export class DraftModel {
  readonly dir: string;
  readonly shard: ModelShard;
  readonly #states = new Map<Drafting, DraftState>();
  /** Ids past the target's vocabulary end a proposal (a draft whose rows are padded wider). */
  readonly #targetVocab: number;
  /** Forwards run and rows fed; the most forwards one proposal (one step) ran. */
  readonly stats = { forwards: 0, rows: 0, longest: 0 };
  /** What its forwards cost per drafted token (every sequence it drafts for reads this one). */
  readonly cost = new DraftCost();
  /** Proposals run one at a time: a pipeline's lanes step concurrently, and a shard runs one forward at a time. */
  #chain: Promise<unknown> = Promise.resolve();

  constructor(dir: string, shard: ModelShard, targetVocab: number) {
    this.dir = dir;
    this.shard = shard;
    this.#targetVocab = targetVocab;
  }

  /**
   * Loads the draft model in `dir` (HF directory or GGUF) whole, for the target in `targetDir`; throws
   * an error naming the draft model's path when it cannot be loaded or does not share the target's tokenizer.
   */
  static load(dir: string, targetDir: string, o: DraftModelOptions = {}): DraftModel {
    try {
      checkSameTokenizer(dir, targetDir);
      const config = loadModelConfig(dir);
      const layout = { stages: pipelineStages(config.numLayers, 1), tensor: 1 };
      const maxSeqLen = Math.min(o.maxSeqLen ?? 4096, config.maxPositionEmbeddings);
      const shard = loadShard(dir, shardSpecOf(layout, 0), { config, backend: o.backend, maxBatch: o.maxBatch, maxSeqLen });
      return new DraftModel(dir, shard, loadModelConfig(targetDir).vocabSize);
    } catch (err) {
      const message = (err as Error).message;
      throw new Error(message.startsWith('draft model') ? message : `draft model ${dir}: ${message}`);
    }
  }

  /** Bytes of weights read at load (counted with the rank's own). */
  get bytesRead(): number {
    return this.shard.bytesRead;
  }

  /**
   * Leaves in `proposal` the draft of every decoding sequence among `seqs` that drafts with this
   * model: each asks its draft length once per step, and at most `spare` tokens are proposed. Resolves
   * to the tokens proposed; the time it took on `clock` (ms) goes into `cost` when there were any.
   */
  propose(seqs: readonly (Drafting & { fed: number })[], spare: number, clock: () => number = () => performance.now()): Promise<number> {
    const run = this.#chain.then(async () => {
      const t0 = clock();
      const tokens = await this.#propose(seqs, spare);
      if (tokens > 0) this.cost.observe(tokens, clock() - t0);
      return tokens;
    });
    this.#chain = run.then(() => undefined, () => undefined);
    return run;
  }

  async #propose(seqs: readonly (Drafting & { fed: number })[], spare: number): Promise<number> {
    const max = this.shard.maxBatch;
    const jobs: Job[] = [];
    // The target's step as far as known before it is planned: a row per sequence, a token per decoding one.
    const step: StepSoFar = { rows: seqs.length, tokens: seqs.filter((s) => s.fed >= s.req.promptIds.length).length };
    for (const seq of seqs) {
      if (!seq.byModel || !seq.draft) continue;
      // A draft too slow to pay at any acceptance (its timed cost) is not fed at all, prompts included.
      if (!seq.draft.canPay()) continue;
      const prompting = seq.fed < seq.req.promptIds.length;
      if (!prompting) seq.proposal = [];
      // What the target has taken so far; a decoding sequence's last token is always fed again (its logits draft).
      const context = prompting ? seq.req.promptIds.slice(0, seq.fed) : [...seq.req.promptIds, ...seq.tokens];
      const state = this.#stateOf(seq);
      if (context.length > state.cache.capacity) continue;
      // Rows of tokens the sequence did not confirm are dropped.
      let keep = 0;
      while (keep < state.fed.length && keep < context.length - (prompting ? 0 : 1) && state.fed[keep] === context[keep]) keep++;
      state.fed.length = keep;
      state.cache.length = keep;
      const behind = context.length - keep;
      // Catching up — a prompt as the target prefills it, or a long stretch the draft has not seen (a
      // restored prefix) — takes at most one forward's rows per step, so no step waits long on the draft.
      if (prompting || behind > max) {
        if (behind > 0) jobs.push({ seq, state, pending: context.slice(keep, keep + max), want: 0, out: [] });
        continue;
      }
      // The draft cache holds at most context + want - 1 rows.
      const want = seq.draft.nextIn(step, Math.min(draftLimit(seq, seq.draft.max, spare), state.cache.capacity - context.length + 1));
      seq.draft.add(step, want);
      if (want >= 1) jobs.push({ seq, state, pending: context.slice(keep), want, out: seq.proposal! });
    }
    for (let forwards = 1; ; forwards++) {
      // Sequences with the fewest ids to feed first: a long catch-up takes the rows left.
      const live = jobs.filter((j) => j.pending.length > 0).sort((a, b) => a.pending.length - b.pending.length);
      if (!live.length) return jobs.reduce((n, j) => n + j.out.length, 0);
      this.stats.longest = Math.max(this.stats.longest, forwards);
      const step: { job: Job; ids: number[] }[] = [];
      let room = max;
      for (const job of live) {
        if (room === 0) break;
        const ids = job.pending.splice(0, room);
        step.push({ job, ids });
        room -= ids.length;
      }
      const outs = await this.shard.forwardBatch(step.map(({ job, ids }) => ({ input: { tokens: ids }, cache: job.state.cache })));
      this.stats.forwards++;
      this.stats.rows += max - room;
      step.forEach(({ job, ids }, i) => {
        job.state.fed.push(...ids);
        if (job.pending.length > 0 || job.out.length >= job.want) return;
        const id = argmax(outs[i]);
        if (id >= this.#targetVocab) return;
        job.out.push(id);
        if (job.out.length < job.want) job.pending.push(id);
      });
    }
  }

  #stateOf(seq: Drafting): DraftState {
    let state = this.#states.get(seq);
    if (!state) {
      state = { cache: this.shard.newCache(Math.min(this.shard.maxSeqLen, seq.capacity)), fed: [] };
      this.#states.set(seq, state);
    }
    return state;
  }

  /** `seq` ended: its draft cache goes. */
  release(seq: Drafting): void {
    const state = this.#states.get(seq);
    if (!state) return;
    this.#states.delete(seq);
    this.shard.releaseCache(state.cache);
  }

  /** Sequences holding a draft cache (tests: every ended sequence released its own). */
  get held(): number {
    return this.#states.size;
  }
}

/**
 * Throws unless the models in `draftDir` and `targetDir` spell every id both define the same (tokenizer
 * vocabulary, added tokens included) and mark the same of them special: then a draft's ids mean to the
 * target what they meant to the draft. Ids only one side has are allowed — padding rows (a GGUF names
 * them [PADn], a family's small and large models pad their vocabularies differently) or tokens the other
 * lacks: verification is exact, so such a draft token is only ever rejected, never wrong.
 */
export function checkSameTokenizer(draftDir: string, targetDir: string): void {
  const draft = loadTokenizer(draftDir).vocabulary();
  const target = loadTokenizer(targetDir).vocabulary();
  const common = Math.min(draft.tokens.length, target.tokens.length);
  const differs = (what: string) => new Error(`draft model ${draftDir} does not share the tokenizer of ${targetDir}: ${what}`);
  const kind = (special: string | undefined) => (special === undefined ? 'plain' : 'special');
  for (let id = 0; id < common; id++) {
    if (draft.tokens[id] !== target.tokens[id]) throw differs(`token ${id} is ${JSON.stringify(draft.tokens[id] ?? '')} vs ${JSON.stringify(target.tokens[id] ?? '')}`);
    if (draft.specials[id] !== target.specials[id]) throw differs(`token ${id} (${JSON.stringify(draft.tokens[id])}) is ${kind(draft.specials[id])} in the draft and ${kind(target.specials[id])} in the target`);
  }
}

/**
 * How a request speculates given its mode (or the runner's), the runner's draft model and MTP head: `draft`
 * or `mtp` without one is the request's error (a RangeError: the instance itself is fine).
 */
export function speculationOf(mode: Speculate | undefined, model: DraftModel | undefined, mtp?: unknown): 'prompt-lookup' | 'draft' | 'mtp' | null {
  if (mode === 'draft' && !model) throw new RangeError("speculate 'draft': this instance has no draft model (orchard start --draft-model <dir>)");
  if (mode === 'mtp' && !mtp) throw new RangeError("speculate 'mtp': this instance drafts with no multi-token-prediction layer (orchard start --speculate mtp, a one-rank CPU instance of a checkpoint that has one)");
  return mode === 'draft' || mode === 'prompt-lookup' || mode === 'mtp' ? mode : null;
}
