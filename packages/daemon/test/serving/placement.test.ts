import { describe, expect, it } from 'vitest';
import type { Cluster, Plan } from '@orchard/partitioner';
import { layoutFromPlan, placeForced, PlacementError, shouldUpgrade, withoutSilentNodes } from '../../src/serving/placement.js';
import { description } from './fixtures.js';

const model = description({ weightsBytes: 4 * 2 ** 30 });
const node = (id: string, freeGiB: number) => ({ id, memoryBytes: 64 * 2 ** 30, availableBytes: freeGiB * 2 ** 30 });
const cluster: Cluster = { nodes: [node('a', 10), node('b', 30), node('c', 20)], links: [] };

describe('forced placement', () => {
  it('pipeline: nodes with the most free memory, layers split evenly, stage-major ranks', () => {
    const p = placeForced(model, cluster, { strategy: 'pipeline', nodes: 2 });
    expect(p.strategy).toBe('pipeline');
    expect(p.ranks).toEqual(['b', 'c']);
    expect(p.layout).toEqual({ stages: [[0, 4], [4, 8]], tensor: 1 });
  });

  it('tensor: one stage holding every layer, one rank per node', () => {
    const p = placeForced(model, cluster, { strategy: 'tensor', nodes: 2 });
    expect(p.layout).toEqual({ stages: [[0, 8]], tensor: 2 });
    expect(p.ranks).toEqual(['b', 'c']);
  });

  it("refuses what cannot run, with the numbers (the engine's canRun for splits)", () => {
    expect(() => placeForced(model, cluster, { strategy: 'pipeline', nodes: 4 })).toThrow(/needs 4 live nodes; the pod has 3/);
    expect(() => placeForced(model, cluster, { strategy: 'tensor', nodes: 3 })).toThrow(PlacementError);
    expect(() => placeForced(model, cluster, { strategy: 'tensor', nodes: 3 })).toThrow(/tensor over 3 nodes: cannot split 8 attention heads over 3 tensor ranks/);
    expect(() => placeForced(description({ layers: 1 }), cluster, { strategy: 'pipeline', nodes: 2 })).toThrow(/at least 2 layers/);
    const tight: Cluster = { nodes: [node('a', 1), node('b', 1)], links: [] };
    expect(() => placeForced(model, tight, { strategy: 'pipeline', nodes: 2 })).toThrow(/node a has 1.00 GiB free, its share of the weights needs 2.00 GiB/);
  });

  it('no longer re-checks engine limits itself: an intermediate size that does not divide is fine', () => {
    expect(placeForced(description({ intermediate: 513 }), cluster, { strategy: 'tensor', nodes: 2 }).layout.tensor).toBe(2);
  });
});

describe('planner layouts', () => {
  const base = { predicted: null as unknown as Plan['predicted'], explanation: ['why'] };
  it('keeps equal tensor groups', () => {
    const p = layoutFromPlan({ ...base, strategy: 'hybrid', stages: [{ nodes: ['a', 'b'], layers: [0, 3], heads: [4, 4] }, { nodes: ['c', 'd'], layers: [3, 8], heads: [4, 4] }] as Plan['stages'] });
    expect(p.layout).toEqual({ stages: [[0, 3], [3, 8]], tensor: 2 });
    expect(p.ranks).toEqual(['a', 'b', 'c', 'd']);
  });
  it('keeps uneven head splits as they are planned', () => {
    const p = layoutFromPlan({ ...base, strategy: 'tensor', stages: [{ nodes: ['a', 'b'], layers: [0, 8], heads: [5, 3] }] as Plan['stages'] });
    expect(p.layout).toEqual({ stages: [[0, 8]], tensor: 2, heads: [[5, 3]] });
  });
  it('refuses stages of different group sizes (the planner is told not to propose them)', () => {
    expect(() => layoutFromPlan({ ...base, strategy: 'hybrid', stages: [{ nodes: ['a', 'b'], layers: [0, 4], heads: [4, 4] }, { nodes: ['c'], layers: [4, 8], heads: [8] }] as Plan['stages'] })).toThrow(
      /same number of tensor ranks .* stages have 2\/1/,
    );
  });
});

describe('upgrading an auto placement', () => {
  const plan = (ranks: string[], tps: number) => ({ ranks, layout: { stages: [[0, 8]] as [number, number][], tensor: ranks.length }, predicted: { decodeTokensPerSecond: tps } as unknown as Plan['predicted'] });
  it('only for a different layout that is clearly faster', () => {
    expect(shouldUpgrade(plan(['a'], 10), plan(['a', 'b'], 20))).toBe(true);
    expect(shouldUpgrade(plan(['a'], 10), plan(['a', 'b'], 11))).toBe(false);
    expect(shouldUpgrade(plan(['a'], 10), plan(['a'], 30))).toBe(false);
    expect(shouldUpgrade({ ...plan(['a'], 10), predicted: null }, plan(['a', 'b'], 30))).toBe(false);
  });
});

describe('placement skips nodes that stopped answering heartbeats', () => {
  const three: Cluster = {
    nodes: [node('self', 32), node('b', 32), node('c', 32)],
    links: [
      { a: 'self', b: 'b', kind: 'ethernet', latencyUs: 50, bandwidthGbps: 10 },
      { a: 'self', b: 'c', kind: 'ethernet', latencyUs: 50, bandwidthGbps: 10 },
      { a: 'b', b: 'c', kind: 'ethernet', latencyUs: 50, bandwidthGbps: 10 },
    ],
  };
  it('a node silent past suspectAfterMs is left out, even while the shared state still lists it', () => {
    const now = Date.now();
    const view = (heard: Record<string, number>) => withoutSilentNodes(three, { selfId: 'self', heardAt: (p) => heard[p], now, suspectAfterMs: 2500 });
    expect(placeForced(model, view({ b: now - 100, c: now - 200 }), { strategy: 'pipeline', nodes: 3 }).ranks.sort()).toEqual(['b', 'c', 'self']);
    const bSilent = view({ b: now - 4000, c: now - 200 });
    expect(bSilent.links.some((l) => l.a === 'b' || l.b === 'b')).toBe(false);
    expect(placeForced(model, bSilent, { strategy: 'pipeline', nodes: 2 }).ranks).not.toContain('b');
    expect(() => placeForced(model, bSilent, { strategy: 'pipeline', nodes: 3 })).toThrow(/needs 3 live nodes; the pod has 2/);
  });
});
