import { describe, expect, it } from 'vitest';
import type { Cluster } from '../src/cluster.js';
import { InfeasibleError } from '../src/errors.js';
import { kvHeadsPerMember } from '../src/layout.js';
import { plan } from '../src/plan.js';
import { exampleCluster, mesh, model, node } from './helpers.js';

function catchError(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected an error');
}

const layersOf = (p: ReturnType<typeof plan>, id: string) => {
  const s = p.stages.find((st) => st.nodes.includes(id))!;
  return s.layers[1] - s.layers[0];
};

describe('search', () => {
  const m70 = model('llama-3.3-70b', 8); // ~75 GB: never fits on one of the nodes below

  it('picks a single node when the model fits and links would only slow it', () => {
    const p = plan(model('llama-3.1-8b'), exampleCluster('2x-m4-max-tb5-tcp'));
    expect(p.strategy).toBe('single');
    expect(p.stages[0].transport).toBe('local');
    expect(p.alternatives.find((a) => a.strategy === 'tensor')?.rejected).toMatch(/all-reduces over TCP/);
  });

  it('heterogeneous nodes: the fast node takes as many layers as its memory allows, not a RAM-proportional half', () => {
    // A 1 ms link: tensor parallel's 160 all-reduces per token lose to the pipeline's one hop.
    const c: Cluster = { nodes: [node('slow', 60, 200), node('fast', 60, 800)], links: mesh(['slow', 'fast'], 'ethernet', 1000, 10) };
    const p = plan(m70, c);
    expect(p.strategy).toBe('pipeline');
    const fast = layersOf(p, 'fast');
    expect(fast).toBeGreaterThan(45);
    expect(fast + layersOf(p, 'slow')).toBe(80);
    // One more layer would not fit on the fast node.
    const perLayer = p.memory.fast.weightsBytes / fast;
    expect(p.memory.fast.totalBytes + perLayer).toBeGreaterThan(p.memory.fast.availableBytes);
  });

  it('memory-bound split: equal speed, unequal memory; every node within its memory', () => {
    const c: Cluster = { nodes: [node('big', 70, 400), node('small', 20, 400)], links: mesh(['big', 'small'], 'thunderbolt', 250, 40) };
    const p = plan(m70, c);
    expect(p.strategy).toBe('pipeline');
    for (const mem of Object.values(p.memory)) expect(mem.totalBytes).toBeLessThanOrEqual(mem.availableBytes);
    expect(layersOf(p, 'small')).toBeLessThan(layersOf(p, 'big'));
    expect(layersOf(p, 'small')).toBeGreaterThan(10);
  });

  it('two equal nodes over a slow link: pipeline (tensor all-reduces would cost more than they save), split evenly', () => {
    const c: Cluster = { nodes: [node('a', 50, 400), node('b', 50, 400)], links: mesh(['a', 'b'], 'ethernet', 1000, 1) };
    const p = plan(m70, c);
    expect(p.strategy).toBe('pipeline');
    expect(Math.abs(layersOf(p, 'a') - layersOf(p, 'b'))).toBeLessThanOrEqual(1);
  });

  it('kv_heads not divisible by the group: 3-way tensor parallel in whole heads with KV replicated where groups straddle', () => {
    const ids = ['n1', 'n2', 'n3'];
    const c: Cluster = { nodes: ids.map((id) => node(id, 100, 546)), links: mesh(ids, 'rdma', 8, 80) };
    const p = plan(model('llama-3.3-70b', 4), c);
    expect(p.strategy).toBe('tensor');
    expect(p.stages[0].tensorParallel).toBe(3);
    expect(p.stages[0].heads).toEqual([22, 21, 21]);
    const kv = kvHeadsPerMember(p.stages[0].heads, 64, 8);
    const [a, b] = p.stages[0].nodes;
    expect(p.memory[b].kvCacheBytes / p.memory[a].kvCacheBytes).toBeCloseTo(kv[1] / kv[0], 6);
  });

  it('unequal nodes in a tensor group get uneven head shares', () => {
    const c = exampleCluster('mixed-desk');
    const p = plan(model('llama-3.3-70b', 4), c);
    expect(p.strategy).toBe('tensor');
    const [h0, h1] = p.stages[0].heads;
    expect(p.stages[0].nodes).toEqual(['studio', 'macbook-pro']);
    expect(h0).toBeGreaterThan(h1); // 546 GB/s vs 273 GB/s
    expect(h0 + h1).toBe(64);
  });

  it('hybrid: tensor parallel inside RDMA pairs, pipeline across them over Ethernet', () => {
    const ids = ['p1', 'p2', 'p3', 'p4'];
    const nodes = ids.map((id) => node(id, 56, 273, { chip: 'Apple M4 Pro' }));
    const links = [...mesh(ids, 'ethernet', 100, 10), ...mesh(['p1', 'p2'], 'rdma', 8, 80), ...mesh(['p3', 'p4'], 'rdma', 8, 80)];
    const p = plan(model('qwen3-235b-a22b', 4), { nodes, links });
    expect(p.strategy).toBe('hybrid');
    expect(p.stages.map((s) => s.tensorParallel)).toEqual([2, 2]);
    expect(p.stages.map((s) => s.transport)).toEqual(['rdma', 'rdma']);
    // Between the pairs only Ethernet: the hops are TCP.
    expect(p.stages.map((s) => s.hopTransport)).toEqual(['tcp', 'tcp']);
    const pipeline = p.alternatives.find((a) => a.strategy === 'pipeline');
    expect(pipeline?.predicted?.decodeTokensPerSecond ?? 0).toBeLessThan(p.predicted.decodeTokensPerSecond);
  });

  it('infeasible in total: bytes needed vs available and what would make it fit', () => {
    let err: unknown;
    try {
      plan(model('kimi-k2-thinking'), exampleCluster('2x-m4-max-tb5-rdma'));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InfeasibleError);
    const e = err as InfeasibleError;
    expect(e.neededBytes).toBeGreaterThan(e.availableBytes);
    expect(e.neededBytes).toBeGreaterThan(594e9);
    expect(e.availableBytes).toBe(2 * 112 * 1024 ** 3);
    expect(e.suggestions.join(' ')).toMatch(/more nodes/);
    expect(e.message).toMatch(/needs [\d.]+ GB .* has [\d.]+ GB available/);
  });

  it('suggests fewer bits or a shorter context when those close the gap', () => {
    const c: Cluster = { nodes: [node('a', 100, 500)], links: [] };
    expect(() => plan(model('llama-3.3-70b'), c)).toThrow(/--bits 8/);
    const small: Cluster = { nodes: [node('a', 20, 500)], links: [] };
    const kvHeavy = () => plan(model('llama-3.1-8b', 4), small, { contextTokens: 131072, sequences: 1 });
    expect(kvHeavy).toThrow(/--context \d+/);
    // Following the suggestions makes it fit.
    const context = Number(/--context (\d+)/.exec(String(catchError(kvHeavy)))![1]);
    expect(plan(model('llama-3.1-8b', 4), small, { contextTokens: context }).strategy).toBe('single');
    const bits = Number(/--bits (\d+)/.exec(String(catchError(() => plan(model('llama-3.3-70b'), c))))![1]);
    expect(plan(model('llama-3.3-70b', bits), c).strategy).toBe('single');
  });

  it('infeasible per node: enough memory in total but the nodes are not linked', () => {
    const c: Cluster = { nodes: [node('a', 50, 400), node('b', 50, 400)], links: [] };
    expect(() => plan(m70, c)).toThrow(/no chain of linked nodes/);
  });
});
