/**
 * Prompt-lookup speculative decoding (generate's promptLookup): drafts from the context are verified in
 * one forward of every row's logits and rejected rows are rewound; the output equals plain decoding —
 * greedy and seeded sampling, random models of several architectures in every split, and the bundled
 * demo model — and the acceptance rate is reported.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { argmax, DraftLength, draftFromContext, generate, loadInProcessModel, loadTokenizer, pickVerified, Sampler, type InProcessModel, type InProcessOptions } from '../src/index.js';
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
      const fast = await generate(model, PROMPT, { maxTokens: 24, stopTokenIds: [], ...sampling, promptLookup: { draftTokens: 5, minNgram: 1 } });
      expect(fast.tokens).toEqual(plain.tokens);
      expect(fast.speculation!.drafted).toBeGreaterThan(0);
      expect(fast.speculation!.accepted).toBeLessThanOrEqual(fast.speculation!.drafted);
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
  const b = await generate(model, prompt, { maxTokens: 48, stopTokenIds: [], promptLookup: true });
  expect(b.tokens).toEqual(a.tokens);
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
    const fast = await generate(model, prompt, { maxTokens: 30, promptLookup: true });
    expect(fast.tokens).toEqual(plain.tokens);
    const { drafted, accepted } = fast.speculation!;
    console.log(`demo model: drafted ${drafted}, accepted ${accepted} (${((100 * accepted) / Math.max(1, drafted)).toFixed(0)}%), ${fast.tokens.length} tokens`);
    expect(accepted).toBeGreaterThan(0);
  });
});

describe('pickVerified and DraftLength (shared by generate and the runners)', () => {
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

  it('the draft length grows while drafts are accepted whole, shrinks after a partial one, and pauses drafting after outright misses', () => {
    const d = new DraftLength(4);
    expect(d.next()).toBe(4);
    d.observe(4, 1);
    expect(d.next()).toBe(2);
    d.observe(2, 2);
    expect(d.next()).toBe(3);
    d.observe(3, 0);
    // Paused 1 step, then 3 after a second miss, 7 after a third.
    expect([d.next(), d.next()]).toEqual([0, 1]);
    d.observe(1, 0);
    expect([d.next(), d.next(), d.next(), d.next()]).toEqual([0, 0, 0, 1]);
    d.observe(1, 0);
    expect(Array.from({ length: 8 }, () => d.next())).toEqual([0, 0, 0, 0, 0, 0, 0, 1]);
    d.observe(1, 1); // an accepted token resets the pauses
    expect(d.next()).toBe(2);
    d.observe(2, 0);
    expect([d.next(), d.next()]).toEqual([0, 1]);
    expect(() => new DraftLength(0)).toThrow(/draft length/);
  });
});

