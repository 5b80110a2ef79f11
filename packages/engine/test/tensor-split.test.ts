/** How tensor ranks split heads, KV heads (replicated when fewer than ranks), FFN and vocabulary — and which splits are refused. */
import { describe, expect, it } from 'vitest';
import { pipelineStages, tensorSlice, UnsupportedModelError } from '../src/index.js';

const dims = { numHeads: 8, numKvHeads: 2, intermediateSize: 96, vocabSize: 259 };

describe('tensorSlice', () => {
  it('splits query heads in whole blocks and keeps each group with its KV head', () => {
    expect([0, 1].map((r) => tensorSlice(dims, r, 2)).map((s) => [s.heads, s.kvHeads])).toEqual([
      [[0, 4], [0, 1]],
      [[4, 8], [1, 2]],
    ]);
  });

  it('replicates KV heads when there are fewer than ranks', () => {
    const s = [0, 1, 2, 3].map((r) => tensorSlice(dims, r, 4));
    expect(s.map((x) => x.heads)).toEqual([[0, 2], [2, 4], [4, 6], [6, 8]]);
    expect(s.map((x) => x.kvHeads)).toEqual([[0, 1], [0, 1], [1, 2], [1, 2]]);
  });

  it('splits FFN rows evenly and the vocabulary in ceil-sized blocks covering it exactly', () => {
    const s = [0, 1, 2, 3].map((r) => tensorSlice(dims, r, 4));
    expect(s.map((x) => x.ffn)).toEqual([[0, 24], [24, 48], [48, 72], [72, 96]]);
    expect(s.map((x) => x.vocab)).toEqual([[0, 65], [65, 130], [130, 195], [195, 259]]);
  });

  it('replicates a KV head whose group straddles two ranks (3 KV heads over 2 or 4 ranks)', () => {
    const d = { ...dims, numHeads: 12, numKvHeads: 3 };
    expect([0, 1].map((r) => tensorSlice(d, r, 2).kvHeads)).toEqual([[0, 2], [1, 3]]);
    expect([0, 1, 2, 3].map((r) => tensorSlice(d, r, 4).kvHeads)).toEqual([[0, 1], [0, 2], [1, 3], [2, 3]]);
    expect([0, 1].map((r) => tensorSlice({ ...d, numHeads: 6 }, r, 2).kvHeads)).toEqual([[0, 2], [1, 3]]);
  });

  it('splits an FFN that does not divide evenly into near-equal blocks', () => {
    expect([0, 1, 2].map((r) => tensorSlice({ ...dims, numHeads: 6, numKvHeads: 3, intermediateSize: 512 }, r, 3).ffn)).toEqual([[0, 170], [170, 341], [341, 512]]);
  });

  it('refuses splits that would cut heads, saying why', () => {
    expect(() => tensorSlice(dims, 0, 3)).toThrow(UnsupportedModelError);
    expect(() => tensorSlice(dims, 0, 3)).toThrow(/8 attention heads over 3 tensor ranks/);
    expect(() => tensorSlice(dims, 2, 2)).toThrow(/rank 2/);
  });
});

describe('pipelineStages', () => {
  it('splits evenly or by explicit counts, refusing empty stages and wrong totals', () => {
    expect(pipelineStages(5, 2)).toEqual([[0, 2], [2, 5]]);
    expect(pipelineStages(4, [1, 2, 1])).toEqual([[0, 1], [1, 3], [3, 4]]);
    expect(() => pipelineStages(2, 3)).toThrow(/at least one layer/);
    expect(() => pipelineStages(4, [1, 1])).toThrow(/hold 2 layers but the model has 4/);
  });
});
