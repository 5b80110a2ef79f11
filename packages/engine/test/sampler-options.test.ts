/**
 * The sampling options llama-server and Ollama offer, each checked against its formula on logits:
 * what adjust() does to a logit, which candidates the cuts leave, and that draws follow the weights.
 */
import { describe, expect, it } from 'vitest';
import { Sampler } from '../src/index.js';

const softmax = (l: number[], t = 1) => {
  const m = Math.max(...l);
  const e = l.map((x) => Math.exp((x - m) / t));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
};

const logits = [2.0, -1.0, 0.5, 3.0, -0.25, 1.0];

describe('logit_bias', () => {
  it('adds the bias to the named ids and leaves the caller’s logits alone', () => {
    const s = new Sampler({ logitBias: { 1: 5, 3: -2.5 } });
    const out = Array.from(s.adjust(Float32Array.from(logits)));
    expect(out).toEqual(logits.map((l, i) => l + (i === 1 ? 5 : i === 3 ? -2.5 : 0)));
    // Greedy picks the biased id (1: -1 + 5 = 4 beats 3's 0.5 and 0's 2).
    const input = Float32Array.from(logits);
    expect(s.sample(input)).toBe(1);
    expect(Array.from(input)).toEqual(logits);
  });

  it('a bias on an id outside the vocabulary is an error naming it', () => {
    expect(() => new Sampler({ logitBias: { 99: 1 } }).sample(logits)).toThrow(/token 99/);
  });
});

describe('repeat, frequency and presence penalties', () => {
  it('repeat divides a positive logit and multiplies a negative one, for tokens in the window only', () => {
    // Window of 3 over the prompt [0, 3, 1, 4, 1]: 3, 1 (twice)... only [1, 4, 1] are in it.
    const s = new Sampler({ repeatPenalty: 1.5, repeatLastN: 3 }, [0, 3, 1, 4, 1]);
    expect(s.window).toEqual([1, 4, 1]);
    const out = Array.from(s.adjust(logits));
    const want = logits.map((l, i) => ([1, 4].includes(i) ? (l <= 0 ? l * 1.5 : l / 1.5) : l));
    out.forEach((v, i) => expect(v).toBeCloseTo(want[i], 6));
  });

  it('frequency subtracts once per occurrence and presence once per token present', () => {
    const s = new Sampler({ frequencyPenalty: 0.4, presencePenalty: 0.7, repeatLastN: 64 }, [3, 3, 3, 0]);
    const out = Array.from(s.adjust(logits));
    const counts: Record<number, number> = { 3: 3, 0: 1 };
    const want = logits.map((l, i) => (counts[i] ? l - counts[i] * 0.4 - 0.7 : l));
    out.forEach((v, i) => expect(v).toBeCloseTo(want[i], 6));
  });

  it('the window follows the sequence: each sampled token joins, the oldest leaves', () => {
    const s = new Sampler({ repeatPenalty: 100, repeatLastN: 2 }, [3]);
    // Greedy: 3 is penalised (3/100), so 0 wins; then 0 and 3 are both in the window: 5 (1.0) wins;
    // then the window is [0, 5] and 3 is back to 3.0.
    expect([s.sample(logits), s.sample(logits), s.sample(logits)]).toEqual([0, 5, 3]);
    expect(s.window).toEqual([5, 3]);
  });

  it('a window of 0 turns the penalties off', () => {
    const s = new Sampler({ repeatPenalty: 2, frequencyPenalty: 1, repeatLastN: 0 }, [3, 3]);
    expect(s.adjust(logits)).toBe(logits);
    expect(s.sample(logits)).toBe(3);
  });
});

describe('probability cuts', () => {
  it('min_p keeps the tokens at least min_p times as likely as the most likely (at the temperature)', () => {
    const t = 0.8;
    const p = softmax(logits, t);
    const pmax = Math.max(...p);
    for (const minP of [0.05, 0.2, 0.5, 0.99]) {
      const { ids } = new Sampler({ temperature: t, minP }).candidates(logits);
      const want = p.map((q, i) => [q, i] as const).filter(([q]) => q >= minP * pmax).sort((a, b) => b[0] - a[0]).map(([, i]) => i);
      expect(ids).toEqual(want);
    }
  });

  it('typical_p keeps the tokens whose surprisal is closest to the entropy until their mass reaches p', () => {
    const p = softmax(logits);
    const h = -p.reduce((a, q) => a + q * Math.log(q), 0);
    const order = p.map((_, i) => i).sort((a, b) => Math.abs(-Math.log(p[a]) - h) - Math.abs(-Math.log(p[b]) - h));
    for (const typicalP of [0.2, 0.5, 0.9]) {
      const want: number[] = [];
      let mass = 0;
      for (const i of order) {
        want.push(i);
        mass += p[i];
        if (mass >= typicalP) break;
      }
      const { ids } = new Sampler({ temperature: 1, typicalP }).candidates(logits);
      expect(new Set(ids)).toEqual(new Set(want));
    }
  });

  it('the cuts compose (top-k, then typical, top-p, min-p) and always leave one', () => {
    const { ids } = new Sampler({ temperature: 1, topK: 4, topP: 0.01, minP: 0.9 }).candidates(logits);
    expect(ids).toEqual([3]);
    const wide = new Sampler({ temperature: 1, topK: 4 }).candidates(logits);
    expect(wide.ids).toEqual([3, 0, 5, 2]);
  });

  it('draws follow the candidates’ weights', () => {
    const s = new Sampler({ temperature: 1, minP: 0.3, seed: 7 });
    const { ids, weights } = s.candidates(logits);
    const total = weights.reduce((a, b) => a + b, 0);
    const n = 20000;
    const seen = new Map<number, number>();
    for (let i = 0; i < n; i++) {
      const id = s.sample(logits);
      seen.set(id, (seen.get(id) ?? 0) + 1);
    }
    expect([...seen.keys()].every((id) => ids.includes(id))).toBe(true);
    ids.forEach((id, i) => expect((seen.get(id) ?? 0) / n).toBeCloseTo(weights[i] / total, 1));
  });
});

describe('seed', () => {
  const run = (seed: number, prompt: number[]) => {
    const s = new Sampler({ temperature: 1.2, topK: 5, topP: 0.95, minP: 0.01, typicalP: 0.98, repeatPenalty: 1.3, frequencyPenalty: 0.2, presencePenalty: 0.1, repeatLastN: 8, logitBias: { 2: 0.5 }, seed }, prompt);
    return Array.from({ length: 40 }, () => s.sample(logits));
  };

  it('the same seed and request give the same tokens; another seed, others', () => {
    expect(run(11, [3, 0])).toEqual(run(11, [3, 0]));
    expect(run(11, [3, 0])).not.toEqual(run(12, [3, 0]));
  });

  it('the prompt’s tail is part of the request: a sampler given only the window’s tokens agrees', () => {
    // What a sampling rank of another stage is sent: the last repeatLastN prompt tokens, not the prompt.
    const prompt = [5, 1, 4, 4, 2, 0, 3, 3, 1, 5, 0, 2];
    expect(run(3, prompt)).toEqual(run(3, prompt.slice(-8)));
  });

  it('refuses values outside their ranges, by name', () => {
    expect(() => new Sampler({ minP: 1.5 })).toThrow(/minP/);
    expect(() => new Sampler({ typicalP: 0 })).toThrow(/typicalP/);
    expect(() => new Sampler({ repeatPenalty: 0 })).toThrow(/repeatPenalty/);
    expect(() => new Sampler({ repeatLastN: -1 })).toThrow(/repeatLastN/);
    expect(() => new Sampler({ frequencyPenalty: NaN })).toThrow(/frequencyPenalty/);
  });
});
