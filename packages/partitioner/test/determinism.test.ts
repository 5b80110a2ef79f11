import { describe, expect, it } from 'vitest';
import type { Cluster } from '../src/cluster.js';
import { plan } from '../src/plan.js';
import { exampleCluster, model } from './helpers.js';

/** Reorders an array by a fixed permutation (reverse, then rotate), to vary input order. */
function shuffled<T>(xs: T[]): T[] {
  const r = [...xs].reverse();
  return [...r.slice(1), ...r.slice(0, 1)];
}

describe('determinism', () => {
  const cases: [string, string, number | undefined][] = [
    ['mixed-desk', 'llama-3.3-70b', 4],
    ['4x-m3-ultra-tb5-rdma', 'deepseek-v3.1', 4],
    ['4x-mac-mini-m4-pro-ethernet', 'qwen3-235b-a22b', 3],
  ];
  for (const [clusterName, modelName, bits] of cases) {
    it(`same input, same plan: ${modelName} on ${clusterName}`, () => {
      const m = model(modelName, bits);
      const c = exampleCluster(clusterName);
      expect(plan(m, c)).toEqual(plan(m, c));
    });
    it(`node and link order do not change the plan: ${modelName} on ${clusterName}`, () => {
      const m = model(modelName, bits);
      const c = exampleCluster(clusterName);
      const reordered: Cluster = { nodes: shuffled(c.nodes), links: shuffled(c.links).map((l) => ({ ...l, a: l.b, b: l.a })) };
      const a = plan(m, c);
      const b = plan(m, reordered);
      expect(b.strategy).toBe(a.strategy);
      expect(b.stages).toEqual(a.stages);
      expect(b.predicted).toEqual(a.predicted);
    });
  }
});
