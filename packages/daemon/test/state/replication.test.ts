import { describe, expect, it } from 'vitest';
import { decodeControl, encodeControl } from '../../src/control/codec.js';
import type { ControlMessage } from '../../src/control/messages.js';
import { liveNodeIds } from '../../src/state/apply.js';
import { Replica } from '../../src/state/replication.js';
import { link, placedPlan, profile } from './fixtures.js';

/** Replicas on an in-memory broadcast bus (through the real codec) with a shared fake clock. */
class Pod {
  now = 0;
  replicas = new Map<string, Replica>();
  cut = new Set<string>();
  /** Probability of dropping a message, with a deterministic generator. */
  dropRate = 0;
  /** When set, messages only reach replicas in the same group. */
  group: Map<string, number> | null = null;
  #rng = 12345;
  queue: { from: string; bytes: Uint8Array }[] = [];

  add(id: string, opts: { goneAfterMs?: number } = {}) {
    const r = new Replica({
      selfId: id,
      name: `n-${id}`,
      bootId: `${id}-${this.now}`,
      now: () => this.now,
      send: (m: ControlMessage) => this.queue.push({ from: id, bytes: encodeControl(m) }),
      goneAfterMs: opts.goneAfterMs ?? 3000,
    });
    this.replicas.set(id, r);
    return r;
  }

  #drop(): boolean {
    this.#rng = (this.#rng * 1103515245 + 12345) & 0x7fffffff;
    return this.#rng / 0x7fffffff < this.dropRate;
  }

  deliver() {
    while (this.queue.length) this.deliverOne();
  }

  /** Delivers the oldest queued message (what it makes replicas send is queued, not delivered). */
  deliverOne() {
    const { from, bytes } = this.queue.shift()!;
    if (this.cut.has(from)) return;
    for (const [id, r] of this.replicas) {
      if (id === from || this.cut.has(id) || this.#drop()) continue;
      if (this.group && this.group.get(id) !== this.group.get(from)) continue;
      const d = decodeControl(bytes, from);
      if (!d.ok) throw new Error(d.reason);
      r.handle(d.message);
    }
  }

  /** Advance time in 1 s heartbeats. */
  run(seconds: number) {
    for (let i = 0; i < seconds; i++) {
      this.now += 1000;
      for (const [id, r] of this.replicas) if (!this.cut.has(id)) r.tick();
      this.deliver();
    }
  }

  states() {
    return [...this.replicas.entries()].filter(([id]) => !this.cut.has(id)).map(([, r]) => JSON.stringify(r.state));
  }
}

describe('replicated cluster state', () => {
  it('three nodes agree on one state with every profile and link, led by the smallest id', () => {
    const pod = new Pod();
    const [a, b, c] = ['A', 'B', 'C'].map((id) => pod.add(id));
    for (const r of [a, b, c]) r.setProfile(profile(r.selfId));
    pod.run(5);
    b.setLinks([link('B', 'C')]);
    a.setLinks([link('A', 'B'), link('A', 'C')]);
    pod.run(3);
    expect(new Set(pod.states()).size).toBe(1);
    expect(liveNodeIds(c.state)).toEqual(['A', 'B', 'C']);
    expect(Object.keys(c.state.links)).toHaveLength(3);
    expect(Object.values(c.state.nodes).every((n) => n.profile !== null)).toBe(true);
    expect(a.isCoordinator).toBe(true);
    expect(b.isCoordinator || c.isCoordinator).toBe(false);
  });

  it('a silent node is marked gone (an event) within the timeout; the others still agree', () => {
    const pod = new Pod();
    const rs = ['A', 'B', 'C'].map((id) => pod.add(id));
    for (const r of rs) r.setProfile(profile(r.selfId));
    pod.run(5);
    pod.cut.add('C');
    pod.run(3);
    expect(rs[0].state.nodes.C.status).toBe('live'); // 3 s of silence is not yet > 3 s
    pod.run(2);
    for (const r of rs.slice(0, 2)) expect(r.state.nodes.C).toMatchObject({ status: 'gone', leftReason: 'silent' });
    expect(new Set(pod.states()).size).toBe(1);
  });

  it('when the coordinator dies the next smallest takes over and marks it gone', () => {
    const pod = new Pod();
    const rs = ['A', 'B', 'C'].map((id) => pod.add(id));
    for (const r of rs) r.setProfile(profile(r.selfId));
    pod.run(5);
    pod.cut.add('A');
    pod.run(6);
    const [, b, c] = rs;
    expect(b.isCoordinator).toBe(true);
    expect(b.state.nodes.A.status).toBe('gone');
    expect(JSON.stringify(c.state)).toBe(JSON.stringify(b.state));
    expect(c.position).toEqual(b.position);
  });

  it('a restarted node (empty state, smallest id) adopts the pod history before leading', () => {
    const pod = new Pod();
    const rs = ['A', 'B', 'C'].map((id) => pod.add(id));
    for (const r of rs) r.setProfile(profile(r.selfId));
    pod.run(5);
    rs[1].propose({ type: 'instance-placed', instance: { id: 'i1', model: 'm', placedAt: 1, nodes: ['B'], plan: placedPlan('B') } });
    expect(rs[0].propose({ type: 'instance-placed', instance: { id: 'i1', model: 'm', placedAt: 1, nodes: ['B'], plan: placedPlan('B') } })).toBe(true);
    pod.run(1);
    pod.replicas.delete('A');
    const a2 = pod.add('A');
    a2.setProfile(profile('A'));
    pod.run(6);
    expect(a2.isCoordinator).toBe(true);
    expect(a2.state.instances.i1).toBeDefined();
    expect(new Set(pod.states()).size).toBe(1);
    expect(liveNodeIds(a2.state)).toEqual(['A', 'B', 'C']);
  });

  it('a joining node with the smallest id that starts leading before it hears the pod takes the pod history over', () => {
    const pod = new Pod();
    const rs = ['B', 'C'].map((id) => pod.add(id));
    for (const r of rs) r.setProfile(profile(r.selfId));
    pod.run(5);
    expect(rs[0].propose({ type: 'instance-placed', instance: { id: 'i1', model: 'm', placedAt: 1, nodes: ['B'], plan: placedPlan('B') } })).toBe(true);
    pod.run(1);
    // A's first heartbeats do not cross (discovery is slow): it leads an epoch of its own, empty.
    const a = pod.add('A');
    a.setProfile(profile('A'));
    pod.group = new Map([['A', 2], ['B', 1], ['C', 1]]);
    pod.run(3);
    expect(a.isCoordinator).toBe(true);
    expect(a.state.instances.i1).toBeUndefined();
    pod.group = null;
    pod.run(1);
    expect(rs[0].state.instances.i1).toBeDefined(); // B did not follow A's empty state
    pod.run(4);
    expect(a.isCoordinator).toBe(true);
    expect(a.state.instances.i1).toBeDefined();
    expect(new Set(pod.states()).size).toBe(1);
    expect(a.heals()).toEqual([]); // a pod joined, not a partition healed
    expect(liveNodeIds(a.state)).toEqual(['A', 'B', 'C']);
    expect(Object.values(a.state.nodes).every((n) => n.profile)).toBe(true);
  });

  it('a healed partition converges on the smaller coordinator, with every node and its facts', () => {
    const pod = new Pod();
    pod.group = new Map([['A', 1], ['B', 1], ['C', 2], ['D', 2]]);
    const rs = ['A', 'B', 'C', 'D'].map((id) => pod.add(id));
    for (const r of rs) r.setProfile(profile(r.selfId));
    rs[2].setLinks([link('C', 'D')]);
    pod.run(6);
    expect(rs[2].isCoordinator).toBe(true); // each side led by its own smallest id
    expect(liveNodeIds(rs[3].state)).toEqual(['C', 'D']);
    pod.group = null;
    pod.run(6);
    expect(new Set(pod.states()).size).toBe(1);
    expect(rs[0].isCoordinator && !rs[2].isCoordinator).toBe(true);
    expect(liveNodeIds(rs[3].state)).toEqual(['A', 'B', 'C', 'D']);
    expect(Object.values(rs[3].state.nodes).every((n) => n.profile)).toBe(true);
    expect(Object.keys(rs[3].state.links)).toHaveLength(1);
  });

  it('converges despite 30% message loss', () => {
    const pod = new Pod();
    pod.dropRate = 0.3;
    const rs = ['A', 'B', 'C', 'D'].map((id) => pod.add(id, { goneAfterMs: 5000 }));
    for (const r of rs) r.setProfile(profile(r.selfId));
    rs[0].setLinks([link('A', 'B'), link('A', 'C'), link('A', 'D')]);
    pod.run(15);
    pod.dropRate = 0;
    pod.run(3);
    expect(new Set(pod.states()).size).toBe(1);
    expect(liveNodeIds(rs[3].state)).toEqual(['A', 'B', 'C', 'D']);
    expect(Object.keys(rs[3].state.links)).toHaveLength(3);
  });

  it('a coordinator that says goodbye is recorded as shut down by the next one, within a heartbeat', () => {
    const pod = new Pod();
    const rs = ['A', 'B', 'C'].map((id) => pod.add(id));
    pod.run(5);
    rs[0].stop();
    pod.deliver();
    pod.replicas.delete('A');
    pod.run(1);
    expect(rs[1].isCoordinator).toBe(true);
    for (const r of rs.slice(1)) expect(r.state.nodes.A).toMatchObject({ status: 'gone', leftReason: 'shutdown' });
  });

  it('a clean goodbye marks the node gone at once', () => {
    const pod = new Pod();
    const rs = ['A', 'B'].map((id) => pod.add(id));
    pod.run(4);
    rs[1].stop();
    pod.deliver();
    expect(rs[0].state.nodes.B).toMatchObject({ status: 'gone', leftReason: 'shutdown' });
  });
});

describe('a partition that heals', () => {
  const placedOn = (id: string, nodes: string[], placedAt: number) => ({ type: 'instance-placed' as const, instance: { id, model: 'm', placedAt, nodes, plan: placedPlan(nodes[0], { ranks: nodes }) } });

  /** Runs `seconds` heartbeats, asserting after every delivery that `watch` still holds `instance` in its state. */
  function runKeeping(pod: Pod, seconds: number, watch: Replica, instance: string, check: () => void = () => {}) {
    for (let i = 0; i < seconds; i++) {
      pod.now += 1000;
      for (const [id, r] of pod.replicas) if (!pod.cut.has(id)) r.tick();
      for (let n = 0; pod.queue.length; n++) {
        pod.deliverOne();
        expect(watch.state.instances[instance], `${watch.selfId} lost ${instance} mid-heal`).toBeDefined();
        check();
        if (n > 10_000) throw new Error('message storm');
      }
    }
  }

  it('2 nodes: both sides placed the model on their own; after the heal one coordinator merges both, nothing is lost, and the duplicate retires by rule', () => {
    const pod = new Pod();
    const [a, b] = ['A', 'B'].map((id) => pod.add(id));
    for (const r of [a, b]) r.setProfile(profile(r.selfId));
    pod.run(4);
    expect(a.propose(placedOn('i0', ['A', 'B'], 1))).toBe(true);
    pod.run(1);
    pod.group = new Map([['A', 1], ['B', 2]]);
    pod.run(5);
    expect(a.isCoordinator && b.isCoordinator).toBe(true); // split brain, as each side sees it
    // Each side's serving coordinator replaces the instance that spanned the lost node.
    for (const [r, id] of [[a, 'iA'], [b, 'iB']] as const) {
      expect(r.propose({ type: 'instance-removed', id: 'i0', at: pod.now })).toBe(true);
      expect(r.propose(placedOn(id, [r.selfId], pod.now))).toBe(true);
    }
    // Facts written on B's side only: a new profile and a link measurement of its own.
    b.setProfile(profile('B', 'B-renamed', { updatedAt: 50 }));
    pod.run(3);
    expect(a.state.nodes.B.status).toBe('gone');
    pod.group = null;
    // Until A has merged B's history, B is not live in A's state (nothing is placed on it blind).
    runKeeping(pod, 6, b, 'iB', () => {
      if (a.heals().length === 0) expect(a.state.nodes.B.status).toBe('gone');
    });
    expect(new Set(pod.states()).size).toBe(1);
    expect(a.isCoordinator).toBe(true);
    expect(b.isCoordinator).toBe(false);
    expect(b.position.leader).toBe('A');
    expect(liveNodeIds(b.state)).toEqual(['A', 'B']);
    expect(b.state.nodes.B.name).toBe('B-renamed'); // B's side's facts survive
    expect(Object.keys(b.state.instances).sort()).toEqual(['iA', 'iB']);
    // Same size: the coordinator's side keeps its instance; B's finishes its requests and retires.
    expect(b.state.instances.iA.plan).toMatchObject({ supersedes: 'iB' });
    expect(b.state.instances.iA.plan.supersedesSince).toBeGreaterThan(0);
    expect(a.heals()).toHaveLength(1);
    expect(a.heals()[0]).toMatchObject({ from: 'B', merged: { leader: 'B' }, superseded: [{ model: 'm', keeper: 'iA', retiring: 'iB' }] });
    // Converged: no further merges while the pod stays whole.
    pod.run(5);
    expect(a.heals()).toHaveLength(1);
  });

  it('3 nodes {A} | {B, C}: the follower on the other side keeps its instance through the heal; the larger instance wins', () => {
    const pod = new Pod();
    const rs = ['A', 'B', 'C'].map((id) => pod.add(id));
    const [a, b, c] = rs;
    for (const r of rs) r.setProfile(profile(r.selfId));
    pod.run(4);
    pod.group = new Map([['A', 1], ['B', 2], ['C', 2]]);
    pod.run(5);
    expect(b.isCoordinator).toBe(true);
    expect(a.propose(placedOn('iA', ['A'], pod.now))).toBe(true);
    expect(b.propose(placedOn('iBC', ['B', 'C'], pod.now))).toBe(true);
    expect(b.propose({ type: 'model-failed', model: 'other', reason: 'no tokenizer', attempts: 5, at: pod.now })).toBe(true);
    pod.run(1);
    expect(c.state.instances.iBC).toBeDefined();
    pod.group = null;
    runKeeping(pod, 6, c, 'iBC');
    expect(new Set(pod.states()).size).toBe(1);
    expect(a.isCoordinator).toBe(true);
    expect(liveNodeIds(c.state)).toEqual(['A', 'B', 'C']);
    // The instance on two nodes is kept, whoever coordinates; the single-node one retires.
    expect(c.state.instances.iBC.plan.supersedes).toBe('iA');
    expect(c.state.instances.iA).toBeDefined();
    expect(c.state.failedModels.other).toMatchObject({ reason: 'no tokenizer' });
  });

  it('a follower ignores a snapshot of an older epoch than the one it follows (the coordinator merges first)', () => {
    const sent: ControlMessage[] = [];
    const b = new Replica({ selfId: 'B', name: 'b', bootId: 'b1', now: () => 10_000, send: (m) => sent.push(m) });
    const newer = { nodes: {}, links: {}, instances: { iB: { id: 'iB', model: 'm', placedAt: 1, nodes: ['B'], plan: placedPlan('B') } }, failedModels: {} };
    b.handle({ type: 'heartbeat', from: 'A', name: 'a', bootId: 'a1', at: 0, log: { epoch: 7, leader: 'A', seq: 3 } });
    b.handle({ type: 'snapshot', from: 'A', epoch: 7, seq: 3, state: newer as never });
    expect(b.position).toEqual({ epoch: 7, leader: 'A', seq: 3 });
    b.handle({ type: 'snapshot', from: 'A', epoch: 6, seq: 9, state: { nodes: {}, links: {}, instances: {}, failedModels: {} } as never });
    expect(b.state.instances.iB).toBeDefined();
    expect(b.position.epoch).toBe(7);
  });
});

describe('duplicate identity seen in heartbeats', () => {
  const hb = (from: string, bootId: string) => ({ type: 'heartbeat' as const, from, name: from, bootId, at: 0, log: { epoch: 0, leader: '', seq: 0 } });

  it('a restart (new boot id for good) is not a duplicate; alternating boot ids are', () => {
    const found: [string, string[]][] = [];
    const r = new Replica({ selfId: 'A', name: 'a', bootId: 'a1', now: () => 0, send: () => {}, onDuplicate: (p, b) => found.push([p, b]) });
    r.handle(hb('B', 'b1'));
    r.handle(hb('B', 'b1'));
    r.handle(hb('B', 'b2')); // restarted
    r.handle(hb('B', 'b2'));
    expect(found).toEqual([]);
    r.handle(hb('B', 'b1')); // the old one is still alive: two copies
    r.handle(hb('B', 'b2'));
    expect(found).toEqual([['B', ['b1', 'b2']]]);
    expect(r.duplicates()).toEqual(['B']);
  });

  it('a heartbeat carrying our own id from another process flags ourselves', () => {
    const found: string[] = [];
    const r = new Replica({ selfId: 'A', name: 'a', bootId: 'a1', now: () => 0, send: () => {}, onDuplicate: (p) => found.push(p) });
    r.handle(hb('A', 'a1'));
    expect(found).toEqual([]);
    r.handle(hb('A', 'zz'));
    expect(found).toEqual(['A']);
  });
});
