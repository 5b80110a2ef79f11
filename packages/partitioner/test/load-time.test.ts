/**
 * Expected load time: what each node of a layout fetches, from holders over every link to them or
 * from the hub once per pod, and the planner preferring, between equally fast layouts, the one whose
 * nodes already hold the model.
 */
import { describe, expect, it } from 'vitest';
import type { Cluster, ClusterLink } from '../src/cluster.js';
import { LinkTable } from '../src/cost-model.js';
import { expectedLoad, fetchBytes } from '../src/load-time.js';
import type { Layout } from '../src/layout.js';
import { modelFromConfig } from '../src/model.js';
import { plan } from '../src/plan.js';
import { denseConfig, GB, mesh, node } from './helpers.js';

const model = modelFromConfig(denseConfig(), { name: 'dense-8b' });
const heads = model.numHeads;
const pipeline: Layout = {
  stages: [
    { nodes: ['a'], heads: [heads], layers: [0, 16] },
    { nodes: ['b'], heads: [heads], layers: [16, 32] },
  ],
};
const tb = (a: string, b: string, gbps: number): ClusterLink => ({ a, b, kind: 'thunderbolt', latencyUs: 50, bandwidthGbps: gbps });

describe('expected load time', () => {
  it('each stage fetches its layers plus the embedding (first) or head (last); one stage fetches everything', () => {
    const bytes = fetchBytes(model, pipeline);
    expect(bytes.a + bytes.b).toBeCloseTo(model.totalBytes, -3);
    expect(bytes.a).toBeGreaterThan(model.embeddingBytes);
    expect(fetchBytes(model, { stages: [{ nodes: ['a', 'b'], heads: [heads / 2, heads / 2], layers: [0, 32] }] })).toEqual({ a: model.totalBytes, b: model.totalBytes });
  });

  it('from a holder at the sum of every cable to it; from the hub once for the pod, shared by its fetchers', () => {
    const one = new LinkTable({ nodes: [], links: [tb('a', 'c', 40)] });
    const two = new LinkTable({ nodes: [], links: [tb('a', 'c', 40), tb('a', 'c', 40)] });
    const sources = { holders: ['c'], hubBytesPerSecond: 100e6 };
    const single = expectedLoad(model, pipeline, sources, one);
    const bonded = expectedLoad(model, pipeline, sources, two);
    const need = fetchBytes(model, pipeline);
    expect(single.perNode.a).toEqual({ bytes: need.a, fromPeersBytes: need.a, fromHubBytes: 0, seconds: need.a / 5e9 });
    expect(bonded.perNode.a.seconds).toBeCloseTo(single.perNode.a.seconds / 2, 6);
    // b has no link to the holder: its stage comes from the hub.
    expect(single.perNode.b.fromHubBytes).toBe(need.b);
    expect(single.hubBytes).toBe(need.b);
    expect(single.seconds).toBeCloseTo(need.b / 100e6, 6);
    // Nobody holds it: the hub serves every byte once, however the layout splits it.
    const none = expectedLoad(model, pipeline, { holders: [], hubBytesPerSecond: 100e6 }, one);
    expect(none.hubBytes).toBeCloseTo(model.totalBytes, -3);
    expect(none.perNode.a.seconds).toBe(none.perNode.b.seconds);
    const tp = expectedLoad(model, { stages: [{ nodes: ['a', 'b'], heads: [heads / 2, heads / 2], layers: [0, 32] }] }, { holders: [], hubBytesPerSecond: 100e6 }, one);
    expect(tp.hubBytes).toBe(model.totalBytes);
    // A holder loads nothing.
    expect(expectedLoad(model, pipeline, { holders: ['a', 'b'], hubBytesPerSecond: 1 }, one).seconds).toBe(0);
  });

  it('between equally fast layouts the planner picks the node that already holds the model, and says how long loading takes', () => {
    const cluster: Cluster = { nodes: [node('a', 64, 400), node('b', 64, 400)], links: mesh(['a', 'b'], 'wifi', 2400, 0.6) };
    const without = plan(model, cluster, { contextTokens: 2048 });
    expect(without.strategy).toBe('single');
    expect(without.stages[0].nodes).toEqual(['a']);
    expect(without.load).toBeUndefined();
    const held = plan(model, cluster, { contextTokens: 2048 }, { weights: { holders: ['b'], hubBytesPerSecond: 50e6 } });
    expect(held.stages[0].nodes).toEqual(['b']);
    expect(held.predicted.decodeTokensPerSecond).toBe(without.predicted.decodeTokensPerSecond);
    expect(held.load?.seconds).toBe(0);
    expect(held.explanation.at(-1)).toBe('Loading: about 0.0 s (every byte already where it runs).');
    const fresh = plan(model, cluster, { contextTokens: 2048 }, { weights: { holders: [], hubBytesPerSecond: 50e6 } });
    expect(fresh.load?.hubBytes).toBe(model.totalBytes);
    expect(fresh.load?.seconds).toBeCloseTo(model.totalBytes / 50e6, 3);
    expect(fresh.explanation.at(-1)).toBe(`Loading: about ${(model.totalBytes / 50e6).toFixed(1)} s (${(model.totalBytes / GB).toFixed(1)} GB from the hub).`);
  });
});
