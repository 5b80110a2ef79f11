/**
 * The MoE step's bookkeeping (model/moe-groups.ts) against brute force: which tokens each local expert
 * runs, each token's slots in expert order, and the token-by-token sum of expert outputs, which must be
 * bit for bit the expert-by-expert accumulation it replaced (f32 after every add, -0 and zero weights too).
 */
import { describe, expect, it } from 'vitest';
import { ExpertGroups, combineExperts } from '../../src/model/moe-groups.js';
import { Prng } from '../../src/numeric/prng.js';

/** Deterministic uniform [0, 1) generator (the engine's mulberry32). */
function rng(seed: number): () => number {
  const p = new Prng(seed);
  return () => p.next();
}

/** n tokens' k distinct expert ids each (in routing order, not sorted) and their weights. */
function choices(n: number, k: number, E: number, rand: () => number): { ids: Int32Array; weights: Float32Array } {
  const ids = new Int32Array(n * k);
  const weights = new Float32Array(n * k);
  for (let t = 0; t < n; t++) {
    const pool = Array.from({ length: E }, (_, e) => e);
    for (let j = 0; j < k; j++) {
      const at = j + Math.floor(rand() * (E - j));
      [pool[j], pool[at]] = [pool[at], pool[j]];
      ids[t * k + j] = pool[j];
      // some exact zeros and negative zeros among ordinary weights
      const r = rand();
      weights[t * k + j] = r < 0.05 ? 0 : r < 0.1 ? -0 : (rand() - 0.3) * 2;
    }
  }
  return { ids, weights };
}

/** The sum the MoE block computed before: out = 0, then expert by expert, out[t] += y[slot] · weight. */
function expertByExpert(y: Float32Array, ids: Int32Array, weights: Float32Array, n: number, k: number, first: number, local: number, D: number): Float32Array {
  const out = new Float32Array(n * D);
  let slot = 0;
  for (let e = first; e < first + local; e++) {
    for (let t = 0; t < n; t++) {
      for (let j = 0; j < k; j++) {
        if (ids[t * k + j] !== e) continue;
        for (let i = 0; i < D; i++) out[t * D + i] += y[slot * D + i] * weights[t * k + j];
        slot++;
      }
    }
  }
  return out;
}

describe('ExpertGroups', () => {
  it('groups each local expert’s tokens in order and lists each token’s slots in expert order', () => {
    const rand = rng(7);
    const [E, k, B] = [12, 3, 20];
    const g = new ExpertGroups(5, k, B);
    // a bigger step, then smaller ones: nothing of the earlier grouping may leak into a later one
    for (const [n, first] of [[20, 4], [7, 0], [1, 7], [13, 9]] as const) {
      const { ids, weights } = choices(n, k, E, rand);
      g.group(ids, weights, n, first);
      const expected: { token: number; weight: number }[] = [];
      const perToken: number[][] = Array.from({ length: n }, () => []);
      for (let e = first; e < Math.min(first + 5, E); e++) {
        expect(g.start[e - first]).toBe(expected.length);
        for (let t = 0; t < n; t++) {
          for (let j = 0; j < k; j++) {
            if (ids[t * k + j] !== e) continue;
            perToken[t].push(expected.length);
            expected.push({ token: t, weight: weights[t * k + j] });
          }
        }
        expect(g.count[e - first]).toBe(expected.length - g.start[e - first]);
      }
      expect(g.slots).toBe(expected.length);
      expect(Array.from(g.slotToken.subarray(0, g.slots))).toEqual(expected.map((s) => s.token));
      expect(Array.from(g.slotWeight.subarray(0, g.slots))).toEqual(expected.map((s) => s.weight));
      for (let t = 0; t < n; t++) expect(Array.from(g.tokenSlots.subarray(t * k, t * k + g.tokenCount[t]))).toEqual(perToken[t]);
    }
  });
});

describe('combineExperts', () => {
  it('equals the expert-by-expert accumulation bit for bit, for 1 to 9 experts per token and partial ranks', () => {
    const rand = rng(11);
    const D = 37;
    for (const k of [1, 2, 3, 4, 5, 8, 9]) {
      const E = 16;
      const n = 9;
      // the whole set, then a rank holding experts 3..10 (tokens with 0..k of theirs there)
      for (const [first, local] of [[0, E], [3, 8]] as const) {
        const { ids, weights } = choices(n, k, E, rand);
        const g = new ExpertGroups(local, k, n);
        g.group(ids, weights, n, first);
        const y = new Float32Array(g.slots * D);
        for (let i = 0; i < y.length; i++) {
          const r = rand();
          // large, tiny, negative zero and ordinary values, so roundings and signed zeros show
          y[i] = r < 0.05 ? -0 : r < 0.1 ? (rand() - 0.5) * 1e-40 : r < 0.15 ? (rand() - 0.5) * 1e30 : (rand() - 0.5) * 8;
        }
        const want = expertByExpert(y, ids, weights, n, k, first, local, D);
        const out = new Float32Array(n * D).fill(Number.NaN);
        combineExperts(out, y, g, n, D);
        // compared as bits: -0 and +0 differ, as any rounding would
        expect(Array.from(new Uint32Array(out.buffer)), `k=${k}, experts ${first}..${first + local - 1}`).toEqual(Array.from(new Uint32Array(want.buffer)));
      }
    }
  });
});
