/**
 * Adaptive draft lengths for batched steps (both drivers): the engine's DraftPolicy
 * (generate/draft-policy.ts, what `orchard run --prompt-lookup` uses) made aware of the batch. Each
 * sequence keeps its own acceptance estimate and probing (a DraftPolicy per sequence: one request's text
 * repeats, its neighbour's does not), while the step's cost is one fit per driver (or lane): every
 * sequence of a batch waits for the same step, so a step is timed once, as ms = fixed + perRow · rows
 * over all its rows. A draft of k tokens for one sequence adds k rows to a step the whole batch waits for,
 * so it pays only when the step's expected tokens per ms rise:
 *   (N + E(k) − 1) / cost(R + k)  >  N / cost(R) · MIN_GAIN (the engine's bestDraftLength),
 * R the rows the step holds so far and N the tokens they are expected to give (one per decoding sequence,
 * plus what earlier drafts of the step are expected to add; prompt rows give none). Alone (R = N = 1) this
 * is DraftPolicy's own rule; in a batch a row costs the neighbours time too, so drafts must earn more.
 * A drafter that runs forwards (the draft model, an MTP layer) is timed apart from the step, per drafted
 * token, in a DraftCost the driver shares among the sequences it drafts for: cost(R + k) then adds
 * perDraft · k, and a drafter that cannot pay even at full acceptance is not probed (the engine's canPay).
 *
 * Pure logic: the drivers time their steps and report them. Output never depends on it.
 */
import { DraftCost, DraftPolicy, PRIOR_COST, expectedExtra } from '@orchard/engine';

/** The step as planned so far: its rows, and the tokens they are expected to yield. */
export interface StepSoFar {
  rows: number;
  tokens: number;
}

/** One fit of a step's cost against its rows, shared by the sequences that step together. */
export class StepCost {
  // The engine policy's fit (decayed least squares, slow outliers clipped); only its cost is used.
  readonly #fit = new DraftPolicy(1);

  /** A step of `rows` rows (tokens, draft rows included) took `ms`. */
  observe(rows: number, ms: number): void {
    this.#fit.observeCost(rows, ms);
  }

  /** The fitted cost (the engine's prior until a step was timed). */
  get cost(): { fixed: number; perRow: number } {
    return this.#fit.cost ?? PRIOR_COST;
  }

  /** The fitted cost; null before a step was timed. */
  get fitted(): { fixed: number; perRow: number } | null {
    return this.#fit.cost;
  }
}

/** A sequence's draft length: its own acceptance, the batch's step cost. */
export class SequenceDraftPolicy extends DraftPolicy {
  readonly #steps: StepCost;
  /** The step the length is being chosen in (the last one, for the policy's probe bookkeeping). */
  #step: StepSoFar = { rows: 1, tokens: 1 };

  /** `drafts`: the driver's timing of this sequence's drafter (absent: prompt lookup, free but for its rows). */
  constructor(max: number, steps: StepCost, drafts?: DraftCost) {
    super(max, drafts);
    this.#steps = steps;
  }

  /**
   * Draft tokens to ask for in the step planned so far (`step` already counts this sequence's own token
   * row and token), at most `limit`: 0 is a plain row (or, now and then, a probe of 2).
   */
  nextIn(step: StepSoFar, limit: number): number {
    this.#step = { rows: Math.max(1, step.rows), tokens: Math.max(1, step.tokens) };
    return this.next(limit);
  }

  /** Counts a draft of `k` tokens into `step`: its rows and its expected tokens. */
  add(step: StepSoFar, k: number): void {
    step.rows += k;
    step.tokens += expectedExtra(this.acceptance, k);
  }

  protected override stepCost(): { fixed: number; perRow: number } | null {
    return this.#steps.fitted;
  }

  protected override plannedStep(): StepSoFar {
    return this.#step;
  }
}
