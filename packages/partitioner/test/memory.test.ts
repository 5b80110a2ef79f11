import { describe, expect, it } from 'vitest';
import type { Cluster } from '../src/cluster.js';
import { endBytes } from '../src/memory.js';
import { modelFromConfig } from '../src/model.js';
import { plan } from '../src/plan.js';
import { denseConfig, mesh, node } from './helpers.js';

// vocab 32001: not divisible by 2 or 3, so the last rank's head block is the short one.
const untied = modelFromConfig(denseConfig({ vocab_size: 32001 }), { name: 'untied' });
const tied = modelFromConfig(denseConfig({ vocab_size: 32001, tie_word_embeddings: true }), { name: 'tied' });

describe('embedding and head bytes per tensor rank (as the engine loads them)', () => {
  it('without a tensor split: the embedding on the first stage, the head on the last, a tied table stored once on a single stage', () => {
    expect(endBytes(untied, true, true)).toBe(untied.embeddingBytes + untied.lmHeadBytes);
    expect(endBytes(untied, true, false)).toBe(untied.embeddingBytes);
    expect(endBytes(untied, false, true)).toBe(untied.lmHeadBytes);
    // A tied model's lmHeadBytes is the table plus the final norm.
    expect(endBytes(tied, true, true)).toBe(tied.lmHeadBytes);
    expect(endBytes(tied, false, true)).toBe(tied.lmHeadBytes);
  });

  it('tensor ranks: only rank 0 holds the embedding; head rows in blocks of ceil(vocab / size) that add up to the whole head', () => {
    const per = Math.ceil(32001 / 3);
    const rows = [per, per, 32001 - 2 * per];
    const ranks = [0, 1, 2].map((index) => endBytes(untied, true, true, { index, size: 3 }));
    rows.forEach((r, i) => expect(ranks[i]).toBeCloseTo((i === 0 ? untied.embeddingBytes : 0) + (untied.lmHeadBytes * r) / 32001, 3));
    expect(ranks.reduce((a, b) => a + b, 0)).toBeCloseTo(untied.embeddingBytes + untied.lmHeadBytes, 3);
    expect(endBytes(untied, true, false, { index: 1, size: 3 })).toBe(0);
  });

  it('tied tensor ranks: rank 0 holds the table (its head rows are the leading rows), the others read their own head rows', () => {
    expect(endBytes(tied, true, true, { index: 0, size: 2 })).toBe(tied.lmHeadBytes);
    expect(endBytes(tied, true, true, { index: 1, size: 2 })).toBeCloseTo((tied.lmHeadBytes * (32001 - 16001)) / 32001, 3);
  });

  it('a tensor plan reports the embedding on its first node only', () => {
    const c: Cluster = { nodes: [node('a', 100, 546), node('b', 100, 546)], links: mesh(['a', 'b'], 'rdma', 8, 80) };
    const p = plan(untied, c);
    expect(p.strategy).toBe('tensor');
    const [a, b] = p.stages[0].nodes;
    expect(p.stages[0].heads).toEqual([16, 16]);
    // Equal head shares: same layer slices and KV; the first node adds the embedding and the longer head block.
    expect(p.memory[a].weightsBytes - p.memory[b].weightsBytes).toBeCloseTo(untied.embeddingBytes + untied.lmHeadBytes / 32001, -1);
  });
});

describe('KV cache for the configured batch (kvSequences)', () => {
  const c: Cluster = { nodes: [node('a', 100, 546)], links: [] };

  it('reserves KV cache for every sequence the instance holds, while the prediction stays one stream', () => {
    const one = plan(untied, c, { contextTokens: 4096 });
    const eight = plan(untied, c, { contextTokens: 4096, kvSequences: 8 });
    expect(eight.memory.a.kvCacheBytes).toBeCloseTo(8 * one.memory.a.kvCacheBytes, -2);
    expect(eight.memory.a.kvCacheBytes).toBeGreaterThan(0);
    expect(eight.memory.a.weightsBytes).toBe(one.memory.a.weightsBytes);
    expect(eight.predicted.decodeTokensPerSecond).toBe(one.predicted.decodeTokensPerSecond);
  });

  it('a batch whose KV cache does not fit is refused with the sequences named; fewer sequences fit', () => {
    // Just room for the weights and one sequence's KV at this context.
    const perSeq = plan(untied, { nodes: [node('a', 1000, 546)], links: [] }, { contextTokens: 4096 }).memory.a;
    const fitsOne = (perSeq.weightsBytes + perSeq.kvCacheBytes + perSeq.workspaceBytes) * 1.3 + 2 * 2 ** 30;
    const small: Cluster = { nodes: [{ ...node('a', 1, 546), availableBytes: fitsOne }], links: [] };
    expect(() => plan(untied, small, { contextTokens: 4096, kvSequences: 1 })).not.toThrow();
    expect(() => plan(untied, small, { contextTokens: 4096, kvSequences: 64 })).toThrow(/KV cache .* for 4096 tokens x 64/);
  });

  it('kvSequences must be a positive integer', () => {
    expect(() => plan(untied, c, { kvSequences: 0 })).toThrow(/kvSequences/);
  });
});
