/**
 * The serving side's bookkeeping for lending: which network jobs run, how many local requests run
 * or wait, each peer's recent starts; it applies the policy (lending.ts) to each ticket and preempts
 * network jobs the moment local demand needs their slots. No I/O; the clock is injected.
 */
import { admitJob, DEFAULT_LENDING, jobsToPreempt, RateWindow, type LendingPolicy } from './lending.js';
import type { LendDecision } from './job-protocol.js';
import type { Ticket } from './receipts.js';

export interface LentJob {
  job: string;
  peer: string;
  model: string;
  startedAt: number;
}

export interface LenderDeps {
  now(): number;
  /** Request slots of the pod now (ready instances x sequences each runs at once). */
  capacity(): number;
  /** Weights of a model in bytes, when known. */
  modelBytes(model: string): number | null;
  /** Told when a network job is stopped for local demand. */
  onPreempt?(job: LentJob): void;
}

export class Lender {
  #policy: LendingPolicy;
  readonly #deps: LenderDeps;
  #localActive = 0;
  /** Running network jobs, oldest first (the newest are preempted first). */
  #jobs: { info: LentJob; abort: AbortController }[] = [];
  #rate = new RateWindow();
  #served = 0;
  #refused = 0;
  #preempted = 0;

  constructor(policy: LendingPolicy = DEFAULT_LENDING, deps: LenderDeps) {
    this.#policy = policy;
    this.#deps = deps;
  }

  get policy(): LendingPolicy {
    return this.#policy;
  }

  /** A new policy applies at once: turning lending off (or shrinking it) stops what no longer fits. */
  setPolicy(policy: LendingPolicy): void {
    this.#policy = policy;
    if (!policy.enabled) this.#preempt(this.#jobs.length, 'lending was turned off');
    else this.#yieldToLocal();
  }

  /** A local request began; call the returned function when it ends. Preempts network jobs if needed. */
  localStarted(): () => void {
    this.#localActive++;
    this.#yieldToLocal();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.#localActive--;
    };
  }

  #yieldToLocal(): void {
    const n = jobsToPreempt(this.#policy, { localActive: this.#localActive, capacity: this.#deps.capacity(), networkActive: this.#jobs.length });
    if (n > 0) this.#preempt(n, 'local demand');
  }

  #preempt(n: number, why: string): void {
    for (const j of this.#jobs.slice(-n).reverse()) {
      this.#preempted++;
      j.abort.abort(new Error(`preempted: ${why}`));
      this.#deps.onPreempt?.(j.info);
    }
  }

  /** The lending decision for a checked ticket at `pricePer1M` (the price this pod asks now). */
  decide(ticket: Ticket, pricePer1M: number): LendDecision {
    const now = this.#deps.now();
    if (ticket.pricePer1M < pricePer1M) {
      this.#refused++;
      return { ok: false, code: 'price', message: `this pod asks ${pricePer1M} credits per 1M tokens; the ticket offers ${ticket.pricePer1M}` };
    }
    const decision = admitJob(
      this.#policy,
      { peer: ticket.requester, model: ticket.model, maxTokens: ticket.maxTokens, modelBytes: this.#deps.modelBytes(ticket.model) },
      { localActive: this.#localActive, capacity: this.#deps.capacity(), networkActive: this.#jobs.length, peerJobsLastMinute: this.#rate.count(ticket.requester, now) },
    );
    if (!decision.ok) {
      this.#refused++;
      return decision;
    }
    this.#rate.record(ticket.requester, now);
    const entry = { info: { job: ticket.job, peer: ticket.requester, model: ticket.model, startedAt: now }, abort: new AbortController() };
    this.#jobs.push(entry);
    let released = false;
    return {
      ok: true,
      signal: entry.abort.signal,
      release: () => {
        if (released) return;
        released = true;
        this.#jobs = this.#jobs.filter((j) => j !== entry);
        if (!entry.abort.signal.aborted) this.#served++;
      },
    };
  }

  get localActive(): number {
    return this.#localActive;
  }

  stats() {
    return { localActive: this.#localActive, running: this.#jobs.map((j) => ({ ...j.info })), served: this.#served, refused: this.#refused, preempted: this.#preempted };
  }
}
