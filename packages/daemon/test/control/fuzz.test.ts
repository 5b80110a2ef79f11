import { describe, expect, it } from 'vitest';
import { decodeControl, encodeControl } from '../../src/control/codec.js';
import { MAX_CONTROL_BYTES, type ControlMessage } from '../../src/control/messages.js';
import { Replica } from '../../src/state/replication.js';
import { link, profile } from '../state/fixtures.js';

/** Deterministic PRNG so a failure reproduces. */
function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const valid: ControlMessage[] = [
  { type: 'heartbeat', from: 'P', name: 'p', bootId: 'b', at: 1, log: { epoch: 1, leader: 'A', seq: 3 } },
  { type: 'profile', from: 'P', profile: profile('P') },
  { type: 'links', from: 'P', links: [link('A', 'P', { measuredBy: 'P' })] },
  { type: 'event', from: 'P', epoch: 1, seq: 1, event: { type: 'node-joined', peerId: 'X', name: 'x', at: 1 } },
  { type: 'sync-request', from: 'P', to: 'A', purpose: 'follow' },
  { type: 'snapshot', from: 'P', epoch: 1, seq: 1, state: { nodes: {}, links: {}, instances: {}, failedModels: {} } },
  { type: 'goodbye', from: 'P' },
];

/** Mutations that keep the JSON parseable but break types, ranges, structure. */
function mutate(value: unknown, r: () => number, depth = 0): unknown {
  const pick = r();
  if (depth > 0 && pick < 0.08) {
    const odd = [null, -1, 1e308, '', 'x'.repeat(300), [], {}, true, { __proto__: { polluted: 1 } }, [1, [2, [3]]]];
    return odd[Math.floor(r() * odd.length)];
  }
  if (Array.isArray(value)) return value.map((v) => mutate(v, r, depth + 1));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (r() < 0.05) continue; // drop a field
      out[r() < 0.03 ? `${k}_` : k] = mutate(v, r, depth + 1);
    }
    if (r() < 0.05) out.extra = 'field';
    return out;
  }
  if (typeof value === 'number' && pick < 0.2) return [-value, value + 0.5, Number.MAX_SAFE_INTEGER * 4, '7'][Math.floor(r() * 4)];
  if (typeof value === 'string' && pick < 0.2) return [42, '', value.repeat(50)][Math.floor(r() * 3)];
  return value;
}

function replicaUnderTest() {
  const dropped: string[] = [];
  let now = 0;
  const r = new Replica({ selfId: 'A', name: 'a', bootId: 'x', now: () => now, send: () => {}, onDropped: (_f, why) => dropped.push(why) });
  r.setProfile(profile('A'));
  now = 2000; // past the settle time: A leads its one-node pod
  r.tick();
  expect(r.isCoordinator).toBe(true);
  expect(r.state.nodes.A.profile).not.toBeNull();
  return r;
}

describe('control message fuzzing', () => {
  it('valid messages round-trip', () => {
    for (const m of valid) expect(decodeControl(encodeControl(m), 'P')).toEqual({ ok: true, message: m });
  });

  it('random bytes, truncations and structural mutations never throw; the replica survives whatever decodes', () => {
    const r = rng(42);
    const replica = replicaUnderTest();
    let accepted = 0;
    let rejected = 0;
    for (let i = 0; i < 4000; i++) {
      let bytes: Uint8Array;
      const base = valid[i % valid.length];
      const mode = i % 4;
      if (mode === 0) bytes = Uint8Array.from({ length: Math.floor(r() * 200) }, () => Math.floor(r() * 256));
      else if (mode === 1) {
        const full = encodeControl(base);
        bytes = full.subarray(0, Math.floor(r() * full.length));
      } else bytes = new TextEncoder().encode(JSON.stringify(mutate(base, r)));
      const d = decodeControl(bytes, 'P');
      if (d.ok) {
        accepted++;
        expect(() => replica.handle(d.message)).not.toThrow();
      } else {
        rejected++;
        expect(d.reason).toMatch(/^(not JSON|invalid|too large|claims)/);
      }
    }
    expect(rejected).toBeGreaterThan(1000);
    expect(accepted).toBeGreaterThan(50); // some mutations stay valid and reach the replica
    expect(replica.state.nodes.A.status).toBe('live');
  });

  it('oversized and spoofed messages are rejected before parsing', () => {
    const big = new Uint8Array(MAX_CONTROL_BYTES + 1).fill(0x20);
    expect(decodeControl(big, 'P')).toMatchObject({ ok: false, reason: expect.stringMatching(/too large/) });
    expect(decodeControl(encodeControl(valid[0]), 'Q')).toMatchObject({ ok: false, reason: 'claims to be from P' });
  });

  it('a follower ignores events and snapshots from a node that is not its coordinator', () => {
    const replica = replicaUnderTest(); // A leads itself
    const before = JSON.stringify(replica.state);
    replica.handle({ type: 'event', from: 'Z', epoch: 99, seq: 1, event: { type: 'node-left', peerId: 'A', at: 1, reason: 'silent' } });
    replica.handle({ type: 'snapshot', from: 'Z', epoch: 99, seq: 5, state: { nodes: {}, links: {}, instances: {}, failedModels: {} } });
    replica.handle({ type: 'profile', from: 'Z', profile: profile('A', 'hijacked') });
    replica.handle({ type: 'links', from: 'Z', links: [link('A', 'B')] });
    expect(JSON.stringify(replica.state)).toBe(before);
  });
});
