import { describe, expect, it } from 'vitest';
import type { Cluster } from '../src/cluster.js';
import { FACTORS, LinkTable, allReduceSeconds, lookupChip, predict } from '../src/cost-model.js';
import { kvHeadsPerMember, splitHeads } from '../src/layout.js';
import { modelFromConfig } from '../src/model.js';
import { resolveRequest } from '../src/request.js';
import { denseConfig, mesh, node } from './helpers.js';

const f = FACTORS.apple;
const BW = 500e9 * f.bandwidth; // node() below: 500 GB/s M4 Max class

describe('cost model, hand-checkable', () => {
  const m = modelFromConfig(denseConfig());
  const req = resolveRequest({ promptTokens: 1, contextTokens: 16 });
  const two: Cluster = { nodes: [node('a', 100, 500), node('b', 100, 500)], links: mesh(['a', 'b'], 'rdma', 8, 80) };
  const head = m.lmHeadBytes / BW + f.tokenUs * 1e-6;
  const layerSingle = (l: (typeof m.layers)[number]) => (l.activeBytes + m.kvBytesPerTokenPerLayer) / BW + f.denseLayerUs * 1e-6;
  const single = m.layers.reduce((a, l) => a + layerSingle(l), 0) + head;

  it('one node: every active byte once per token, plus per-layer and per-token overheads', () => {
    const p = predict(m, two, { stages: [{ nodes: ['a'], heads: [32], layers: [0, 32] }] }, req);
    expect(1 / p.decodeTokensPerSecond).toBeCloseTo(single, 9);
  });

  it('two equal nodes, pipeline: the same work plus one hop each way', () => {
    const p = predict(m, two, { stages: [{ nodes: ['a'], heads: [32], layers: [0, 16] }, { nodes: ['b'], heads: [32], layers: [16, 32] }] }, req);
    const hop = 8e-6 + (4096 * 2 * 8) / 80e9;
    const back = 8e-6 + (4 * 8) / 80e9;
    expect(1 / p.decodeTokensPerSecond).toBeCloseTo(single + hop + back, 9);
    expect(p.breakdown.hopsMs).toBeCloseTo((hop + back) * 1000, 6);
  });

  it('two equal nodes, tensor parallel: half the sharded bytes and half the head rows each, two all-reduces per layer', () => {
    const p = predict(m, two, { stages: [{ nodes: ['a', 'b'], heads: [16, 16], layers: [0, 32] }] }, req);
    const perLayer = (l: (typeof m.layers)[number]) => (l.replicatedBytes + (l.activeBytes - l.replicatedBytes) / 2 + m.kvBytesPerTokenPerLayer / 2) / BW + f.denseLayerUs * 1e-6;
    const allReduce = 8e-6 + (4096 * 2) / (80e9 / 8); // one-shot over a per-pair cable
    const halfHead = ((Math.ceil(m.vocabSize / 2) / m.vocabSize) * m.lmHeadBytes) / BW + f.tokenUs * 1e-6;
    const expected = m.layers.reduce((a, l) => a + perLayer(l) + 2 * allReduce, 0) + halfHead;
    expect(1 / p.decodeTokensPerSecond).toBeCloseTo(expected, 9);
    expect(p.decodeTokensPerSecond).toBeGreaterThan(1.5 / single);
  });

  it('all-reduce over TCP is a latency-bound ring; behind a switch parallel sends queue', () => {
    const ids = ['a', 'b', 'c', 'd'];
    const nodes = ids.map((id) => node(id, 10, 100));
    const tcp = new LinkTable({ nodes, links: mesh(ids, 'thunderbolt', 250, 40) });
    expect(allReduceSeconds(tcp, ids, 8192).seconds).toBeCloseTo(6 * (250e-6 + 8192 / 4 / 5e9), 12);
    const rdma = new LinkTable({ nodes, links: mesh(ids, 'rdma', 8, 80) });
    expect(allReduceSeconds(rdma, ids, 8192).seconds).toBeCloseTo(8e-6 + 8192 / 10e9, 12);
    expect(allReduceSeconds(rdma, ['a', 'b', 'c'], 8192).transport).toBe('rdma');
    const partial = new LinkTable({ nodes, links: mesh(['a', 'b', 'c'], 'rdma', 8, 80) });
    expect(allReduceSeconds(partial, ids, 8192).seconds).toBe(Infinity);
  });

  it('falls back to the chip table, and to a generic CPU for unknown chips', () => {
    expect(lookupChip('Apple M4 Max (16-core CPU, 40-core GPU)')?.bandwidthGBps).toBe(546);
    expect(lookupChip('Apple M4')?.bandwidthGBps).toBe(120);
    expect(lookupChip('Apple M3 Ultra')?.tflops).toBe(28.4);
    expect(lookupChip('Intel Xeon')).toBeUndefined();
    const c: Cluster = { nodes: [{ id: 'x', chip: 'Apple M4 Pro', memoryBytes: 64e9, availableBytes: 60e9 }, { id: 'y', chip: 'Intel Xeon', memoryBytes: 64e9, availableBytes: 60e9 }], links: [] };
    const onX = predict(m, c, { stages: [{ nodes: ['x'], heads: [32], layers: [0, 32] }] }, req);
    const onY = predict(m, c, { stages: [{ nodes: ['y'], heads: [32], layers: [0, 32] }] }, req);
    // 273 GB/s at 0.8 vs 50 GB/s at 0.6.
    expect(onX.decodeTokensPerSecond / onY.decodeTokensPerSecond).toBeGreaterThan(5);
  });
});

describe('uneven tensor shards in whole heads', () => {
  it('splits heads by weight, every member at least one', () => {
    expect(splitHeads(64, [2, 1])).toEqual([43, 21]);
    expect(splitHeads(64, [1, 1, 1])).toEqual([22, 21, 21]);
    expect(splitHeads(8, [100, 1, 1])).toEqual([6, 1, 1]);
    expect(splitHeads(64, [1, 1, 1]).reduce((a, b) => a + b)).toBe(64);
  });

  it('kv heads that do not divide: members touching a KV group each hold it', () => {
    // Llama 70B: 64 query heads, 8 KV heads (8 queries each), over 3 nodes as 22/21/21.
    expect(kvHeadsPerMember([22, 21, 21], 64, 8)).toEqual([3, 4, 3]);
    // Qwen3: 4 KV heads over 8 nodes: every node needs one (replicated).
    expect(kvHeadsPerMember([8, 8, 8, 8, 8, 8, 8, 8], 64, 4)).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
    expect(kvHeadsPerMember([32, 32], 64, 8)).toEqual([4, 4]);
  });
});
