/**
 * Expert parallelism: a tensor group splits a MoE layer by whole experts.
 * - Each rank reads from disk only its experts (and its share of attention and the head): bytes read ≈
 *   the share of the split tensors plus the replicated ones (norms, routers, MLA's latent
 *   down-projections) (±10%), experts [r·E/S, (r+1)·E/S).
 * - A step still meets only twice per layer (after attention, after the MoE), hidden-width buffers.
 * - A decode step multiplies by the chosen experts' matrices only: top-k experts per MoE layer over the
 *   whole group, each on the rank that holds it; the bytes streamed are the active bytes, not all.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createInProcessAllReduce, createReferenceBackend, joinLogitSlices, loadShard, type AllReduce, type Backend, type Weight } from '../../src/index.js';
import type { ModelShard } from '../../src/model/forward.js';
import type { MoeWeights } from '../../src/model/weights.js';
import { writeRandomModel, type RandomModelOptions } from '../../src/testing/index.js';
import { maxAbsDiff, tempDir } from '../helpers.js';

const tmp = tempDir('moe-ep');
afterAll(tmp.cleanup);

const LAYERS = 4;
const all = { layers: [0, LAYERS] as [number, number], embed: true, head: true };
const MODELS: Record<string, RandomModelOptions> = {
  'qwen3-moe': { variant: 'qwen3-moe', mlpOnlyLayers: [], numLayers: LAYERS, hiddenSize: 64, moeIntermediateSize: 64 },
  'deepseek-v3': { variant: 'deepseek-v3', numLayers: LAYERS, hiddenSize: 64, firstKDense: 0, moeIntermediateSize: 64 },
};

/** Data bytes of each tensor in a safetensors file. */
function tensorBytes(file: string): Map<string, number> {
  const buf = readFileSync(file);
  const header = JSON.parse(buf.subarray(8, 8 + Number(buf.readBigUInt64LE(0))).toString('utf8')) as Record<string, { data_offsets: [number, number] }>;
  return new Map(Object.entries(header).filter(([n]) => n !== '__metadata__').map(([n, e]) => [n, e.data_offsets[1] - e.data_offsets[0]]));
}

/** A reference backend that records every matrix a kernel multiplies by. */
function recording(): { backend: Backend; used: Weight[] } {
  const inner = createReferenceBackend();
  const used: Weight[] = [];
  const backend: Backend = {
    ...inner,
    name: 'recording',
    matvec(out, w, x) {
      used.push(w);
      inner.matmul(out, w, x, 1);
    },
    matmul(out, w, x, n) {
      used.push(w);
      inner.matmul(out, w, x, n);
    },
  };
  return { backend, used };
}

/** Per MoE layer of `shard`: the global ids of the experts whose matrices are in `used`, and how many of each expert's 3 matrices. */
function expertsUsed(shard: ModelShard, used: Weight[]): number[][] {
  const seen = new Set(used);
  return shard.weights.layers.map((L) => {
    if (L.mlp.kind !== 'moe') return [];
    const m = L.mlp as MoeWeights;
    const ids: number[] = [];
    m.experts.forEach((e, j) => {
      const hits = [e.gate, e.up, e.down].filter((w) => seen.has(w)).length;
      if (hits) {
        expect(hits, `expert ${m.firstExpert + j}: all three matrices or none`).toBe(3);
        ids.push(m.firstExpert + j);
      }
    });
    return ids;
  });
}

describe.each(Object.entries(MODELS))('%s split by experts', (name, options) => {
  const model = writeRandomModel(join(tmp.dir, name), { seed: 9, ...options });
  const E = (model.config.n_routed_experts ?? model.config.num_experts) as number;
  const K = model.config.num_experts_per_tok as number;

  it('each rank reads its own experts and its share of the bytes (±10%); rank 0 also the embedding', () => {
    // Held whole by every rank: norms, routers (+ correction bias), MLA's latent down-projections.
    const sizes = tensorBytes(join(model.dir, 'model.safetensors'));
    const bytesOf = (re: RegExp) => [...sizes].filter(([n]) => re.test(n)).reduce((s, [, b]) => s + b, 0);
    const embedding = bytesOf(/^model\.embed_tokens\./);
    const replicated = bytesOf(/layers\.\d+\..*(norm|\.gate\.|q_a_proj|kv_a_proj)/);
    const split = model.weightBytes - embedding - replicated;
    for (const size of [2, 4]) {
      for (let rank = 0; rank < size; rank++) {
        const shard = loadShard(model.dir, { ...all, tensor: { rank, size } }, { allReduce: async () => {} });
        const share = (shard.bytesRead - (rank === 0 ? embedding : 0) - replicated) / (split / size);
        expect(share, `rank ${rank} of ${size}`).toBeGreaterThan(0.9);
        expect(share, `rank ${rank} of ${size}`).toBeLessThan(1.1);
        for (const L of shard.weights.layers) {
          const m = L.mlp as MoeWeights;
          expect(m.firstExpert).toBe((rank * E) / size);
          expect(m.experts.length).toBe(E / size);
        }
      }
    }
  });

  it('a step meets twice per layer, hidden-width; logit slices join to the unsplit logits', async () => {
    const whole = loadShard(model.dir, { ...all, tensor: { rank: 0, size: 1 } });
    const calls: number[][] = [[], []];
    const reduces = createInProcessAllReduce(2).map((ar, r): AllReduce => (buf) => {
      calls[r].push(buf.length);
      return ar(buf);
    });
    const ranks = [0, 1].map((rank) => loadShard(model.dir, { ...all, tensor: { rank, size: 2 } }, { allReduce: reduces[rank] }));
    const D = whole.config.hiddenSize;
    const wantCache = whole.newCache(16);
    const caches = ranks.map((r) => r.newCache(16));
    const logits = new Float32Array(whole.config.vocabSize);
    let feed = [3, 1, 4, 1, 5];
    for (let step = 0; step < 4; step++) {
      calls.forEach((c) => (c.length = 0));
      const want = await whole.forward({ tokens: feed }, wantCache);
      const rows = ranks[0].embed(feed);
      const slices = await Promise.all(ranks.map((r, i) => r.forward({ hidden: rows, n: feed.length }, caches[i])));
      for (const c of calls) expect(c).toEqual(new Array(2 * LAYERS).fill(feed.length * D));
      expect(maxAbsDiff(joinLogitSlices(logits, slices), want)).toBeLessThan(1e-5);
      feed = [(step * 37 + 11) % 256];
    }
  });

  it(`a decode step multiplies by exactly ${K} experts per MoE layer, each on the rank holding it`, async () => {
    // Unsplit: the experts used are K per layer, and their bytes are the layer's active share.
    const rec = recording();
    const whole = loadShard(model.dir, { ...all, tensor: { rank: 0, size: 1 } }, { backend: rec.backend });
    const cache = whole.newCache(16);
    await whole.forward({ tokens: [7, 8, 9] }, cache);
    const experts = whole.weights.layers.map((L) => (L.mlp as MoeWeights).experts);
    const expertBytes = experts[0][0].gate.bytes.byteLength * 3;
    for (let step = 0; step < 3; step++) {
      rec.used.length = 0;
      await whole.forward({ tokens: [(step * 13 + 2) % 256] }, cache);
      const chosen = expertsUsed(whole, rec.used);
      for (const ids of chosen) expect(ids.length).toBe(K);
      const streamedExpertBytes = rec.used.filter((w) => experts.some((l) => l.some((e) => e.gate === w || e.up === w || e.down === w))).reduce((s, w) => s + w.bytes.byteLength, 0);
      expect(streamedExpertBytes).toBe(LAYERS * K * expertBytes);
      expect(streamedExpertBytes * (E / K)).toBe(LAYERS * E * expertBytes);
    }

    // Split in 2: each rank multiplies only by chosen experts it holds, and together they cover the same K per layer.
    const recs = [recording(), recording()];
    const reduces = createInProcessAllReduce(2);
    const ranks = [0, 1].map((rank) => loadShard(model.dir, { ...all, tensor: { rank, size: 2 } }, { backend: recs[rank].backend, allReduce: reduces[rank] }));
    const caches = ranks.map((r) => r.newCache(16));
    const wholeCache = whole.newCache(16);
    await whole.forward({ tokens: [7, 8, 9] }, wholeCache);
    const rows0 = Float32Array.from(ranks[0].embed([7, 8, 9]));
    await Promise.all(ranks.map((r, i) => r.forward({ hidden: rows0, n: 3 }, caches[i])));
    for (let step = 0; step < 3; step++) {
      const token = (step * 13 + 2) % 256;
      rec.used.length = 0;
      recs.forEach((r) => (r.used.length = 0));
      await whole.forward({ tokens: [token] }, wholeCache);
      const want = expertsUsed(whole, rec.used);
      const rows = Float32Array.from(ranks[0].embed([token]));
      await Promise.all(ranks.map((r, i) => r.forward({ hidden: rows, n: 1 }, caches[i])));
      const got = ranks.map((r, i) => expertsUsed(r, recs[i].used));
      for (let l = 0; l < LAYERS; l++) {
        for (const [i, ids] of got.map((g) => g[l]).entries()) for (const e of ids) expect(Math.floor(e / (E / 2)), `layer ${l}: expert ${e} ran on rank ${i}`).toBe(i);
        expect([...got[0][l], ...got[1][l]].sort((a, b) => a - b)).toEqual([...want[l]].sort((a, b) => a - b));
      }
    }
  });
});
