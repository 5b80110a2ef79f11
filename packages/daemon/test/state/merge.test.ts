/** Merging the two sides of a healed partition (state/merge.ts): every rule, as pure functions. */
import { describe, expect, it } from 'vitest';
import { applyEvents } from '../../src/state/apply.js';
import type { ClusterEvent } from '../../src/state/events.js';
import { mergeStates } from '../../src/state/merge.js';
import { emptyState, type ClusterState } from '../../src/state/types.js';
import { link, placedPlan, profile } from './fixtures.js';

const placed = (id: string, nodes: string[], placedAt: number, model = 'm', over = {}): ClusterEvent => ({
  type: 'instance-placed',
  instance: { id, model, placedAt, nodes, plan: placedPlan(nodes[0], { ranks: nodes, ...over }) },
});

/** The pod before the split: A and B live with profiles, a link, one instance over both. */
const before: ClusterState = applyEvents(emptyState, [
  { type: 'node-joined', peerId: 'A', name: 'a', at: 1 },
  { type: 'node-joined', peerId: 'B', name: 'b', at: 1 },
  { type: 'profile-updated', profile: profile('A', 'a', { updatedAt: 2 }) },
  { type: 'profile-updated', profile: profile('B', 'b', { updatedAt: 2 }) },
  { type: 'link-measured', link: link('A', 'B', { measuredAt: 3 }) },
  placed('i0', ['A', 'B'], 4),
]);

/** Each side after 20 s apart: the other marked gone, the split instance replaced by one of its own. */
const sideA = applyEvents(before, [{ type: 'node-left', peerId: 'B', at: 10, reason: 'silent' }, { type: 'instance-removed', id: 'i0', at: 10 }, placed('iA', ['A'], 11)]);
const sideB = applyEvents(before, [
  { type: 'node-left', peerId: 'A', at: 10, reason: 'silent' },
  { type: 'instance-removed', id: 'i0', at: 10 },
  placed('iB', ['B'], 12),
  { type: 'profile-updated', profile: profile('B', 'b2', { updatedAt: 15 }) },
  { type: 'model-failed', model: 'broken', reason: 'tokenizer.json missing', attempts: 5, at: 16 },
]);

describe('merging the two sides of a healed partition', () => {
  it('every node is live again, with the newer profile and name', () => {
    const { state } = mergeStates(sideA, sideB, 100);
    expect(Object.values(state.nodes).map((n) => [n.peerId, n.status, n.name]).sort()).toEqual([
      ['A', 'live', 'a'],
      ['B', 'live', 'b2'],
    ]);
    expect(state.nodes.B.profile?.updatedAt).toBe(15);
    // Symmetric on what it keeps: merging the other way round gives the same nodes.
    expect(mergeStates(sideB, sideA, 100).state.nodes).toEqual(state.nodes);
  });

  it('a node gone on both sides stays gone with the later departure; live on both: the later join', () => {
    const x = applyEvents(before, [{ type: 'node-left', peerId: 'B', at: 20, reason: 'silent' }]);
    const y = applyEvents(before, [{ type: 'node-left', peerId: 'B', at: 30, reason: 'shutdown' }]);
    expect(mergeStates(x, y, 100).state.nodes.B).toMatchObject({ status: 'gone', leftAt: 30, leftReason: 'shutdown' });
    const j = applyEvents(before, [{ type: 'node-joined', peerId: 'B', name: 'b-new', at: 40 }]);
    expect(mergeStates(before, j, 100).state.nodes.B).toMatchObject({ status: 'live', joinedAt: 40, name: 'b' /* the profile names it */ });
  });

  it('links: the later measurement of each pair and path; links only one side measured are kept', () => {
    // A Thunderbolt path measured on one side only, and a newer Ethernet figure on the other.
    const x = applyEvents(before, [{ type: 'link-measured', link: link('A', 'B', { kind: 'thunderbolt', aInterface: 'bridge0', bInterface: 'bridge0', measuredAt: 50 }) }]);
    const y = applyEvents(before, [{ type: 'link-measured', link: link('A', 'B', { measuredAt: 60, latencyUs: 7 }) }]);
    const { state } = mergeStates(x, y, 100);
    expect(Object.values(state.links).map((l) => [l.aInterface, l.measuredAt, l.latencyUs]).sort()).toEqual([['bridge0', 50, 100], ['eth0', 60, 7]]);
    expect(mergeStates(y, x, 100).state.links).toEqual(state.links);
  });

  it('instances both sides placed on their own are duplicates: the coordinator side keeps its own (same size), the other retires', () => {
    const { state, superseded } = mergeStates(sideA, sideB, 100);
    expect(Object.keys(state.instances).sort()).toEqual(['iA', 'iB']);
    expect(superseded).toEqual([{ model: 'm', keeper: 'iA', retiring: 'iB' }]);
    expect(state.instances.iA.plan).toMatchObject({ supersedes: 'iB', supersedesSince: 100 });
    expect(state.instances.iB.plan.supersedes).toBeUndefined();
    // Merged the other way round (B coordinating), B's own is kept.
    expect(mergeStates(sideB, sideA, 100).superseded).toEqual([{ model: 'm', keeper: 'iB', retiring: 'iA' }]);
  });

  it('the instance on more nodes is kept whichever side merges; then the earlier placed', () => {
    const big = applyEvents(sideB, [{ type: 'instance-removed', id: 'iB', at: 13 }, placed('iBC', ['B', 'C'], 13)]);
    expect(mergeStates(sideA, big, 100).superseded).toEqual([{ model: 'm', keeper: 'iBC', retiring: 'iA' }]);
    expect(mergeStates(big, sideA, 100).superseded).toEqual([{ model: 'm', keeper: 'iBC', retiring: 'iA' }]);
  });

  it('instances both sides hold, and models only one side runs, are no duplicates; a failed mark from either side stays', () => {
    const x = applyEvents(sideA, [placed('shared', ['A'], 5, 'other')]);
    const y = applyEvents(sideB, [placed('shared', ['A'], 5, 'other'), placed('solo', ['B'], 14, 'third')]);
    const { state, superseded } = mergeStates(x, y, 100);
    expect(superseded.map((s) => s.model)).toEqual(['m']);
    expect(state.instances.shared.plan.supersedes).toBeUndefined();
    expect(state.instances.solo).toBeDefined();
    expect(state.failedModels.broken).toMatchObject({ reason: 'tokenizer.json missing', at: 16 });
  });

  it('an instance already superseded by an upgrade on one side is left to that succession', () => {
    const x = applyEvents(sideA, [placed('iA2', ['A'], 20, 'm', { supersedes: 'iA' })]);
    const { state, superseded } = mergeStates(x, sideB, 100);
    // iA and iA2 are busy with their own succession; iB has no partner on A's side left: it stays, unpaired.
    expect(superseded).toEqual([]);
    expect(state.instances.iA2.plan.supersedes).toBe('iA');
  });

  it('a duplicate one side already resolved stays resolved when the coordinator merges that side (the keeper both hold keeps its mark)', () => {
    const three = applyEvents(before, [{ type: 'node-joined', peerId: 'C', name: 'c', at: 1 }]);
    const majority = applyEvents(three, [{ type: 'node-left', peerId: 'B', at: 10, reason: 'silent' }, { type: 'instance-removed', id: 'i0', at: 10 }, placed('iM', ['A', 'C'], 11)]);
    const minority = applyEvents(three, [
      { type: 'node-left', peerId: 'A', at: 10, reason: 'silent' },
      { type: 'node-left', peerId: 'C', at: 10, reason: 'silent' },
      { type: 'instance-removed', id: 'i0', at: 10 },
      placed('iB', ['B'], 12),
    ]);
    // The cut node hears the majority first and merges: the copy on more nodes is kept, its own retires.
    const first = mergeStates(minority, majority, 100);
    expect(first.superseded).toEqual([{ model: 'm', keeper: 'iM', retiring: 'iB' }]);
    // Then the majority's coordinator merges the cut node's (merged) state: the resolution survives.
    const { state } = mergeStates(majority, first.state, 101);
    expect(state.instances.iM.plan.supersedes).toBe('iB');
    expect(Object.keys(state.instances).sort()).toEqual(['iB', 'iM']);
  });

  it('merging a state with itself changes nothing', () => {
    const { state, superseded } = mergeStates(sideB, sideB, 100);
    expect(superseded).toEqual([]);
    expect(state).toEqual(sideB);
  });
});
