import { parseCluster } from '@orchard/partitioner';
import { describe, expect, it } from 'vitest';
import { applyEvents } from '../../src/state/apply.js';
import { clusterView } from '../../src/state/cluster-view.js';
import { emptyState } from '../../src/state/types.js';
import { link, profile } from '../state/fixtures.js';

describe("planner's cluster JSON from the shared state", () => {
  const state = applyEvents(emptyState, [
    { type: 'profile-updated', profile: profile('A', 'alpha') },
    { type: 'profile-updated', profile: profile('B', 'beta', { capability: { memoryBandwidthGBps: 400, matmulGflops: 20_000, method: 't', measuredAt: 1 } }) },
    { type: 'node-joined', peerId: 'C', name: 'no-profile-yet', at: 1 },
    { type: 'profile-updated', profile: profile('D', 'delta') },
    { type: 'node-left', peerId: 'D', at: 2, reason: 'silent' },
    { type: 'link-measured', link: link('A', 'B', { kind: 'ethernet', aInterface: 'en0', bandwidthGbps: 1 }) },
    { type: 'link-measured', link: link('A', 'B', { kind: 'thunderbolt', aInterface: 'en2', bInterface: 'en2', bandwidthGbps: 40, latencyUs: 30 }) },
    { type: 'link-measured', link: link('A', 'B', { kind: 'wifi', aInterface: 'en1', bInterface: 'en1', bandwidthGbps: 0.5 }) },
  ]);

  it('lists live profiled nodes with planner fields and names', () => {
    const v = clusterView(state, { mode: 'private', coordinator: 'A' });
    expect(v.mode).toBe('private');
    expect(v.nodes.map((n) => [n.id, n.name])).toEqual([['A', 'alpha'], ['B', 'beta']]);
    expect(v.nodes[1]).toMatchObject({ memoryBytes: 16 * 2 ** 30, availableBytes: 12 * 2 ** 30, memoryBandwidthGBps: 400, tflops: 20 });
  });

  it("a node's memory kept outside any plan (draft model, prefix cache) is not offered to the planner", () => {
    const reserving = applyEvents(state, [{ type: 'profile-updated', profile: profile('B', 'beta', { reservedBytes: 3 * 2 ** 30 }) }]);
    const v = clusterView(reserving, { mode: 'open', coordinator: 'A' });
    expect(v.nodes.find((n) => n.id === 'B')).toMatchObject({ memoryBytes: 16 * 2 ** 30, availableBytes: 9 * 2 ** 30 });
    expect(v.nodes.find((n) => n.id === 'A')!.availableBytes).toBe(12 * 2 ** 30);
    const more = applyEvents(state, [{ type: 'profile-updated', profile: profile('B', 'beta', { reservedBytes: 64 * 2 ** 30 }) }]);
    expect(clusterView(more, { mode: 'open', coordinator: 'A' }).nodes.find((n) => n.id === 'B')!.availableBytes).toBe(0);
  });

  it('one link per pair: the best kind, with every path kept under paths', () => {
    const v = clusterView(state, { mode: 'open', coordinator: 'A' });
    expect(v.links).toEqual([{ a: 'A', b: 'B', kind: 'thunderbolt', latencyUs: 30, bandwidthGbps: 40 }]);
    expect(v.paths).toHaveLength(3);
  });

  it("passes the planner's own cluster validation, tiny figures included", () => {
    const tiny = applyEvents(state, [{ type: 'link-measured', link: link('A', 'B', { kind: 'rdma', aInterface: 'en3', bandwidthGbps: 0.0001234, latencyUs: 0.4 }) }]);
    const v = clusterView(tiny, { mode: 'open', coordinator: 'A' });
    expect(v.links[0]).toMatchObject({ kind: 'rdma', bandwidthGbps: 0.0001234 });
    const parsed = parseCluster(JSON.parse(JSON.stringify(v)));
    expect(parsed.nodes.map((n) => n.id)).toEqual(['A', 'B']);
    expect(parsed.links).toHaveLength(1);
  });
});
