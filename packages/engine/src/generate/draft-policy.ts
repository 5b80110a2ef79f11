/**
 * How many tokens to draft, chosen by what a draft is expected to earn. A verify step of k drafted
 * tokens feeds k + 1 rows and yields 1 + a + a² + … + a^k tokens on average (a: the chance that a drafted
 * token is confirmed, given the ones before it were). On a GPU the rows after the first are nearly free;
 * on the CPU kernels they are not: a row of a small model costs about half a decode step (the kernels are
 * compute-bound, so rows share little), and each row's attention grows with the context. So drafting pays
 * only with high acceptance and short context, and the right length depends on both. The policy keeps
 * two estimates, both forgetting the old: a step's cost as a + b·rows (least squares over the steps timed)
 * and the acceptance a (successes / trials of the drafted tokens), and asks for the k that gives the most
 * tokens per unit of time — none when no k beats a plain step. While it drafts nothing it probes now and
 * then (after 4, 8, … 32 plain steps, the wait doubling while probes show drafting still would not pay) so that text which starts repeating is noticed.
 *
 * A drafter that runs a model (a draft model, an MTP layer) costs time per drafted token besides the
 * verify rows: its forwards. The caller times them apart from the step (observeDraftCost) and the rate
 * counts them: ms = fixed + perRow·rows + perDraft·k. A drafter so slow that no length would pay even if
 * every drafted token were confirmed (the target as its own draft: each draft token a whole forward) is,
 * once two proposals were timed, not probed again: acceptance cannot rise past that, and a probe after idling costs the draft's
 * catch-up forwards too. Prompt lookup's search is part of the step's own time (its perDraft stays unknown).
 *
 * Pure logic: the caller times its steps and reports them. Output never depends on it (each token is
 * still the model's own pick), only speed.
 */

/** Per-observation weight kept of the older cost samples (~20 steps of memory): costs drift as the context grows. */
const COST_DECAY = 0.95;
/** The same for acceptance (~10 verify steps): text goes in and out of repeating itself. */
const ACCEPT_DECAY = 0.9;
/** Until two different row counts have been timed, a row is assumed to cost this share of a one-row step. */
const PRIOR_ROW_SHARE = 0.3;
/** Acceptance to start from: optimistic enough to try drafting (weight of 4 drafted tokens). */
const PRIOR_SUCCESSES = 3;
const PRIOR_FAILURES = 1;
/** A draft must beat a plain step by this margin (timing noise would otherwise flip the choice). */
const MIN_GAIN = 1.03;
const OUTLIER = 1.5;
const FIRST_PROBE = 4;
const LAST_PROBE = 32;
/** The most acceptance the estimate reaches (and what "even if every token were confirmed" means). */
const MAX_ACCEPTANCE = 0.995;

/**
 * This process's CPU time, ms: what draft policies time steps with where the steps run on the CPU (other
 * processes on a shared machine stretch wall time by several times, at random, and a policy would read
 * their noise as the cost of rows).
 */
export function cpuTimeMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** What a step is assumed to cost before any was timed: a row costs PRIOR_ROW_SHARE of a one-row step. */
export const PRIOR_COST: Readonly<{ fixed: number; perRow: number }> = { fixed: 1 - PRIOR_ROW_SHARE, perRow: PRIOR_ROW_SHARE };

/** A step's cost model: ms = fixed + perRow·rows + perDraft·(tokens drafted for it). */
export interface StepCostModel {
  fixed: number;
  perRow: number;
  /** The drafter's own time per drafted token (its forwards); 0 or absent where drafting is free (prompt lookup). */
  perDraft?: number;
}

/**
 * Decayed counts of drafted tokens confirmed and of drafts cut short (a draft's tokens are accepted in a
 * row until the first miss): the acceptance of a drafted token whose predecessors were accepted is
 * successes / (successes + failures).
 */
class AcceptanceRecord {
  #successes: number;
  #failures: number;

  constructor(successes: number, failures: number) {
    this.#successes = successes;
    this.#failures = failures;
  }

  /** A verify step: `drafted` tokens fed, the first `accepted` of them confirmed. */
  observe(drafted: number, accepted: number): void {
    this.#successes = this.#successes * ACCEPT_DECAY + accepted;
    this.#failures = this.#failures * ACCEPT_DECAY + (accepted < drafted ? 1 : 0);
  }

  /** successes / (successes + failures); null with no record. */
  get rate(): number | null {
    const n = this.#successes + this.#failures;
    return n > 0 ? this.#successes / n : null;
  }
}

/**
 * What a drafter's forwards cost per drafted token, in the caller's unit: a decayed mean (~10 proposals
 * of memory; the draft's context grows as the target's does), slow outliers clipped from the second on.
 * One instance may be shared by every sequence a drafter serves (a runner's draft model).
 */
export class DraftCost {
  #ms = 0;
  #tokens = 0;
  /** Proposals timed (not decayed). */
  #count = 0;
  /** Outcomes of this drafter's drafts over every sequence it served (decayed as a policy's own), and the last probe wait. */
  readonly #outcomes = new AcceptanceRecord(0, 0);
  #probeAfter = FIRST_PROBE;

  /** Drafting `tokens` tokens took `ms` (the drafter's forwards, catch-up rows included). */
  observe(tokens: number, ms: number): void {
    if (!(tokens >= 1) || !(ms >= 0) || !Number.isFinite(ms)) return;
    const est = this.perToken;
    if (est !== null) ms = Math.min(ms, OUTLIER * est * tokens);
    this.#ms = this.#ms * ACCEPT_DECAY + ms;
    this.#tokens = this.#tokens * ACCEPT_DECAY + tokens;
    this.#count++;
  }

  /**
   * Whether enough proposals were timed to turn the drafter off for good on their cost: two, so one
   * proposal held up by the OS, the collector or a first compile cannot do it alone.
   */
  get settled(): boolean {
    return this.#count >= 2;
  }

  /** A verify step of this drafter's: `drafted` fed, `accepted` confirmed; `probeAfter` the wait its policy now keeps. */
  noteOutcome(drafted: number, accepted: number, probeAfter: number): void {
    this.#outcomes.observe(drafted, accepted);
    this.#probeAfter = probeAfter;
  }

  /**
   * What a new sequence starts from when this drafter served others before: their acceptance (the
   * drafter's, not the text's: a random draft model's is ~0 whatever the text) and probe wait; null before.
   */
  get history(): { acceptance: number; probeAfter: number } | null {
    const acceptance = this.#outcomes.rate;
    return acceptance === null ? null : { acceptance, probeAfter: this.#probeAfter };
  }

  /** Mean cost of a drafted token; null before a draft was timed. */
  get perToken(): number | null {
    return this.#tokens > 0 ? this.#ms / this.#tokens : null;
  }
}

/** Tokens a k-token draft is expected to add beyond the one a plain step gives, at acceptance `a`. */
export function expectedExtra(a: number, k: number): number {
  let sum = 0;
  let term = 1;
  for (let j = 1; j <= k; j++) sum += (term *= a);
  return sum;
}

/**
 * The draft length up to `cap` that gives a step the most expected tokens per unit of cost (ms = fixed +
 * perRow · rows + perDraft · k), at acceptance `a`; 0 when none beats the step without it by MIN_GAIN. `step` is the
 * step as planned so far: its rows and the tokens they are expected to yield (a lone sequence: one row,
 * one token). In a batch a draft's rows cost the neighbours time too, so it must earn more.
 */
export function bestDraftLength(cost: StepCostModel, a: number, cap: number, step: { rows: number; tokens: number } = { rows: 1, tokens: 1 }): number {
  const { fixed, perRow } = cost;
  const perDraft = cost.perDraft ?? 0;
  let bestK = 0;
  let bestRate = (step.tokens / (fixed + perRow * step.rows)) * MIN_GAIN;
  let expected = step.tokens;
  let term = 1;
  for (let k = 1; k <= cap; k++) {
    term *= a;
    expected += term;
    const rate = expected / (fixed + perRow * (step.rows + k) + perDraft * k);
    if (rate > bestRate) {
      bestRate = rate;
      bestK = k;
    }
  }
  return bestK;
}

export class DraftPolicy {
  readonly max: number;
  /** What the drafter's own forwards cost per token (observeDraftCost); may be shared with other policies. */
  readonly drafts: DraftCost;
  // Decayed sums for the least-squares fit of ms = a + b·rows.
  #w = 0;
  #x = 0;
  #xx = 0;
  #y = 0;
  #xy = 0;
  readonly #outcomes: AcceptanceRecord;
  /** Plain steps since the last draft, and how many to wait before probing. */
  #idle = 0;
  #probeAfter = FIRST_PROBE;
  #probing = false;

  constructor(max: number, drafts: DraftCost = new DraftCost()) {
    if (!(Number.isInteger(max) && max >= 1)) throw new RangeError(`draft length must be an integer >= 1, got ${max}`);
    this.max = max;
    this.drafts = drafts;
    // A shared drafter's record replaces the fixed prior, at the prior's weight (the text still decides soon).
    const h = drafts.history;
    const w = PRIOR_SUCCESSES + PRIOR_FAILURES;
    this.#outcomes = h ? new AcceptanceRecord(w * h.acceptance, w * (1 - h.acceptance)) : new AcceptanceRecord(PRIOR_SUCCESSES, PRIOR_FAILURES);
    if (h) this.#probeAfter = h.probeAfter;
  }

  /** Estimated acceptance of a drafted token whose predecessors were accepted. */
  get acceptance(): number {
    return Math.min(MAX_ACCEPTANCE, this.#outcomes.rate!);
  }

  /** Estimated cost of a step of `rows` rows, [fixed, per row], in the caller's unit; null before any step was timed. */
  get cost(): { fixed: number; perRow: number } | null {
    if (this.#w === 0) return null;
    const meanX = this.#x / this.#w;
    const meanY = this.#y / this.#w;
    const varX = this.#xx / this.#w - meanX * meanX;
    let perRow: number;
    // One row count seen so far (all plain steps, or all drafts of one length): split its cost by the prior.
    if (varX < 0.05) perRow = (meanY / (meanX + (1 - PRIOR_ROW_SHARE) / PRIOR_ROW_SHARE));
    else perRow = (this.#xy / this.#w - meanX * meanY) / varX;
    // Noise can tilt the fit past what is physical: a row costs something, and no more than the whole step.
    perRow = Math.min(Math.max(perRow, 0), meanY / meanX);
    return { fixed: Math.max(0, meanY - perRow * meanX), perRow };
  }

  /** Tokens to draft for the next step (0: a plain step). `limit` caps it (tokens left, context left). */
  next(limit = this.max): number {
    const cap = Math.min(this.max, limit);
    if (cap < 1) return 0;
    const k = this.best(cap);
    if (k > 0) {
      this.#probing = false;
      return k;
    }
    if (!this.canPay(cap)) return 0;
    if (++this.#idle < this.#probeAfter) return 0;
    // A probe: a short draft, to learn whether the text has started repeating.
    this.#idle = 0;
    this.#probing = true;
    return Math.min(cap, 2);
  }

  /** The draft length with the most expected tokens per unit of cost, up to `cap`; 0 when none beats a plain step. */
  best(cap = this.max): number {
    return bestDraftLength(this.costModel(), this.acceptance, cap, this.plannedStep());
  }

  /**
   * False when the drafter's timed cost is such that no length up to `cap` would pay even if every
   * drafted token were confirmed: then it is not probed (true while its cost is unknown).
   */
  canPay(cap = this.max): boolean {
    const model = this.costModel();
    return !model.perDraft || !this.drafts.settled || bestDraftLength(model, MAX_ACCEPTANCE, cap, this.plannedStep()) > 0;
  }

  /**
   * The cost model the lengths are chosen by: the timed steps' fit and the drafter's timed cost, in the
   * same unit; before any step was timed, the prior (unitless, so a drafter's ms cannot be added to it).
   */
  costModel(): StepCostModel {
    const steps = this.stepCost();
    if (!steps) return PRIOR_COST;
    return { ...steps, perDraft: this.drafts.perToken ?? 0 };
  }

  /** The fitted cost of the steps this policy's sequence runs in; null before one was timed. */
  protected stepCost(): { fixed: number; perRow: number } | null {
    return this.cost;
  }

  /** The step as planned before this policy's draft: its rows and expected tokens (alone: one and one). */
  protected plannedStep(): { rows: number; tokens: number } {
    return { rows: 1, tokens: 1 };
  }

  /** The drafter's forwards for a draft of `tokens` tokens took `ms` (same unit as observeCost). */
  observeDraftCost(tokens: number, ms: number): void {
    this.drafts.observe(tokens, ms);
  }

  /** A verify step's outcome: `drafted` tokens fed, the first `accepted` of them confirmed. */
  observe(drafted: number, accepted: number): void {
    if (drafted === 0) return;
    if (!(Number.isInteger(accepted) && accepted >= 0 && accepted <= drafted)) throw new RangeError(`observe: ${accepted} accepted of ${drafted} drafted`);
    this.#outcomes.observe(drafted, accepted);
    if (this.#probing) {
      // A probe accepted whole, or after which drafting pays, keeps probing often; one that leaves
      // drafting unprofitable (too little accepted for what rows cost here) waits twice as long next time.
      this.#probeAfter = accepted === drafted || this.best() > 0 ? FIRST_PROBE : Math.min(LAST_PROBE, this.#probeAfter * 2);
      this.#probing = false;
    }
    this.drafts.noteOutcome(drafted, accepted, this.#probeAfter);
  }

  /** A step of `rows` rows (1 + tokens drafted) took `cost` (ms, say). */
  observeCost(rows: number, cost: number): void {
    if (!(rows >= 1) || !(cost >= 0) || !Number.isFinite(cost)) return;
    // A step the OS or the collector held up says nothing about rows: one such step would tilt the fit
    // (a 10x step at one row reads as "rows are free"). Slow outliers count as at most OUTLIER x the estimate.
    const c = this.cost;
    // From the second step on: an early outlier would otherwise stay in the fit for dozens of steps.
    if (c) cost = Math.min(cost, OUTLIER * (c.fixed + c.perRow * rows));
    this.#w = this.#w * COST_DECAY + 1;
    this.#x = this.#x * COST_DECAY + rows;
    this.#xx = this.#xx * COST_DECAY + rows * rows;
    this.#y = this.#y * COST_DECAY + cost;
    this.#xy = this.#xy * COST_DECAY + rows * cost;
  }
}
