/**
 * The batch-aware draft policy (runner/step-draft-policy.ts): alone it chooses what the engine's
 * DraftPolicy chooses; in a batch it picks the length that most raises the step's tokens per ms (brute
 * force over the lengths), so a row that slows the neighbours must earn more; sequences sharing one step
 * cost keep their own acceptance.
 */
import { describe, expect, it } from 'vitest';
import { DraftCost, DraftPolicy, expectedExtra } from '@orchard/engine';
import { SequenceDraftPolicy, StepCost } from '../../src/runner/step-draft-policy.js';

/** Feeds `n` steps of cost fixed + perRow·rows at rows 1..5 to every fit. */
function teach(n: number, fixed: number, perRow: number, ...fits: (StepCost | DraftPolicy)[]) {
  for (let i = 0; i < n; i++) {
    const rows = 1 + (i % 5);
    for (const f of fits) {
      if (f instanceof StepCost) f.observe(rows, fixed + perRow * rows);
      else f.observeCost(rows, fixed + perRow * rows);
    }
  }
}

describe('SequenceDraftPolicy', () => {
  it('alone (one row, one token in the step) it picks what the engine policy picks', () => {
    for (const [fixed, perRow] of [[1, 0.05], [1, 0.3], [0.5, 0.5], [0.2, 1]]) {
      for (const outcomes of [[4, 4], [4, 3, 4, 4], [4, 1, 4, 0], [4, 0, 4, 0, 2, 0]]) {
        const steps = new StepCost();
        const ours = new SequenceDraftPolicy(8, steps);
        const engine = new DraftPolicy(8);
        teach(12, fixed, perRow, steps, engine);
        for (let i = 0; i < outcomes.length; i += 2) {
          ours.observe(outcomes[i], outcomes[i + 1]);
          engine.observe(outcomes[i], outcomes[i + 1]);
        }
        expect(ours.nextIn({ rows: 1, tokens: 1 }, 8), `cost ${fixed} + ${perRow}/row, outcomes ${outcomes}`).toBe(engine.best(8));
      }
    }
  });

  it('in a batch it picks the length that most raises the step tokens per ms, none unless it gains 3%', () => {
    let drafts = 0;
    let plains = 0;
    for (const [fixed, perRow] of [[1, 0.02], [1, 0.1], [0.6, 0.4]]) {
      for (const batch of [1, 2, 4, 8]) {
        for (const accepted of [0, 2, 3, 4]) {
          const steps = new StepCost();
          const p = new SequenceDraftPolicy(6, steps);
          teach(30, fixed, perRow, steps);
          for (let i = 0; i < 6; i++) p.observe(4, accepted);
          const step = { rows: batch, tokens: batch };
          const k = p.nextIn(step, 6);
          const rate = (j: number) => (batch + expectedExtra(p.acceptance, j)) / (fixed + perRow * (batch + j));
          const brute = [1, 2, 3, 4, 5, 6].reduce((b, j) => (rate(j) > rate(b) ? j : b), 1);
          const want = rate(brute) > rate(0) * 1.03 ? brute : 0;
          expect(k, `cost ${fixed} + ${perRow}/row, batch ${batch}, ${accepted}/4 accepted`).toBe(want);
          if (k > 0) drafts++;
          else plains++;
        }
      }
    }
    // The grid covers both answers.
    expect(drafts).toBeGreaterThan(3);
    expect(plains).toBeGreaterThan(3);
  });

  it('a batch makes a draft harder to pay: the same acceptance and cost that pay alone do not pay beside 7 others', () => {
    const steps = new StepCost();
    teach(30, 1, 0.25, steps);
    const p = new SequenceDraftPolicy(6, steps);
    for (let i = 0; i < 6; i++) p.observe(4, 3);
    expect(p.nextIn({ rows: 1, tokens: 1 }, 6)).toBeGreaterThan(0);
    expect(p.best()).toBeGreaterThan(0);
    expect(p.nextIn({ rows: 8, tokens: 8 }, 6)).toBe(0);
  });

  it('sequences sharing a step cost keep their own acceptance', () => {
    const steps = new StepCost();
    teach(30, 1, 0.1, steps);
    const copying = new SequenceDraftPolicy(8, steps);
    const wandering = new SequenceDraftPolicy(8, steps);
    for (let i = 0; i < 8; i++) {
      copying.observe(4, 4);
      wandering.observe(4, 0);
    }
    const step = { rows: 2, tokens: 2 };
    expect(copying.nextIn(step, 8)).toBeGreaterThan(2);
    expect(wandering.nextIn(step, 8)).toBe(0);
  });

  it('a shared drafter cost (the runner\'s draft model) counts per drafted token: slow as a step it turns every sequence off, probes included', () => {
    const steps = new StepCost();
    teach(30, 0.7, 0.3, steps);
    const slow = new DraftCost();
    const cheap = new DraftCost();
    const a = new SequenceDraftPolicy(8, steps, slow);
    const b = new SequenceDraftPolicy(8, steps, slow);
    const c = new SequenceDraftPolicy(8, steps, cheap);
    for (const p of [a, b, c]) for (let i = 0; i < 8; i++) p.observe(4, 4);
    // Before the drafters were timed, all three draft (full acceptance, rows at 0.3 of a step).
    expect(a.nextIn({ rows: 1, tokens: 1 }, 8)).toBeGreaterThan(0);
    slow.observe(4, 4 * 1.0); // a whole step per token: the target as its own draft
    cheap.observe(4, 4 * 0.05);
    // One timed proposal does not turn a drafter off for good (it may have been held up): a probe still comes.
    expect(Array.from({ length: 8 }, () => b.nextIn({ rows: 1, tokens: 1 }, 8)).some((k) => k > 0)).toBe(true);
    slow.observe(2, 2 * 1.0);
    // b never drafted itself, but reads the same drafter's cost.
    for (const p of [a, b]) {
      const asked = Array.from({ length: 100 }, () => p.nextIn({ rows: 1, tokens: 1 }, 8));
      expect(asked.every((k) => k === 0)).toBe(true);
    }
    expect(c.nextIn({ rows: 1, tokens: 1 }, 8)).toBeGreaterThan(0);
    // The cheap drafter's cost still makes a batch's draft harder to pay than prompt lookup's.
    const lookup = new SequenceDraftPolicy(8, steps);
    for (let i = 0; i < 8; i++) lookup.observe(4, 4);
    expect(lookup.nextIn({ rows: 4, tokens: 4 }, 8)).toBeGreaterThanOrEqual(c.nextIn({ rows: 4, tokens: 4 }, 8));
  });

  it('add counts a draft into the step: its rows and its expected tokens', () => {
    const p = new SequenceDraftPolicy(4, new StepCost());
    const step = { rows: 3, tokens: 3 };
    p.add(step, 2);
    expect(step.rows).toBe(5);
    expect(step.tokens).toBeCloseTo(3 + p.acceptance + p.acceptance ** 2, 10);
    p.add(step, 0);
    expect(step.rows).toBe(5);
  });
});
