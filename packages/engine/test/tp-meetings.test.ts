/**
 * A tensor-parallel decode step meets the other ranks only after o_proj and down_proj: 2 all-reduces
 * per layer, all of hidden width. The embedding (rank 0 embeds, its rows are handed to the others)
 * and the logits (each rank returns its vocabulary slice, joined by the caller) need none. A batched
 * step of several sequences meets as often, over all their rows.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createInProcessAllReduce, joinLogitSlices, loadShard, type AllReduce } from '../src/index.js';
import { writeRandomModel } from '../src/testing/index.js';
import { maxAbsDiff, tempDir } from './helpers.js';

const tmp = tempDir('tp-meetings');
afterAll(tmp.cleanup);

const LAYERS = 6;
const model = writeRandomModel(join(tmp.dir, 'model'), { variant: 'llama', numLayers: LAYERS, tiedEmbeddings: true, seed: 5 });
const all = { layers: [0, LAYERS] as [number, number], embed: true, head: true };

/** The in-process all-reduce of `size` ranks, recording the length of every buffer each rank brings. */
function countingAllReduce(size: number): { reduces: AllReduce[]; calls: number[][] } {
  const calls: number[][] = Array.from({ length: size }, () => []);
  const reduces = createInProcessAllReduce(size).map((ar, rank): AllReduce => (buf) => {
    calls[rank].push(buf.length);
    return ar(buf);
  });
  return { reduces, calls };
}

describe('tensor-parallel meetings per step (2 ranks, 6 layers)', () => {
  const whole = loadShard(model.dir, { ...all, tensor: { rank: 0, size: 1 } });
  const { reduces, calls } = countingAllReduce(2);
  const ranks = [0, 1].map((rank) => loadShard(model.dir, { ...all, tensor: { rank, size: 2 } }, { allReduce: reduces[rank] }));
  const D = whole.config.hiddenSize;
  const V = whole.config.vocabSize;

  it('prefill and decode: 2 all-reduces per layer of n·hidden values, none for the embedding or the logits; slices join to the unsplit logits', async () => {
    const wantCache = whole.newCache(16);
    const caches = ranks.map((r) => r.newCache(16));
    const logits = new Float32Array(V);
    let feed = [3, 1, 4, 1, 5];
    for (let step = 0; step < 4; step++) {
      for (const c of calls) c.length = 0;
      const want = await whole.forward({ tokens: feed }, wantCache);
      const rows = ranks[0].embed(feed);
      const slices = await Promise.all(ranks.map((r, i) => r.forward({ hidden: rows, n: feed.length }, caches[i])));
      for (const c of calls) expect(c).toEqual(new Array(2 * LAYERS).fill(feed.length * D));
      expect(slices.map((s) => s.length)).toEqual(ranks.map((r) => r.slice.vocab[1] - r.slice.vocab[0]));
      expect(maxAbsDiff(joinLogitSlices(logits, slices), want)).toBeLessThan(1e-5);
      feed = [(step * 37 + 11) % V];
    }
  });

  it('a batched step of several sequences still meets 2 times per layer, over all their rows at once', async () => {
    const feeds = [[9, 8, 7], [5], [2, 6]];
    const caches = ranks.map((r) => feeds.map(() => r.newCache(16)));
    for (const c of calls) c.length = 0;
    const rows = feeds.map((f) => Float32Array.from(ranks[0].embed(f)));
    const outs = await Promise.all(ranks.map((r, i) => r.forwardBatch(feeds.map((f, s) => ({ input: { hidden: rows[s], n: f.length }, cache: caches[i][s] })))));
    for (const c of calls) expect(c).toEqual(new Array(2 * LAYERS).fill(6 * D));
    // Each sequence's joined logits equal its own unsplit run.
    for (let s = 0; s < feeds.length; s++) {
      const want = await whole.forward({ tokens: feeds[s] }, whole.newCache(16));
      expect(maxAbsDiff(joinLogitSlices(new Float32Array(V), outs.map((o) => o[s])), want)).toBeLessThan(1e-5);
    }
  });

  it('token ids run on rank 0 (embed + forward) and are refused by rank 1, which holds no embedding', async () => {
    expect(ranks[0].weights.embed?.rows).toBe(V);
    expect(ranks[1].weights.embed).toBeNull();
    await expect(ranks[1].forward({ tokens: [1] }, ranks[1].newCache(4))).rejects.toThrow(/tensor rank 1 of the first stage holds no embedding \(rank 0 embeds/);
    expect(() => ranks[1].embed([1])).toThrow(/holds no embedding/);
    expect(() => ranks[0].embed([V])).toThrow(/token id 264 is outside the vocabulary/);
    const out = new Float32Array(2 * D);
    expect(ranks[0].embed([7, 8], out).buffer).toBe(out.buffer);
  });
});

describe('joinLogitSlices', () => {
  it('places each rank’s slice at its vocabulary rows and refuses a slice of the wrong length', () => {
    const out = new Float32Array(7);
    expect(Array.from(joinLogitSlices(out, [Float32Array.of(0, 1, 2), Float32Array.of(3, 4, 5), Float32Array.of(6)]))).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(() => joinLogitSlices(out, [Float32Array.of(0, 1), Float32Array.of(3, 4, 5, 6, 7)])).toThrow(/rank 0 of 2 gave 2 logits, its rows 0\.\.4 need 4/);
  });
});
