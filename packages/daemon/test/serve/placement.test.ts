import { describe, expect, it } from 'vitest';
import type { Cluster, Plan } from '@orchard/partitioner';
import { layoutFromPlan, placeForced, PlacementError, type ModelShape } from '../../src/placement/place.js';

const shape: ModelShape = { numLayers: 8, numHeads: 8, numKvHeads: 4, intermediateSize: 512, weightsBytes: 4 * 2 ** 30 };
const node = (id: string, freeGiB: number) => ({ id, memoryBytes: 64 * 2 ** 30, availableBytes: freeGiB * 2 ** 30 });
const cluster: Cluster = { nodes: [node('a', 10), node('b', 30), node('c', 20)], links: [] };

describe('forced placement', () => {
  it('pipeline: nodes with the most free memory, layers split evenly, stage-major ranks', () => {
    const p = placeForced(shape, cluster, { strategy: 'pipeline', nodes: 2 });
    expect(p.strategy).toBe('pipeline');
    expect(p.ranks).toEqual(['b', 'c']);
    expect(p.layout).toEqual({ stages: [[0, 4], [4, 8]], tensor: 1 });
  });

  it('tensor: one stage holding every layer, one rank per node', () => {
    const p = placeForced(shape, cluster, { strategy: 'tensor', nodes: 2 });
    expect(p.layout).toEqual({ stages: [[0, 8]], tensor: 2 });
    expect(p.ranks).toEqual(['b', 'c']);
  });

  it('refuses what cannot run, with the numbers', () => {
    expect(() => placeForced(shape, cluster, { strategy: 'pipeline', nodes: 4 })).toThrow(/needs 4 live nodes; the pod has 3/);
    expect(() => placeForced(shape, cluster, { strategy: 'tensor', nodes: 3 })).toThrow(PlacementError);
    expect(() => placeForced({ ...shape, numLayers: 1 }, cluster, { strategy: 'pipeline', nodes: 2 })).toThrow(/at least 2 layers/);
    const tight: Cluster = { nodes: [node('a', 1), node('b', 1)], links: [] };
    expect(() => placeForced(shape, tight, { strategy: 'pipeline', nodes: 2 })).toThrow(/node a has 1.00 GiB free, its share of the weights needs 2.00 GiB/);
  });
});

describe('planner layouts', () => {
  const base = { predicted: null as unknown as Plan['predicted'], explanation: ['why'] };
  it('keeps equal tensor groups', () => {
    const p = layoutFromPlan(shape, { ...base, strategy: 'hybrid', stages: [{ nodes: ['a', 'b'], layers: [0, 3] }, { nodes: ['c', 'd'], layers: [3, 8] }] as Plan['stages'] });
    expect(p.layout).toEqual({ stages: [[0, 3], [3, 8]], tensor: 2 });
    expect(p.ranks).toEqual(['a', 'b', 'c', 'd']);
  });
  it('turns uneven tensor groups into a pipeline over the same nodes', () => {
    const p = layoutFromPlan(shape, { ...base, strategy: 'hybrid', stages: [{ nodes: ['a', 'b'], layers: [0, 4] }, { nodes: ['c'], layers: [4, 8] }] as Plan['stages'] });
    expect(p.strategy).toBe('pipeline');
    expect(p.layout).toEqual({ stages: [[0, 2], [2, 5], [5, 8]], tensor: 1 });
    expect(p.ranks).toEqual(['a', 'b', 'c']);
  });
});

describe('upgrading an auto placement', () => {
  const plan = (ranks: string[], tps: number) => ({ ranks, layout: { stages: [[0, 8]] as [number, number][], tensor: ranks.length }, predicted: { decodeTokensPerSecond: tps } as unknown as Plan['predicted'] });
  it('only for a different layout that is clearly faster', async () => {
    const { shouldUpgrade } = await import('../../src/placement/place.js');
    expect(shouldUpgrade(plan(['a'], 10), plan(['a', 'b'], 20))).toBe(true);
    expect(shouldUpgrade(plan(['a'], 10), plan(['a', 'b'], 11))).toBe(false);
    expect(shouldUpgrade(plan(['a'], 10), plan(['a'], 30))).toBe(false);
    expect(shouldUpgrade({ ...plan(['a'], 10), predicted: null }, plan(['a', 'b'], 30))).toBe(false);
  });
});
