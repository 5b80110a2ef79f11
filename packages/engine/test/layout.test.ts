import { describe, expect, it } from 'vitest';
import { canRun, checkLayout, pipelineStages, samplerRank, shardSpecOf, stageMembers, tensorSlice, UnsupportedModelError, type LayoutDims } from '../src/index.js';

const dims: LayoutDims = { numLayers: 6, numHeads: 8, numKvHeads: 2, intermediateSize: 64, vocabSize: 256 };

describe('canRun', () => {
  it('accepts pipelines, even and uneven tensor groups, and hybrids', () => {
    expect(canRun(dims, { stages: [[0, 6]], tensor: 1 })).toEqual({ ok: true });
    expect(canRun(dims, { stages: pipelineStages(6, [1, 2, 3]), tensor: 1 })).toEqual({ ok: true });
    expect(canRun(dims, { stages: [[0, 6]], tensor: 4 })).toEqual({ ok: true });
    expect(canRun(dims, { stages: [[0, 6]], tensor: 3, heads: [[2, 3, 3]] })).toEqual({ ok: true });
    expect(canRun(dims, { stages: [[0, 2], [2, 6]], tensor: 2, heads: [[1, 7], [5, 3]] })).toEqual({ ok: true });
  });

  it('refuses with the numbers: gaps, overlaps, missing layers, bad heads', () => {
    const reason = (l: Parameters<typeof canRun>[1]) => {
      const r = canRun(dims, l);
      return r.ok ? null : r.reason;
    };
    expect(reason({ stages: [[0, 2], [3, 6]], tensor: 1 })).toMatch(/stage 1 holds layers \[3, 6\); it must start at layer 2/);
    expect(reason({ stages: [[0, 5]], tensor: 1 })).toMatch(/\[0, 5\) but the model has 6/);
    expect(reason({ stages: [[0, 3], [3, 3], [3, 6]], tensor: 1 })).toMatch(/stage 1 .* at least one layer/);
    expect(reason({ stages: [[0, 6]], tensor: 3 })).toMatch(/8 attention heads over 3 tensor ranks/);
    expect(reason({ stages: [[0, 6]], tensor: 2, heads: [[3, 4]] })).toMatch(/\(3\/4\) sum to 7; the model has 8/);
    expect(reason({ stages: [[0, 6]], tensor: 2, heads: [[0, 8]] })).toMatch(/whole number of heads >= 1, got 0\/8/);
    expect(reason({ stages: [[0, 6]], tensor: 2, heads: [[4, 4], [4, 4]] })).toMatch(/heads are given for 2 stages; the layout has 1/);
    expect(reason({ stages: [[0, 6]], tensor: 0 })).toMatch(/positive integer, got 0/);
    expect(reason({ stages: [[0, 6]], tensor: 8 }) ?? '').toBe('');
    expect(canRun({ ...dims, intermediateSize: 3 }, { stages: [[0, 6]], tensor: 4 })).toMatchObject({ ok: false, reason: expect.stringMatching(/no MLP rows \(intermediate size 3/) });
  });

  it('checkLayout throws the same reason as an UnsupportedModelError', () => {
    expect(() => checkLayout(dims, { stages: [[0, 6]], tensor: 3 })).toThrow(UnsupportedModelError);
  });
});

describe('shardSpecOf', () => {
  it('numbers ranks stage-major and hands each rank its stage heads', () => {
    const layout = { stages: [[0, 2], [2, 6]] as [number, number][], tensor: 2, heads: [[1, 7], [5, 3]] };
    expect([0, 1, 2, 3].map((r) => shardSpecOf(layout, r))).toEqual([
      { layers: [0, 2], tensor: { rank: 0, size: 2, heads: [1, 7] }, embed: true, head: false },
      { layers: [0, 2], tensor: { rank: 1, size: 2, heads: [1, 7] }, embed: true, head: false },
      { layers: [2, 6], tensor: { rank: 0, size: 2, heads: [5, 3] }, embed: false, head: true },
      { layers: [2, 6], tensor: { rank: 1, size: 2, heads: [5, 3] }, embed: false, head: true },
    ]);
    expect(stageMembers(layout, 1)).toEqual([2, 3]);
    expect(samplerRank(layout)).toBe(2);
  });
});

describe('uneven tensor slices', () => {
  it('give each rank its heads, the KV heads they read and MLP rows in proportion', () => {
    const s = [0, 1, 2].map((r) => tensorSlice(dims, r, 3, [2, 3, 3]));
    expect(s.map((x) => x.heads)).toEqual([[0, 2], [2, 5], [5, 8]]);
    // 4 query heads per KV head: heads 2..4 straddle KV heads 0 and 1.
    expect(s.map((x) => x.kvHeads)).toEqual([[0, 1], [0, 2], [1, 2]]);
    expect(s.map((x) => x.ffn)).toEqual([[0, 16], [16, 40], [40, 64]]);
  });

  it('equal counts given explicitly are the even split', () => {
    for (let r = 0; r < 4; r++) expect(tensorSlice(dims, r, 4, [2, 2, 2, 2])).toEqual(tensorSlice(dims, r, 4));
  });
});
