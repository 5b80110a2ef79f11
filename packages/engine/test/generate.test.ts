/** Sampling (seeded, greedy, top-k, top-p), stop tokens, stop strings and text streaming. */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { argmax, generate, loadInProcessModel, loadTokenizer, Sampler, TextStream } from '../src/index.js';
import { writeRandomModel } from '../src/testing/index.js';
import { Prng } from '../src/numeric/prng.js';
import { tempDir } from './helpers.js';

const tmp = tempDir('generate');
afterAll(tmp.cleanup);
const info = writeRandomModel(join(tmp.dir, 'm'), { variant: 'llama', numLayers: 2, seed: 9 });
const model = loadInProcessModel(info.dir);
const tokenizer = loadTokenizer(info.dir);
const prompt = tokenizer.encode('The orchard ');

describe('Sampler', () => {
  const logits = Float32Array.from([0.5, 2, -1, 2, 1.9, 0]);

  it('temperature 0 is argmax with the lowest id on ties', () => {
    expect(new Sampler({ temperature: 0 }).sample(logits)).toBe(1);
    expect(argmax(logits)).toBe(1);
  });

  it('same seed, same draws; other seed, other draws', () => {
    const draw = (seed: number) => {
      const s = new Sampler({ temperature: 1, seed });
      return Array.from({ length: 64 }, () => s.sample(logits));
    };
    expect(draw(5)).toEqual(draw(5));
    expect(draw(5)).not.toEqual(draw(6));
  });

  it('top-k keeps only the k most likely tokens', () => {
    const s = new Sampler({ temperature: 5, topK: 3, seed: 1 });
    const seen = new Set(Array.from({ length: 500 }, () => s.sample(logits)));
    expect(seen).toEqual(new Set([1, 3, 4]));
  });

  it('top-k selects exactly the k best ids of a large vocabulary (ties to the lower id)', () => {
    const rng = new Prng(9);
    const big = Float32Array.from({ length: 5000 }, () => Math.round(rng.symmetric(50)));
    const k = 37;
    const sorted = Array.from(big.keys()).sort((a, b) => big[b] - big[a] || a - b);
    const s = new Sampler({ temperature: 1e-3, topK: k, seed: 1 });
    // At a tiny temperature, only the top id (or ids tied with it) can be drawn; at a huge one, any of the k.
    expect(big[s.sample(big)]).toBe(big[sorted[0]]);
    const hot = new Sampler({ temperature: 1e6, topK: k, seed: 2 });
    const seen = new Set(Array.from({ length: 3000 }, () => hot.sample(big)));
    expect(seen).toEqual(new Set(sorted.slice(0, k)));
  });

  it('top-p keeps the smallest set reaching p', () => {
    // p(1) = p(3) ≈ 0.31 and p(4) ≈ 0.28 at T=1: top-p 0.5 keeps {1, 3}.
    const s = new Sampler({ temperature: 1, topP: 0.5, seed: 3 });
    const seen = new Set(Array.from({ length: 500 }, () => s.sample(logits)));
    expect(seen).toEqual(new Set([1, 3]));
  });

  it('draws in proportion to softmax(logits / T)', () => {
    const s = new Sampler({ temperature: 1, seed: 42 });
    const two = Float32Array.from([0, Math.log(3)]);
    let ones = 0;
    const N = 4000;
    for (let i = 0; i < N; i++) ones += s.sample(two);
    expect(ones / N).toBeGreaterThan(0.72);
    expect(ones / N).toBeLessThan(0.78);
  });

  it('rejects bad options with the option named', () => {
    expect(() => new Sampler({ temperature: -1 })).toThrow(/temperature/);
    expect(() => new Sampler({ topP: 0 })).toThrow(/topP/);
    expect(() => new Sampler({ topK: 1.5 })).toThrow(/topK/);
  });
});

describe('generate', () => {
  it('is reproducible with a seed and changes with it', async () => {
    const run = (seed: number) => generate(model, prompt, { temperature: 1, seed, maxTokens: 24, stopTokenIds: [] });
    const a = await run(1);
    expect(a.tokens).toHaveLength(24);
    expect((await run(1)).tokens).toEqual(a.tokens);
    expect((await run(2)).tokens).not.toEqual(a.tokens);
  });

  it('greedy generation equals argmax over the logits step by step', async () => {
    const r = await generate(model, prompt, { maxTokens: 10, stopTokenIds: [] });
    const s = model.newSession();
    let logits = await s.forward(prompt);
    const expected: number[] = [];
    for (let i = 0; i < 10; i++) {
      expected.push(argmax(logits));
      logits = await s.forward([expected[i]]);
    }
    expect(r.tokens).toEqual(expected);
  });

  it('stops at a stop token id and keeps it', async () => {
    const free = await generate(model, prompt, { maxTokens: 16, stopTokenIds: [] });
    const stopId = free.tokens[5];
    const first = free.tokens.indexOf(stopId);
    const r = await generate(model, prompt, { maxTokens: 16, stopTokenIds: [stopId] });
    expect(r.finishReason).toBe('stop');
    expect(r.tokens).toEqual(free.tokens.slice(0, first + 1));
  });

  it('stops at a stop string, cuts it, and streams exactly the final text', async () => {
    // Sample printable ASCII only, so the text is easy to cut: logits of other ids are masked by a wrapper.
    const ascii = {
      ...model,
      config: model.config,
      maxSeqLen: model.maxSeqLen,
      newSession: (cap?: number) => {
        const s = model.newSession(cap);
        return {
          get length() {
            return s.length;
          },
          async forward(t: ArrayLike<number>) {
            const l = Float32Array.from(await s.forward(t));
            for (let i = 0; i < l.length; i++) if (i < 97 || i > 122) l[i] = -Infinity;
            return l;
          },
        };
      },
    };
    const free = await generate(ascii, prompt, { maxTokens: 30, tokenizer, stopTokenIds: [] });
    expect(free.text).toMatch(/^[a-z]{30}$/);
    const stop = free.text.slice(12, 15);
    const cut = free.text.indexOf(stop);
    const pieces: string[] = [];
    const r = await generate(ascii, prompt, { maxTokens: 30, tokenizer, stopTokenIds: [], stopStrings: [stop], onText: (t) => pieces.push(t) });
    expect(r.finishReason).toBe('stop');
    expect(r.text).toBe(free.text.slice(0, cut));
    expect(pieces.join('')).toBe(r.text);
    expect(r.tokens.length).toBe(cut + stop.length);
  });
});

describe('ModelShard', () => {
  it('refuses overlapping forward calls instead of corrupting its run state', async () => {
    const shard = model.stages[0][0];
    const a = shard.forward({ tokens: [1, 2] }, shard.newCache(8));
    await expect(shard.forward({ tokens: [3] }, shard.newCache(8))).rejects.toThrow(/already running/);
    await a;
    await expect(shard.forward({ tokens: [3] }, shard.newCache(8))).resolves.toBeInstanceOf(Float32Array);
  });
});

describe('TextStream', () => {
  const bytes = (ids: number[]) => Buffer.from(ids).toString('utf8');

  it('holds back incomplete UTF-8 characters', () => {
    const s = new TextStream(bytes);
    const out = [...Buffer.from('a🍎b')].map((b) => s.push(b).text);
    expect(out).toEqual(['a', '', '', '', '🍎', 'b']);
  });

  it('holds back a possible stop-string prefix and releases it when it is not one', () => {
    const s = new TextStream(bytes, ['END']);
    const out = [...Buffer.from('xEN')].map((b) => s.push(b).text);
    expect(out).toEqual(['x', '', '']);
    expect(s.push('Y'.charCodeAt(0))).toEqual({ text: 'ENY', stopped: false });
    expect(s.push('E'.charCodeAt(0)).text).toBe('');
    s.push('N'.charCodeAt(0));
    expect(s.push('D'.charCodeAt(0))).toEqual({ text: '', stopped: true });
    expect(s.text).toBe('xENY');
  });
});
