/**
 * Batched decode (ModelShard.forwardBatch through InProcessModel.forwardBatch): B = 1..8 sequences of
 * different prompt lengths, joining at different steps (their prompts prefilled in the same step as
 * the others' decode rows) and leaving after different token counts, each get exactly the greedy
 * tokens they get alone, with logits within f32 reordering error — unsplit, pipeline 2 and tensor 2,
 * on the reference and WASM backends, for plain, latent-attention (MLA) and sink (gpt-oss) models;
 * f16 weights on the WASM backend (its small-batch kernels) bit for bit.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createWasmBackend, loadInProcessModel, type BatchStep, type InProcessModel, type InProcessOptions, type Session } from '../src/index.js';
import { writeRandomModel, type RandomModelOptions } from '../src/testing/index.js';
import { argmaxOf, maxAbsDiff, tempDir } from './helpers.js';

const tmp = tempDir('batch');
const models: InProcessModel[] = [];
afterAll(() => {
  models.forEach((m) => m.dispose());
  tmp.cleanup();
});

interface Plan {
  prompt: number[];
  /** Step at which the sequence's prompt enters the batch. */
  join: number;
  /** Tokens it generates before leaving. */
  tokens: number;
}

/** Sequence i of B: prompts of 3..13 tokens, joining at steps 0..2, leaving after 3..6 tokens. */
function plans(B: number): Plan[] {
  return Array.from({ length: B }, (_, i) => ({
    prompt: Array.from({ length: 3 + ((i * 5) % 11) }, (_, j) => (i * 31 + j * 17 + 3) % 256),
    join: i % 3,
    tokens: 3 + ((i * 2) % 4),
  }));
}

interface Trace {
  tokens: number[];
  logits: Float32Array[];
}

async function alone(model: InProcessModel, p: Plan): Promise<Trace> {
  const s = model.newSession(64);
  const logits = [Float32Array.from(await s.forward(p.prompt))];
  const tokens: number[] = [];
  while (tokens.length < p.tokens) {
    tokens.push(argmaxOf(logits[logits.length - 1]));
    if (tokens.length < p.tokens) logits.push(Float32Array.from(await s.forward([tokens[tokens.length - 1]])));
  }
  s.dispose?.();
  return { tokens, logits };
}

/** Every sequence in one loop of batched steps: joins prefill their prompt, the others decode one token. */
async function together(model: InProcessModel, ps: Plan[]): Promise<{ traces: Trace[]; widest: number }> {
  const traces: Trace[] = ps.map(() => ({ tokens: [], logits: [] }));
  const sessions: (Session | null)[] = ps.map(() => null);
  let widest = 0;
  for (let step = 0; traces.some((t, i) => t.tokens.length < ps[i].tokens); step++) {
    const batch: (BatchStep & { i: number })[] = [];
    ps.forEach((p, i) => {
      const t = traces[i];
      if (t.tokens.length >= p.tokens) {
        // Left: its slot is freed.
        sessions[i]?.dispose?.();
        sessions[i] = null;
        return;
      }
      if (step < p.join) return;
      if (!sessions[i]) {
        sessions[i] = model.newSession(64);
        batch.push({ i, session: sessions[i]!, tokens: p.prompt });
      } else batch.push({ i, session: sessions[i]!, tokens: [t.tokens[t.tokens.length - 1]] });
    });
    if (batch.length === 0) continue;
    widest = Math.max(widest, batch.length);
    const out = await model.forwardBatch(batch);
    batch.forEach(({ i }, k) => {
      traces[i].logits.push(out[k]);
      traces[i].tokens.push(argmaxOf(out[k]));
    });
  }
  sessions.forEach((s) => s?.dispose?.());
  return { traces, widest };
}

/** B = 1..8 of plans(8) together: each sequence gets its greedy tokens alone, logits within `tolerance`. */
async function batchesMatchAlone(model: InProcessModel, tolerance: number): Promise<void> {
  const all = plans(8);
  const ref: Trace[] = [];
  for (const p of all) ref.push(await alone(model, p));
  for (let B = 1; B <= 8; B++) {
    const { traces, widest } = await together(model, all.slice(0, B));
    // At step 2 every sequence has joined and none has left: all B ran in one step.
    expect(widest).toBe(B);
    traces.forEach((t, i) => {
      expect(t.tokens).toEqual(ref[i].tokens);
      t.logits.forEach((l, k) => expect(maxAbsDiff(l, ref[i].logits[k]), `B=${B} sequence ${i} step ${k}`).toBeLessThanOrEqual(tolerance));
    });
  }
}

const MODELS: [string, RandomModelOptions][] = [
  ['qwen3 (q/k norm)', { variant: 'qwen3' }],
  ['mistral sliding window', { variant: 'mistral', slidingWindow: 6, numKvHeads: 1 }],
  ['deepseek-v3 (MLA, experts)', { variant: 'deepseek-v3' }],
  ['gpt-oss (sinks)', { variant: 'gpt-oss' }],
];
const SPLITS: [string, InProcessOptions][] = [
  ['unsplit', {}],
  ['pipeline 2', { pipeline: 2 }],
  ['tensor 2', { tensor: 2 }],
];
const BACKENDS: [string, InProcessOptions][] = [
  ['reference', {}],
  ['wasm', { backend: () => createWasmBackend({ threads: 1 }) }],
];

describe.each(MODELS)('%s', (name, modelOptions) => {
  const dir = join(tmp.dir, name.replace(/[^a-z0-9]+/gi, '-'));
  writeRandomModel(dir, { seed: 5, ...modelOptions });

  describe.each(BACKENDS)('%s backend', (_b, backend) => {
    it.each(SPLITS)('%s: B = 1..8 together give each sequence its tokens alone', async (_s, split) => {
      const model = loadInProcessModel(dir, { maxBatch: 32, ...split, ...backend });
      models.push(model);
      await batchesMatchAlone(model, 1e-4);
    });
  });
});

describe('forwardBatch input checks', () => {
  const dir = join(tmp.dir, 'checks');
  writeRandomModel(dir, { variant: 'llama', seed: 2 });
  const model = loadInProcessModel(dir, { maxBatch: 8 });
  models.push(model);

  it('refuses a step over maxBatch, a session twice, an empty segment and a foreign session', async () => {
    const a = model.newSession(32);
    const b = model.newSession(32);
    await expect(model.forwardBatch([{ session: a, tokens: [1, 2, 3, 4, 5] }, { session: b, tokens: [1, 2, 3, 4] }])).rejects.toThrow(/9 tokens in one step; this model takes at most 8/);
    await expect(model.forwardBatch([{ session: a, tokens: [1] }, { session: a, tokens: [2] }])).rejects.toThrow(/a KV cache appears twice/);
    await expect(model.forwardBatch([{ session: a, tokens: [] }])).rejects.toThrow(/no tokens/);
    const other = loadInProcessModel(dir, { maxBatch: 8 });
    models.push(other);
    await expect(model.forwardBatch([{ session: other.newSession(8), tokens: [1] }])).rejects.toThrow(/another model/);
    // Nothing above advanced a cache.
    expect([a.length, b.length]).toEqual([0, 0]);
  });

  it('allLogits gives every row the logits a one-token-at-a-time run gives', async () => {
    const tokens = [9, 8, 7, 6, 5];
    const s = model.newSession(32);
    const [rows] = await model.forwardBatch([{ session: s, tokens, allLogits: true }]);
    const V = model.config.vocabSize;
    expect(rows.length).toBe(tokens.length * V);
    const one = model.newSession(32);
    for (let i = 0; i < tokens.length; i++) {
      const l = await one.forward([tokens[i]]);
      expect(maxAbsDiff(rows.subarray(i * V, (i + 1) * V), l)).toBeLessThanOrEqual(1e-5);
    }
  });
});

// Packed f16 weights on the WASM backend: a decode step of 2..8 rows runs the small-batch register
// kernels (wasm/f16tiles.ts), prompts of 9+ rows the widened-scratch path; both keep the 1-row
// kernel's arithmetic, so every sequence's logits are the ones it gets alone, bit for bit.
describe('f16 weights, wasm backend', () => {
  const dir = join(tmp.dir, 'f16');
  // hidden 84 and FFN 140: rows of 8-column chunks plus a 4-column tail; 28 k/v rows
  writeRandomModel(dir, { seed: 9, dtype: 'f16', hiddenSize: 84, intermediateSize: 140, numHeads: 6, numKvHeads: 2 });

  it('B = 1..8 together give each sequence its logits alone, bit for bit', async () => {
    const model = loadInProcessModel(dir, { maxBatch: 64, backend: () => createWasmBackend({ threads: 1 }) });
    models.push(model);
    await batchesMatchAlone(model, 0);
  });
});
