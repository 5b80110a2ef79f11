/**
 * Prompt-lookup speculative decoding (generate's promptLookup): drafts from the context are verified in
 * one forward of every row's logits and rejected rows are rewound; the output equals plain decoding —
 * greedy and seeded sampling, random models of several architectures in every split, and the bundled
 * demo model — and the acceptance rate is reported.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { argmax, DraftCost, DraftPolicy, draftFromContext, generate, loadInProcessModel, loadTokenizer, pickVerified, Sampler, type InProcessModel, type InProcessOptions } from '../src/index.js';
import { writeRandomModel, type RandomModelOptions } from '../src/testing/index.js';
import { tempDir } from './helpers.js';

const tmp = tempDir('spec');
const models: InProcessModel[] = [];
afterAll(() => {
  models.forEach((m) => m.dispose());
  tmp.cleanup();
});

describe('draftFromContext', () => {
  it('drafts what followed the latest earlier occurrence of the longest matching tail', () => {
    expect(draftFromContext([1, 2, 3, 9, 1, 2], 8)).toEqual([3, 9, 1, 2]); // draftTokens: 4
    expect(draftFromContext([1, 2, 3, 9, 1, 2], 2)).toEqual([3, 9]);
    // [5, 1, 2] (3-gram) beats the later [1, 2].
    expect(draftFromContext([5, 1, 2, 7, 1, 2, 8, 5, 1, 2], 3)).toEqual([7, 1, 2]);
    expect(draftFromContext([4, 1, 2, 7, 8, 1, 2], 3)).toEqual([7, 8, 1]);
    expect(draftFromContext([1, 2, 3], 4)).toEqual([]);
    expect(draftFromContext([1, 2, 1], 4)).toEqual([]);
    expect(draftFromContext([1, 2, 1], 4, { minNgram: 1 })).toEqual([2, 1, 2, 1]);
    expect(draftFromContext([1, 2, 1], 0)).toEqual([]);
  });

  it('past the context end the guess goes on repeating the span (a cycle drafts as far as asked)', () => {
    // Tail [7, 8] last seen at 3: followed by [9, 7, 8], then (the tail again) by 9, 7, 8, ...
    expect(draftFromContext([5, 6, 7, 8, 9, 7, 8], 7, { draftTokens: 7 })).toEqual([9, 7, 8, 9, 7, 8, 9]);
    expect(draftFromContext([3, 3, 3], 5, { draftTokens: 5 })).toEqual([3, 3, 3, 3, 3]);
    expect(draftFromContext([1, 2, 3, 9, 1, 2], 6, { draftTokens: 6 })).toEqual([3, 9, 1, 2, 3, 9]);
  });
});

const PART = Array.from({ length: 12 }, (_, i) => (i * 41 + 9) % 256);
const PROMPT = [...PART, ...PART, ...PART.slice(0, 5)];

const MODELS: [string, RandomModelOptions][] = [
  ['qwen3', { variant: 'qwen3' }],
  ['mistral sliding window', { variant: 'mistral', slidingWindow: 6, numKvHeads: 1 }],
  ['deepseek-v3 (MLA)', { variant: 'deepseek-v3' }],
];
const SPLITS: [string, InProcessOptions][] = [
  ['unsplit', {}],
  ['pipeline 2', { pipeline: 2 }],
  ['tensor 2', { tensor: 2 }],
];

describe.each(MODELS)('%s', (name, modelOptions) => {
  const dir = join(tmp.dir, name.replace(/[^a-z0-9]+/gi, '-'));
  writeRandomModel(dir, { seed: 13, ...modelOptions });
  it.each(SPLITS)('%s: output equals plain decode (greedy and seeded sampling)', async (_s, split) => {
    const model = loadInProcessModel(dir, { maxBatch: 8, ...split });
    models.push(model);
    for (const sampling of [{}, { temperature: 0.9, seed: 3 }]) {
      const plain = await generate(model, PROMPT, { maxTokens: 24, stopTokenIds: [], ...sampling });
      // Fixed drafts (every step with a match drafts 5) and the timed policy's lengths: the same tokens.
      for (const adaptive of [false, true]) {
        const fast = await generate(model, PROMPT, { maxTokens: 24, stopTokenIds: [], ...sampling, promptLookup: { draftTokens: 5, minNgram: 1, adaptive } });
        expect(fast.tokens).toEqual(plain.tokens);
        expect(fast.speculation!.drafted).toBeGreaterThan(0);
        expect(fast.speculation!.accepted).toBeLessThanOrEqual(fast.speculation!.drafted);
      }
    }
  });
});

it('a prompt holding the model\'s own continuation: same tokens, some drafts accepted', async () => {
  // A random model's continuation is arbitrary; fed its own output, it tends to repeat some of it.
  const dir = join(tmp.dir, 'cycle');
  writeRandomModel(dir, { variant: 'llama', seed: 13 });
  const model = loadInProcessModel(dir, { maxBatch: 8 });
  models.push(model);
  const plain = await generate(model, PROMPT, { maxTokens: 48, stopTokenIds: [] });
  // Prompt it with its own output twice over: the greedy continuation tends to repeat what it saw.
  const prompt = [...PROMPT, ...plain.tokens];
  const a = await generate(model, prompt, { maxTokens: 48, stopTokenIds: [] });
  // Fixed draft lengths: whether the timed policy drafts at all depends on this machine's speed.
  const b = await generate(model, prompt, { maxTokens: 48, stopTokenIds: [], promptLookup: { adaptive: false } });
  expect(b.tokens).toEqual(a.tokens);
  expect((await generate(model, prompt, { maxTokens: 48, stopTokenIds: [], promptLookup: true })).tokens).toEqual(a.tokens);
  console.log(`random llama: drafted ${b.speculation!.drafted}, accepted ${b.speculation!.accepted}`);
  expect(b.speculation!.accepted).toBeGreaterThan(0);
});

const bundled = join(import.meta.dirname, '../../../models/orchard-demo');
describe.skipIf(!existsSync(join(bundled, 'model.safetensors')))('bundled demo model', () => {
  it('prompt lookup on a repetitive prompt gives the plain tokens and accepts drafts', async () => {
    const tokenizer = loadTokenizer(bundled);
    const model = loadInProcessModel(bundled, { maxBatch: 8 });
    models.push(model);
    const verse = 'Let there be light: and there was light. ';
    const prompt = tokenizer.encode(verse + verse + 'Let');
    expect(prompt.length + 30).toBeLessThanOrEqual(model.maxSeqLen);
    const plain = await generate(model, prompt, { maxTokens: 30 });
    const fast = await generate(model, prompt, { maxTokens: 30, promptLookup: { adaptive: false } });
    expect(fast.tokens).toEqual(plain.tokens);
    expect((await generate(model, prompt, { maxTokens: 30, promptLookup: true })).tokens).toEqual(plain.tokens);
    const { drafted, accepted } = fast.speculation!;
    console.log(`demo model: drafted ${drafted}, accepted ${accepted} (${((100 * accepted) / Math.max(1, drafted)).toFixed(0)}%), ${fast.tokens.length} tokens`);
    expect(accepted).toBeGreaterThan(0);
  });
});

describe('pickVerified (shared by generate and the runners)', () => {
  const softmax = (l: number[]) => {
    const e = l.map((x) => Math.exp(x - Math.max(...l)));
    const z = e.reduce((a, b) => a + b, 0);
    return e.map((x) => x / z);
  };

  it('picks row by row while the tokens agree with the draft, and says how many rows hold confirmed tokens', async () => {
    // Greedy rows: row j's argmax is want[j].
    const want = [5, 6, 7, 2];
    const rows = want.map((t) => Float32Array.from({ length: 8 }, (_, i) => (i === t ? 1 : 0)));
    const greedy = async (l: Float32Array) => ({ id: argmax(l) });
    const picked: number[] = [];
    const take = (p: { id: number }) => (picked.push(p.id), true);
    expect(await pickVerified((j) => rows[j], [5, 6, 7], greedy, take)).toBe(4); // all accepted, plus the row after
    expect(picked).toEqual([5, 6, 7, 2]);
    picked.length = 0;
    expect(await pickVerified((j) => rows[j], [5, 0, 7], greedy, take)).toBe(2); // rejected at the second
    expect(picked).toEqual([5, 6]);
    picked.length = 0;
    expect(await pickVerified((j) => rows[j], [5, 6, 7], greedy, (p) => (picked.push(p.id), picked.length < 2))).toBe(2); // the sequence ended
    expect(picked).toEqual([5, 6]);
    expect(await pickVerified((j) => rows[j], [], greedy, take)).toBe(1);
  });

  it('sampling: the draft token is kept with probability p(t), otherwise the token follows p without t, renormalised', async () => {
    const logits = [0.3, 1.2, -0.5, 0.9, 0.1];
    const p = softmax(logits);
    const row = Float32Array.from(logits);
    const draft = 3;
    const sampler = new Sampler({ temperature: 1, seed: 42 });
    const N = 20000;
    const counts = new Array(logits.length).fill(0);
    for (let n = 0; n < N; n++) {
      let first = -1;
      await pickVerified(() => row, [draft], async (l) => ({ id: sampler.sample(l) }), (x) => ((first = x.id), false));
      counts[first]++;
    }
    expect(counts[draft] / N).toBeCloseTo(p[draft], 1);
    expect(Math.abs(counts[draft] / N - p[draft])).toBeLessThan(0.015);
    const rejected = N - counts[draft];
    for (let i = 0; i < logits.length; i++) {
      if (i === draft) continue;
      expect(Math.abs(counts[i] / rejected - p[i] / (1 - p[draft]))).toBeLessThan(0.015);
    }
  });

});


describe('DraftPolicy (generate\'s draft lengths by expected tokens per unit of time)', () => {
  /** A policy that has seen steps costing fixed + perRow·rows and drafts accepted at rate `a` (geometric). */
  function trained(fixed: number, perRow: number, a: number, max = 16): DraftPolicy {
    const p = new DraftPolicy(max);
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let i = 0; i < 200; i++) {
      const rows = 1 + (i % 5) * 2;
      p.observeCost(rows, fixed + perRow * rows);
      // Ten tokens drafted; each is confirmed with probability a while its predecessors were.
      let accepted = 0;
      while (accepted < 10 && rand() < a) accepted++;
      p.observe(10, accepted);
    }
    return p;
  }

  it('fits a step\'s cost as fixed + per-row from the timed steps', () => {
    const c = trained(0.2, 0.1, 0.5).cost!;
    expect(c.fixed).toBeCloseTo(0.2, 6);
    expect(c.perRow).toBeCloseTo(0.1, 6);
    expect(new DraftPolicy(4).cost).toBeNull();
  });

  it('drafts long when rows are cheap and drafts are accepted, short or not at all when rows cost nearly a step', () => {
    // GPU-like: rows almost free, high acceptance: the longest draft allowed.
    expect(trained(1, 0.01, 0.9).best()).toBe(16);
    // CPU demo model at short context: a row is ~0.55 of a step. High acceptance still pays, a little.
    const cpu = trained(0.13, 0.16, 0.9);
    expect(cpu.best()).toBeGreaterThan(0);
    expect(cpu.best()).toBeLessThan(16);
    // Low acceptance on the same costs: no draft beats a plain step.
    expect(trained(0.13, 0.16, 0.3).best()).toBe(0);
    // Long context: a row costs as much as a step; nothing pays unless drafts are near certain.
    expect(trained(0.02, 0.5, 0.8).best()).toBe(0);
    // The cap (tokens or context left) is honoured.
    expect(trained(1, 0.01, 0.9).next(3)).toBe(3);
  });

  it('the expected-rate choice is the best k by brute force', () => {
    for (const [fixed, perRow, a] of [[0.3, 0.1, 0.8], [0.1, 0.2, 0.95], [0.5, 0.05, 0.6]]) {
      const p = trained(fixed, perRow, a);
      const est = p.acceptance;
      const rate = (k: number) => Array.from({ length: k + 1 }, (_, i) => est ** i).reduce((x, y) => x + y, 0) / (fixed + perRow * (k + 1));
      const k = p.best();
      const brute = Array.from({ length: 17 }, (_, i) => i).reduce((b, i) => (rate(i) > rate(b) ? i : b), 0);
      // best() demands a 3% gain over a plain step before drafting at all.
      if (rate(brute) > rate(0) * 1.03) expect(k).toBe(brute);
      else expect(k).toBe(0);
    }
  });

  it('while drafting does not pay it probes now and then, less often after probes that find nothing', () => {
    const p = trained(0.02, 0.5, 0.1);
    const gaps: number[] = [];
    let since = 0;
    for (let step = 0; step < 200 && gaps.length < 5; step++) {
      const k = p.next();
      since++;
      if (k > 0) {
        expect(k).toBeLessThanOrEqual(2);
        gaps.push(since);
        since = 0;
        p.observe(k, 0);
      }
    }
    expect(gaps).toEqual([4, 8, 16, 32, 32]);
    // A probe that is accepted brings drafting back once the acceptance estimate recovers.
    const q = trained(0.13, 0.16, 0.3);
    for (let i = 0; i < 40; i++) {
      const k = q.next();
      if (k > 0) q.observe(k, k);
    }
    expect(q.best()).toBeGreaterThan(0);
  });

  it('a step held up by the OS or the collector does not tilt the cost fit', () => {
    const p = trained(0.13, 0.16, 0.5);
    const before = p.cost!;
    p.observeCost(1, 4); // ~14x a one-row step
    const after = p.cost!;
    expect(after.perRow).toBeGreaterThan(before.perRow * 0.8);
    expect(after.fixed + after.perRow).toBeLessThan((before.fixed + before.perRow) * 1.1);
    // Nor as the second step timed: a 5-row verify held up 20x, then steps as they are.
    const early = new DraftPolicy(16);
    early.observeCost(3, 0.6);
    early.observeCost(5, 13);
    for (let i = 0; i < 30; i++) early.observeCost(i % 3 === 0 ? 3 : 1, i % 3 === 0 ? 0.6 : 0.25);
    expect(early.cost!.fixed).toBeGreaterThan(0.05);
    expect(early.cost!.perRow).toBeLessThan(0.3);
  });

  /**
   * A decode run on a fake clock: a step of r rows costs fixed + perRow·r, each drafted token perDraft
   * more (the drafter's forwards, timed apart as a driver does), each drafted token is confirmed with
   * probability `a` while its predecessors were. Returns tokens per unit of fake time, and tokens drafted.
   */
  function fakeRun(o: { fixed: number; perRow: number; perDraft: number; a: number; steps?: number; max?: number }) {
    const p = new DraftPolicy(o.max ?? 8);
    let seed = 11;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    let clock = 0;
    let tokens = 0;
    let drafted = 0;
    for (let i = 0; i < (o.steps ?? 300); i++) {
      const k = p.next();
      if (k > 0) {
        const d0 = clock;
        clock += o.perDraft * k;
        p.observeDraftCost(k, clock - d0);
      }
      const c0 = clock;
      clock += o.fixed + o.perRow * (k + 1);
      p.observeCost(k + 1, clock - c0);
      let accepted = 0;
      while (accepted < k && rand() < o.a) accepted++;
      p.observe(k, accepted);
      tokens += accepted + 1;
      drafted += k;
    }
    return { rate: tokens / clock, drafted };
  }

  it('counts the drafter\'s own cost: a draft as slow as the target is turned off for good, a cheap one still drafts', () => {
    const plain = 1 / (0.7 + 0.3);
    // The target as its own draft: every token confirmed, but each costs a whole step. After the first
    // draft is timed, no length pays even at full acceptance: no probes either.
    const self = fakeRun({ fixed: 0.7, perRow: 0.3, perDraft: 1, a: 1 });
    expect(self.rate / plain).toBeGreaterThan(0.97);
    // Its first draft (on the prior) and one probe (a second timing, so one slow proposal cannot decide).
    expect(self.drafted).toBeLessThanOrEqual(8 + 2);
    // The same rows with a drafter at a tenth of a step per token, 80% accepted: drafting pays.
    const small = fakeRun({ fixed: 0.7, perRow: 0.3, perDraft: 0.1, a: 0.8 });
    expect(small.rate / plain).toBeGreaterThan(1.2);
    // Free drafts (prompt lookup's cost is in its step) at the same acceptance pay more than the costed one.
    expect(fakeRun({ fixed: 0.7, perRow: 0.3, perDraft: 0, a: 0.8 }).rate).toBeGreaterThan(small.rate);
    // A drafter that would pay only if it were right more often keeps being probed (acceptance may rise).
    const costly = new DraftPolicy(8);
    for (let i = 0; i < 20; i++) costly.observeCost(1 + (i % 3), 0.7 + 0.3 * (1 + (i % 3)));
    costly.observeDraftCost(4, 4 * 0.2);
    for (let i = 0; i < 10; i++) costly.observe(4, 0);
    expect(costly.best()).toBe(0);
    expect(costly.canPay()).toBe(true);
    expect(Array.from({ length: 8 }, () => costly.next()).some((k) => k > 0)).toBe(true);
    // The choice with a drafter cost is the brute-force best rate over the lengths.
    const p = new DraftPolicy(8);
    for (let i = 0; i < 20; i++) p.observeCost(1 + (i % 3), 0.7 + 0.3 * (1 + (i % 3)));
    p.observeDraftCost(3, 3 * 0.15);
    for (let i = 0; i < 10; i++) p.observe(4, 4);
    const rate = (k: number) => Array.from({ length: k + 1 }, (_, i) => p.acceptance ** i).reduce((x, y) => x + y, 0) / (0.7 + 0.3 * (k + 1) + 0.15 * k);
    const brute = Array.from({ length: 9 }, (_, i) => i).reduce((b, i) => (rate(i) > rate(b) ? i : b), 0);
    expect(brute).toBeGreaterThan(0);
    expect(p.best()).toBe(brute);
  });

  it('a shared drafter hands a new sequence its record: one that never agreed is not tried afresh, one that always did drafts at once', () => {
    const steps = (p: DraftPolicy) => {
      for (let i = 0; i < 20; i++) p.observeCost(1 + (i % 3), 0.7 + 0.3 * (1 + (i % 3)));
    };
    /** Tokens drafted over `n` steps with every draft rejected. */
    const rejected = (p: DraftPolicy, n: number) => {
      let drafted = 0;
      for (let i = 0; i < n; i++) {
        const k = p.next();
        drafted += k;
        p.observe(k, 0);
      }
      return drafted;
    };
    const useless = new DraftCost();
    useless.observe(4, 4 * 0.05); // cheap: only its acceptance keeps it off
    const first = new DraftPolicy(8, useless);
    steps(first);
    const firstDrafted = rejected(first, 100);
    const second = new DraftPolicy(8, useless);
    steps(second);
    const secondDrafted = rejected(second, 100);
    expect(second.acceptance).toBeLessThan(0.1);
    expect(secondDrafted).toBeLessThan(firstDrafted / 2);
    // A drafter whose drafts were all confirmed: the next sequence starts near its acceptance, not the prior's 0.75.
    const good = new DraftCost();
    const a = new DraftPolicy(8, good);
    for (let i = 0; i < 10; i++) a.observe(4, 4);
    expect(new DraftPolicy(8, good).acceptance).toBeGreaterThan(0.95);
    // A policy of its own (prompt lookup) starts from the fixed prior whatever others saw.
    expect(new DraftPolicy(8).acceptance).toBeCloseTo(0.75, 10);
  });

  it('a drafter held up once does not tilt its cost', () => {
    const p = new DraftPolicy(8);
    p.observeDraftCost(4, 0.4);
    p.observeDraftCost(2, 20);
    expect(p.drafts.perToken!).toBeLessThan(0.2);
    p.observeDraftCost(0, 5); // nothing drafted: says nothing
    expect(p.drafts.perToken!).toBeLessThan(0.2);
  });

  it('rejects impossible reports and lengths', () => {
    expect(() => new DraftPolicy(0)).toThrow(/draft length/);
    expect(() => new DraftPolicy(4).observe(2, 3)).toThrow(/accepted/);
  });
});
