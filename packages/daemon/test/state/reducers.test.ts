import { describe, expect, it } from 'vitest';
import { applyEvent, applyEvents, liveNodeIds } from '../../src/state/apply.js';
import { electCoordinator } from '../../src/state/coordinator.js';
import { emptyState } from '../../src/state/types.js';
import { link, placedPlan, profile } from './fixtures.js';

describe('cluster state reducers', () => {
  it('node-joined adds a live node; node-left marks it gone and drops its links', () => {
    let s = applyEvents(emptyState, [
      { type: 'node-joined', peerId: 'A', name: 'a', at: 1 },
      { type: 'node-joined', peerId: 'B', name: 'b', at: 2 },
      { type: 'link-measured', link: link('A', 'B') },
    ]);
    expect(liveNodeIds(s)).toEqual(['A', 'B']);
    expect(Object.keys(s.links)).toHaveLength(1);
    s = applyEvent(s, { type: 'node-left', peerId: 'B', at: 3, reason: 'silent' });
    expect(s.nodes.B).toMatchObject({ status: 'gone', leftAt: 3, leftReason: 'silent' });
    expect(Object.keys(s.links)).toHaveLength(0);
    expect(liveNodeIds(s)).toEqual(['A']);
  });

  it('state is frozen and reducers do not mutate their input', () => {
    const s1 = applyEvent(emptyState, { type: 'node-joined', peerId: 'A', name: 'a', at: 1 });
    const s2 = applyEvent(s1, { type: 'profile-updated', profile: profile('A', 'alpha') });
    expect(Object.isFrozen(s2)).toBe(true);
    expect(Object.isFrozen(s2.nodes)).toBe(true);
    expect(s1.nodes.A.profile).toBeNull();
    expect(s2.nodes.A.profile?.name).toBe('alpha');
    expect(s2.nodes.A.name).toBe('alpha');
  });

  it('rejoining keeps the old profile until a new one arrives', () => {
    const s = applyEvents(emptyState, [
      { type: 'node-joined', peerId: 'A', name: 'a', at: 1 },
      { type: 'profile-updated', profile: profile('A', 'a') },
      { type: 'node-left', peerId: 'A', at: 2, reason: 'shutdown' },
      { type: 'node-joined', peerId: 'A', name: 'a', at: 3 },
    ]);
    expect(s.nodes.A).toMatchObject({ status: 'live', joinedAt: 3, leftAt: null });
    expect(s.nodes.A.profile).not.toBeNull();
  });

  it('link-measured between gone nodes is ignored; newer measurement replaces older', () => {
    let s = applyEvents(emptyState, [{ type: 'node-joined', peerId: 'A', name: 'a', at: 1 }]);
    s = applyEvent(s, { type: 'link-measured', link: link('A', 'B') });
    expect(Object.keys(s.links)).toHaveLength(0);
    s = applyEvent(s, { type: 'node-joined', peerId: 'B', name: 'b', at: 1 });
    s = applyEvent(s, { type: 'link-measured', link: link('A', 'B', { latencyUs: 50 }) });
    s = applyEvent(s, { type: 'link-measured', link: link('A', 'B', { latencyUs: 70, measuredAt: 9 }) });
    expect(Object.values(s.links).map((l) => l.latencyUs)).toEqual([70]);
  });

  it('instances are placed and removed', () => {
    let s = applyEvent(emptyState, { type: 'instance-placed', instance: { id: 'i1', model: 'm', placedAt: 1, nodes: ['A'], plan: placedPlan('A') } });
    expect(s.instances.i1.nodes).toEqual(['A']);
    s = applyEvent(s, { type: 'instance-removed', id: 'i1', at: 2 });
    expect(s.instances).toEqual({});
  });

  it('coordinator is the smallest live peer id', () => {
    expect(electCoordinator(['QmZ', '12D3KooB', '12D3KooA'])).toBe('12D3KooA');
    expect(electCoordinator([])).toBeNull();
  });
});
