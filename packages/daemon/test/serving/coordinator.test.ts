/**
 * The coordinator's decisions as pure functions, like the reducers: a state, a cluster view and a clock
 * in, events out, the events folded into the state for the next step.
 */
import { describe, expect, it } from 'vitest';
import type { Cluster } from '@orchard/partitioner';
import { applyEvents } from '../../src/state/apply.js';
import type { ClusterEvent } from '../../src/state/events.js';
import { emptyState, type ClusterState } from '../../src/state/types.js';
import { mergeStates } from '../../src/state/merge.js';
import { BACKOFF_BASE_MS, decide, emptyMemory, MAX_ATTEMPTS, RETIRE_AFTER_MS, RETIRE_SETTLE_MS, type Command, type Memory, type View } from '../../src/serving/coordinator.js';
import { profile } from '../state/fixtures.js';
import { description } from './fixtures.js';

const model = description({ weightsBytes: 2 ** 30, maxContext: 2048 });
const node = (id: string, freeGiB = 32, bandwidth = 100) => ({ id, memoryBytes: 64 * 2 ** 30, availableBytes: freeGiB * 2 ** 30, memoryBandwidthGBps: bandwidth, tflops: 10 });
const linked = (ids: string[]): Cluster['links'] => ids.flatMap((a, i) => ids.slice(i + 1).map((b) => ({ a, b, kind: 'ethernet' as const, latencyUs: 50, bandwidthGbps: 10 })));

/** A small pod the tests step through: state, memory and clock, with events applied as the replica would. */
class Pod {
  state: ClusterState;
  memory: Memory = emptyMemory;
  now = 1_000_000;
  cluster: Cluster;
  ready = new Set<string>();
  statuses = new Map<string, { active: number; queued: number; at: number; idleMs?: number }>();
  events: ClusterEvent[] = [];
  filesAt = new Map<string, number>();
  keepAliveMs: number | null = null;
  /** Per-model keep-alive from requests (Ollama's keep_alive). */
  keepAlives = new Map<string, number | null>();
  #n = 0;

  constructor(nodes: Cluster['nodes']) {
    this.cluster = { nodes, links: linked(nodes.map((n) => n.id)) };
    this.state = applyEvents(
      emptyState,
      nodes.flatMap((n): ClusterEvent[] => [
        { type: 'node-joined', peerId: n.id, name: n.id, at: 1 },
        { type: 'profile-updated', profile: profile(n.id) },
      ]),
    );
  }

  view(): View {
    return { state: this.state, cluster: this.cluster, now: this.now, ready: (id) => this.ready.has(id), status: (id) => this.statuses.get(id), filesAt: (m) => this.filesAt.get(m) ?? 0, silenceMs: SILENCE_MS, keepAliveMs: this.keepAliveMs, keepAliveOf: (m) => (this.keepAlives.has(m) ? this.keepAlives.get(m)! : undefined) };
  }

  step(command: Command): ClusterEvent[] {
    const s = decide(this.view(), this.memory, command, { instanceId: (m) => `${m}-${++this.#n}`, secret: () => 'ab'.repeat(32) });
    this.memory = s.memory;
    this.state = applyEvents(this.state, s.events);
    this.events.push(...s.events);
    return s.events;
  }

  place(o: { explicit?: boolean; strategy?: 'auto' | 'pipeline' | 'tensor'; nodes?: number; sequences?: number; context?: number; description?: typeof model } = {}): ClusterEvent[] {
    const requested = { strategy: o.strategy ?? 'auto', ...(o.nodes ? { nodes: o.nodes } : {}), ...(o.sequences ? { sequences: o.sequences } : {}), ...(o.context ? { context: o.context } : {}) };
    return this.step({ type: 'place', model: 'm', description: o.description ?? model, requested, exclusive: (o.strategy ?? 'auto') !== 'auto', explicit: o.explicit ?? false });
  }

  instances() {
    return Object.values(this.state.instances);
  }

  /** Advances the clock and ticks. */
  tick(ms: number): ClusterEvent[] {
    this.now += ms;
    return this.step({ type: 'tick' });
  }
}

const types = (es: ClusterEvent[]) => es.map((e) => e.type);
const SILENCE_MS = 3000;

describe('coordinator: place', () => {
  it("places a model once, with the serving profile's context, a secret and the description", () => {
    const pod = new Pod([node('a'), node('b')]);
    const [e] = pod.place();
    expect(e.type).toBe('instance-placed');
    const plan = pod.instances()[0].plan;
    expect(plan).toMatchObject({ context: 2048, secret: 'ab'.repeat(32), requested: { strategy: 'auto' }, model: { dims: model.dims } });
    expect(plan.ranks.length).toBeGreaterThan(0);
    // Asked again: the existing instance serves; a forced layout asked exclusively gets its own.
    expect(pod.place()).toEqual([]);
    expect(types(pod.place({ strategy: 'pipeline', nodes: 2 }))).toEqual(['instance-placed']);
    expect(pod.instances().map((i) => i.plan.layout.stages.length).sort()).toEqual([1, 2]);
  });

  it('reserves KV cache for the sequences the instance holds (the batch): room for one sequence is not room for eight', () => {
    // 8 layers x 8 KV heads x 16 x 2 (K and V) x 4 bytes = 8 KiB per token: 512 MiB per 65,536-token sequence.
    const long = description({ weightsBytes: 2 ** 30, maxContext: 65536, kvHeads: 8 });
    const ranksFor = (sequences: number) => {
      const pod = new Pod([node('a', 4), node('b', 4)]);
      pod.place({ description: long, sequences, context: 65536 });
      const plan = pod.instances()[0].plan;
      expect(plan.sequences).toBe(sequences);
      expect(plan.context).toBe(65536);
      return plan.ranks.length;
    };
    expect(ranksFor(1)).toBe(1);
    expect(ranksFor(8)).toBe(2);
    expect(() => new Pod([node('a', 4), node('b', 4)]).place({ description: long, sequences: 64, context: 65536 })).toThrow(/KV cache .* for 65536 tokens x 64/);
  });

  it('an impossible placement throws the planner reason (the requester answers with it)', () => {
    const pod = new Pod([node('a')]);
    expect(() => pod.place({ strategy: 'tensor', nodes: 2 })).toThrow(/needs 2 live nodes; the pod has 1/);
  });

  it('remove takes an instance away; unknown ids are ignored', () => {
    const pod = new Pod([node('a')]);
    pod.place();
    const id = pod.instances()[0].id;
    expect(types(pod.step({ type: 'remove', id }))).toEqual(['instance-removed']);
    expect(pod.step({ type: 'remove', id })).toEqual([]);
  });
});

describe('coordinator: a broken model is placed a bounded number of times', () => {
  it('each failure removes the instance, the next placement waits out a growing backoff, then the model is marked failed', () => {
    const pod = new Pod([node('a'), node('b')]);
    pod.place();
    let placements = 1;
    for (let i = 0; i < 40; i++) {
      const live = pod.instances();
      if (live.length) pod.step({ type: 'failed', id: live[0].id, reason: 'model.safetensors: file is truncated', phase: 'load' });
      placements += types(pod.tick(BACKOFF_BASE_MS / 2)).filter((t) => t === 'instance-placed').length;
      // A request arriving meanwhile does not place it early (only someone loading it explicitly would).
      placements += types(pod.place()).filter((t) => t === 'instance-placed').length;
    }
    for (let i = 0; i < 200; i++) placements += types(pod.tick(BACKOFF_BASE_MS * 8)).filter((t) => t === 'instance-placed').length;
    expect(placements).toBe(MAX_ATTEMPTS);
    expect(pod.state.failedModels.m).toMatchObject({ attempts: MAX_ATTEMPTS, reason: expect.stringContaining('file is truncated') });
    expect(pod.instances()).toEqual([]);
    // Requests do not bring it back; an explicit load does, with a clean slate.
    expect(pod.place()).toEqual([]);
    expect(types(pod.place({ explicit: true }))).toEqual(['model-cleared', 'instance-placed']);
    expect(pod.state.failedModels).toEqual({});
  });

  it('a failed model whose files changed since is cleared and may be placed again', () => {
    const pod = new Pod([node('a')]);
    pod.place();
    for (let i = 0; i < MAX_ATTEMPTS; i++) {
      pod.step({ type: 'failed', id: pod.instances()[0].id, reason: 'truncated', phase: 'load' });
      pod.tick(BACKOFF_BASE_MS * 16);
    }
    expect(pod.state.failedModels.m).toBeDefined();
    pod.filesAt.set('m', pod.state.failedModels.m.at - 1);
    expect(pod.tick(500)).toEqual([]);
    pod.filesAt.set('m', pod.now);
    expect(types(pod.tick(500))).toEqual(['model-cleared']);
    expect(types(pod.place())).toEqual(['instance-placed']);
  });

  it('the delays grow: the second replacement waits twice as long as the first', () => {
    const pod = new Pod([node('a')]);
    pod.place();
    const failOnce = () => pod.step({ type: 'failed', id: pod.instances()[0].id, reason: 'boom', phase: 'load' });
    const waitForPlacement = () => {
      let waited = 0;
      while (!types(pod.tick(100)).includes('instance-placed')) waited += 100;
      return waited + 100;
    };
    failOnce();
    const first = waitForPlacement();
    failOnce();
    const second = waitForPlacement();
    expect(first).toBe(BACKOFF_BASE_MS);
    expect(second).toBe(2 * BACKOFF_BASE_MS);
  });

  it('an instance that serves clears the count', () => {
    const pod = new Pod([node('a')]);
    pod.place();
    for (let i = 0; i < MAX_ATTEMPTS - 1; i++) {
      pod.step({ type: 'failed', id: pod.instances()[0].id, reason: 'flaky', phase: 'load' });
      pod.tick(BACKOFF_BASE_MS * 16);
    }
    expect(pod.memory.failures.m.count).toBe(MAX_ATTEMPTS - 1);
    pod.ready.add(pod.instances()[0].id);
    pod.tick(500);
    expect(pod.memory.failures.m).toBeUndefined();
  });
});

describe('coordinator: nodes leaving', () => {
  it('runners that died serving (a peer lost) do not count against the model', () => {
    const pod = new Pod([node('a'), node('b')]);
    pod.place();
    for (let i = 0; i < MAX_ATTEMPTS + 2; i++) {
      pod.step({ type: 'failed', id: pod.instances()[0].id, reason: 'data plane failed: peer closed', phase: 'serve' });
      expect(types(pod.tick(SILENCE_MS))).toEqual(['instance-placed']);
    }
    expect(pod.state.failedModels).toEqual({});
  });

  it('an instance on a node that left is replaced on the survivors without counting as a model failure', () => {
    const pod = new Pod([node('a'), node('b')]);
    pod.place({ strategy: 'pipeline', nodes: 2 });
    pod.state = applyEvents(pod.state, [{ type: 'node-left', peerId: 'b', at: pod.now, reason: 'silent' }]);
    pod.cluster = { nodes: [node('a')], links: [] };
    expect(types(pod.tick(500))).toEqual(['instance-removed']);
    expect(pod.memory.failures).toEqual({});
    // Placed again once the silent node has dropped out of the cluster view; the forced two-node
    // layout no longer fits: the planner's choice on what is left.
    expect(types(pod.tick(SILENCE_MS - 100))).toEqual([]);
    expect(types(pod.tick(100))).toEqual(['instance-placed']);
    expect(pod.instances()[0].plan.ranks).toEqual(['a']);
  });
});

describe('coordinator: idle instances', () => {
  it('are unloaded once idle for the keep-alive time (by the driver status), busy or unready ones never', () => {
    const pod = new Pod([node('a')]);
    pod.keepAliveMs = 60_000;
    pod.place();
    const id = pod.instances()[0].id;
    pod.ready.add(id);
    pod.statuses.set(id, { active: 0, queued: 0, at: pod.now, idleMs: 50_000 });
    expect(pod.tick(5_000)).toEqual([]); // idle 55 s
    pod.statuses.set(id, { active: 1, queued: 0, at: pod.now, idleMs: 0 });
    expect(pod.tick(120_000)).toEqual([]); // busy
    pod.statuses.set(id, { active: 0, queued: 0, at: pod.now, idleMs: 59_000 });
    expect(pod.tick(1_000)).toEqual([{ type: 'instance-removed', id, at: pod.now }]);
    // The next request places it again.
    expect(types(pod.place())).toEqual(['instance-placed']);
  });

  it("follow the keep-alive the model's last request asked for: 0 unloads once idle, a duration keeps it that long, never keeps it", () => {
    const pod = new Pod([node('a')]);
    pod.keepAliveMs = 30 * 60_000;
    pod.place();
    const id = pod.instances()[0].id;
    const model = pod.instances()[0].model;
    pod.ready.add(id);
    // keep_alive 0: still serving, kept; idle, unloaded at once (the daemon's 30 minutes do not apply).
    pod.keepAlives.set(model, 0);
    pod.statuses.set(id, { active: 1, queued: 0, at: pod.now, idleMs: 0 });
    expect(pod.tick(1_000)).toEqual([]);
    pod.statuses.set(id, { active: 0, queued: 0, at: pod.now, idleMs: 0 });
    expect(pod.tick(0)).toEqual([{ type: 'instance-removed', id, at: pod.now }]);

    expect(types(pod.place())).toEqual(['instance-placed']);
    const again = pod.instances()[0].id;
    pod.ready.add(again);
    // keep_alive 10s: kept for 9 s idle, unloaded at 10 s.
    pod.keepAlives.set(model, 10_000);
    pod.statuses.set(again, { active: 0, queued: 0, at: pod.now, idleMs: 0 });
    expect(pod.tick(9_000)).toEqual([]);
    expect(pod.tick(1_000)).toEqual([{ type: 'instance-removed', id: again, at: pod.now }]);

    expect(types(pod.place())).toEqual(['instance-placed']);
    const third = pod.instances()[0].id;
    pod.ready.add(third);
    // keep_alive -1 (never): kept past the daemon's own keep-alive.
    pod.keepAlives.set(model, null);
    pod.statuses.set(third, { active: 0, queued: 0, at: pod.now, idleMs: 0 });
    expect(pod.tick(2 * 3_600_000)).toEqual([]);
    // A request without keep_alive: the daemon's keep-alive again.
    pod.keepAlives.delete(model);
    expect(pod.tick(0)).toEqual([{ type: 'instance-removed', id: third, at: pod.now }]);
  });

  it('stay loaded when the keep-alive is never', () => {
    const pod = new Pod([node('a')]);
    pod.place();
    const id = pod.instances()[0].id;
    pod.ready.add(id);
    pod.statuses.set(id, { active: 0, queued: 0, at: pod.now, idleMs: 10 * 3_600_000 });
    expect(pod.tick(1000)).toEqual([]);
  });
});

describe('coordinator: a faster plan after the pod grows', () => {
  it('places a successor, then retires the old instance once its driver reports it idle after the settle time', () => {
    const pod = new Pod([node('a', 32, 10)]);
    pod.place();
    const old = pod.instances()[0];
    pod.ready.add(old.id);
    // A much faster node joins.
    pod.state = applyEvents(pod.state, [
      { type: 'node-joined', peerId: 'b', name: 'b', at: 2 },
      { type: 'profile-updated', profile: profile('b') },
    ]);
    pod.cluster = { nodes: [node('a', 32, 10), node('b', 32, 1000)], links: linked(['a', 'b']) };
    const placed = pod.tick(5000).filter((e) => e.type === 'instance-placed');
    expect(placed).toHaveLength(1);
    const successor = pod.instances().find((i) => i.plan.supersedes === old.id)!;
    expect(successor).toBeDefined();
    // One upgrade at a time.
    expect(pod.tick(5000).filter((e) => e.type === 'instance-placed')).toEqual([]);
    pod.ready.add(successor.id);
    pod.tick(100); // the successor is first seen ready
    const readySince = pod.now;
    // Busy, or idle but heard before the successor was ready for a while: the old one stays.
    pod.statuses.set(old.id, { active: 1, queued: 0, at: readySince + RETIRE_SETTLE_MS + 1 });
    expect(types(pod.tick(RETIRE_SETTLE_MS + 100))).toEqual([]);
    pod.statuses.set(old.id, { active: 0, queued: 0, at: readySince + RETIRE_SETTLE_MS - 1 });
    expect(types(pod.tick(100))).toEqual([]);
    pod.statuses.set(old.id, { active: 0, queued: 0, at: pod.now });
    expect(pod.tick(100)).toEqual([{ type: 'instance-removed', id: old.id, at: pod.now }]);
  });
});

describe('coordinator: the duplicate a healed partition leaves', () => {
  /** Two nodes that each placed `m` on their own while apart, merged as the replica merges them. */
  function healed() {
    const pod = new Pod([node('a', 32, 10), node('b', 32, 10)]);
    const sideA = new Pod([node('a', 32, 10), node('b', 32, 10)]);
    sideA.cluster = { nodes: [node('a', 32, 10)], links: [] };
    sideA.place();
    const sideB = new Pod([node('a', 32, 10), node('b', 32, 10)]);
    sideB.cluster = { nodes: [node('b', 32, 10)], links: [] };
    sideB.step({ type: 'place', model: 'm', description: model, requested: { strategy: 'auto' }, exclusive: false, explicit: false });
    const [iA] = sideA.instances();
    const iB = { ...sideB.instances()[0], id: 'm-b', nodes: [...sideB.instances()[0].nodes] };
    expect(iA.nodes).toEqual(['a']);
    expect(iB.nodes).toEqual(['b']);
    const bState = applyEvents(sideB.state, [{ type: 'instance-removed', id: sideB.instances()[0].id, at: 0 }, { type: 'instance-placed', instance: iB }]);
    pod.now = sideA.now + RETIRE_AFTER_MS * 2; // the split lasted long: the keeper was placed long before the merge
    const merged = mergeStates(sideA.state, bState, pod.now);
    expect(merged.superseded).toEqual([{ model: 'm', keeper: iA.id, retiring: iB.id }]);
    pod.state = merged.state;
    return { pod, keeper: iA.id, retiring: iB.id };
  }

  it('retires once its driver reports it idle, not while a stream runs on it, however old the keeper is', () => {
    const { pod, keeper, retiring } = healed();
    pod.ready.add(keeper).add(retiring);
    expect(types(pod.tick(100))).toEqual([]); // the keeper is first seen ready
    const since = pod.now;
    pod.statuses.set(retiring, { active: 1, queued: 0, at: since + RETIRE_SETTLE_MS + 1 });
    expect(types(pod.tick(RETIRE_SETTLE_MS + 500))).toEqual([]);
    expect(types(pod.tick(60_000))).toEqual([]);
    pod.statuses.set(retiring, { active: 0, queued: 0, at: pod.now });
    expect(pod.tick(100)).toEqual([{ type: 'instance-removed', id: retiring, at: pod.now }]);
    expect(pod.instances().map((i) => i.id)).toEqual([keeper]);
  });

  it('is removed RETIRE_AFTER_MS after the merge even if never seen idle', () => {
    const { pod, retiring } = healed();
    pod.ready.add(pod.instances().find((i) => i.plan.supersedes)!.id);
    pod.statuses.set(retiring, { active: 1, queued: 0, at: pod.now });
    expect(types(pod.tick(RETIRE_AFTER_MS - 1000))).toEqual([]);
    expect(pod.tick(2000)).toEqual([{ type: 'instance-removed', id: retiring, at: pod.now }]);
  });

  it('no upgrade while two copies of the model take requests side by side', () => {
    const { pod, keeper, retiring } = healed();
    // As if the merge could not pair them: neither supersedes the other.
    const k = pod.state.instances[keeper];
    pod.state = applyEvents(pod.state, [{ type: 'instance-placed', instance: { ...k, nodes: [...k.nodes], plan: { ...k.plan, supersedes: undefined, supersedesSince: undefined } } }]);
    pod.ready.add(keeper).add(retiring);
    pod.state = applyEvents(pod.state, [
      { type: 'node-joined', peerId: 'c', name: 'c', at: 2 },
      { type: 'profile-updated', profile: profile('c') },
    ]);
    pod.cluster = { nodes: [node('a', 32, 10), node('b', 32, 10), node('c', 32, 1000)], links: linked(['a', 'b', 'c']) };
    expect(pod.tick(5000).filter((e) => e.type === 'instance-placed')).toEqual([]);
    // One of them gone: the other is upgraded.
    pod.step({ type: 'remove', id: retiring });
    expect(pod.tick(5000).filter((e) => e.type === 'instance-placed')).toHaveLength(1);
  });

  it('once it is gone, the keeper may be upgraded again (a finished succession blocks nothing)', () => {
    const { pod, keeper, retiring } = healed();
    pod.ready.add(keeper);
    pod.tick(100);
    pod.statuses.set(retiring, { active: 0, queued: 0, at: pod.now + RETIRE_SETTLE_MS + 1 });
    pod.tick(RETIRE_SETTLE_MS + 2000);
    expect(pod.instances().map((i) => i.id)).toEqual([keeper]);
    // A much faster node joins: the keeper gets a successor.
    pod.state = applyEvents(pod.state, [
      { type: 'node-joined', peerId: 'c', name: 'c', at: 2 },
      { type: 'profile-updated', profile: profile('c') },
    ]);
    pod.cluster = { nodes: [node('a', 32, 10), node('b', 32, 10), node('c', 32, 1000)], links: linked(['a', 'b', 'c']) };
    const placed = pod.tick(5000).filter((e) => e.type === 'instance-placed');
    expect(placed).toHaveLength(1);
    expect(pod.instances().find((i) => i.plan.supersedes === keeper)).toBeDefined();
  });
});
