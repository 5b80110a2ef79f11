/**
 * The planner and the engine agree: for every architecture the engine runs and a grid of clusters
 * (fast and slow nodes, RDMA and Ethernet links — so the planner considers single
 * nodes, pipelines, even and uneven tensor groups and hybrids), every layout the planner is allowed to
 * propose is one `canRun` accepts and every rank of it loads; and the plan it picks is one of them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { canRun, instanceLayoutOf, loadModelConfig, loadShard, shardSpecOf, worldSize, type InstanceLayout } from '@orchard/engine';
import { writeRandomModel, type RandomModelOptions } from '@orchard/engine/testing';
import { plan, type Cluster, type Layout } from '@orchard/partitioner';
import { describeModel, engineCapabilities } from '../../src/models/describe.js';

const tmp = mkdtempSync(join(os.tmpdir(), 'orchard-agreement-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const VARIANTS: Record<string, RandomModelOptions> = {
  llama: { variant: 'llama', numLayers: 4 },
  'llama 12 heads / 3 KV': { variant: 'llama', numLayers: 4, hiddenSize: 96, numHeads: 12, numKvHeads: 3 },
  llama3: { variant: 'llama3', numLayers: 3 },
  'mistral, one KV head': { variant: 'mistral', numLayers: 4, numKvHeads: 1 },
  'qwen2 bias': { variant: 'qwen2', numLayers: 3 },
  'qwen3 tied': { variant: 'qwen3', numLayers: 4, tiedEmbeddings: true },
  // Mixtures of experts: tensor groups split the experts in proportion to their heads.
  'qwen3-moe': { variant: 'qwen3-moe', numLayers: 4 },
  'deepseek-v3 (MLA)': { variant: 'deepseek-v3', numLayers: 4 },
  'gpt-oss': { variant: 'gpt-oss', numLayers: 4 },
};

/**
 * Clusters of mixed speed and links. Memory is roomy: every candidate the search makes then fits, so
 * the engine's capabilities are asked about all of them (pipelines, hybrids and tensor groups alike).
 */
function clusters(): Record<string, Cluster> {
  const node = (id: string, bandwidth: number) => ({ id, memoryBytes: 64 * 2 ** 30, availableBytes: 16 * 2 ** 30, memoryBandwidthGBps: bandwidth, tflops: bandwidth / 20 });
  const mesh = (ids: string[], kind: 'rdma' | 'ethernet', latencyUs: number, bandwidthGbps: number) =>
    ids.flatMap((a, i) => ids.slice(i + 1).map((b) => ({ a, b, kind, latencyUs, bandwidthGbps })));
  const fast3 = ['a', 'b', 'c'];
  return {
    'two equal nodes over RDMA': { nodes: [node('a', 400), node('b', 400)], links: mesh(['a', 'b'], 'rdma', 5, 80) },
    'fast and slow over RDMA (uneven heads)': { nodes: [node('a', 800), node('b', 200)], links: mesh(['a', 'b'], 'rdma', 5, 80) },
    'three mixed nodes over RDMA': { nodes: [node('a', 800), node('b', 400), node('c', 100)], links: mesh(fast3, 'rdma', 5, 80) },
    'four nodes, two RDMA pairs over Ethernet (pipelines, hybrids)': {
      nodes: [node('a', 400), node('b', 400), node('c', 300), node('d', 200)],
      links: [...mesh(['a', 'b'], 'rdma', 5, 80), ...mesh(['c', 'd'], 'rdma', 5, 80), ...mesh(['a', 'c'], 'ethernet', 100, 10), ...mesh(['a', 'd'], 'ethernet', 100, 10), ...mesh(['b', 'c'], 'ethernet', 100, 10), ...mesh(['b', 'd'], 'ethernet', 100, 10)],
    },
    'two slow nodes over Ethernet': { nodes: [node('a', 50), node('b', 60)], links: mesh(['a', 'b'], 'ethernet', 200, 1) },
  };
}

/** Every rank of `layout` loads its shard (tensors found, sliced and read). */
function loadsEveryRank(dir: string, layout: InstanceLayout): void {
  const config = loadModelConfig(dir);
  for (let rank = 0; rank < worldSize(layout); rank++) {
    const shard = loadShard(dir, shardSpecOf(layout, rank), { config, allReduce: async () => {}, maxSeqLen: 8 });
    expect(shard.bytesRead).toBeGreaterThan(0);
  }
}

describe.each(Object.entries(VARIANTS))('%s', (name, options) => {
  const dir = join(tmp, name.replace(/[^a-z0-9]+/gi, '-'));
  writeRandomModel(dir, { seed: 3, ...options });

  it('every layout the planner may propose on every cluster runs, and the chosen one is among them', async () => {
    const model = await describeModel(dir, { name });
    const runnable = engineCapabilities(model).runnable!;
    const accepted = new Map<string, InstanceLayout>();
    let refused = 0;
    let uneven = 0;
    let tensor = 0;
    for (const cluster of Object.values(clusters())) {
      const chosen = plan(model.spec, cluster, { contextTokens: 64, promptTokens: 16, sequences: 1 }, {
        runnable: (l: Layout) => {
          const verdict = runnable(l);
          if (verdict === true) accepted.set(JSON.stringify(instanceLayoutOf(l.stages)), instanceLayoutOf(l.stages));
          else refused++;
          return verdict;
        },
      });
      expect(accepted.has(JSON.stringify(instanceLayoutOf(chosen.stages)))).toBe(true);
    }
    for (const layout of accepted.values()) {
      expect(canRun(model.dims, layout)).toEqual({ ok: true });
      loadsEveryRank(dir, layout);
      if (layout.tensor > 1) tensor++;
      if (layout.heads) uneven++;
    }
    // The grid does reach tensor groups, uneven ones among them.
    expect(tensor).toBeGreaterThan(0);
    expect(uneven).toBeGreaterThan(0);
    expect([...accepted.values()].some((l) => l.stages.length > 1)).toBe(true);
    expect(accepted.size + refused).toBeGreaterThan(3);
  }, 120_000);
});
