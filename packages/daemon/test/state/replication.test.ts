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
    while (this.queue.length) {
      const { from, bytes } = this.queue.shift()!;
      if (this.cut.has(from)) continue;
      for (const [id, r] of this.replicas) {
        if (id === from || this.cut.has(id) || this.#drop()) continue;
        if (this.group && this.group.get(id) !== this.group.get(from)) continue;
        const d = decodeControl(bytes, from);
        if (!d.ok) throw new Error(d.reason);
        r.handle(d.message);
      }
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
