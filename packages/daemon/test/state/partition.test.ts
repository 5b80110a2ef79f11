/** What `orchard status` says about members this node cannot reach (state/partition.ts, cli/format-status.ts). */
import { describe, expect, it } from 'vitest';
import { formatStatus, type StatusJson } from '../../src/cli/format-status.js';
import { applyEvents } from '../../src/state/apply.js';
import { partitionReport, type LostPeer } from '../../src/state/partition.js';
import type { Heal } from '../../src/state/replication.js';
import { emptyState } from '../../src/state/types.js';
import { profile } from './fixtures.js';

const state = applyEvents(emptyState, [
  { type: 'node-joined', peerId: 'A', name: 'alpha', at: 1 },
  { type: 'node-joined', peerId: 'B', name: 'beta', at: 1 },
  { type: 'node-joined', peerId: 'C', name: 'gamma', at: 1 },
  { type: 'node-joined', peerId: 'D', name: 'delta', at: 1 },
  { type: 'node-left', peerId: 'B', at: 50_000, reason: 'silent' },
  { type: 'node-left', peerId: 'C', at: 50_000, reason: 'silent' },
  { type: 'node-left', peerId: 'D', at: 50_000, reason: 'shutdown' },
]);
// What the AutoDialer reports (these exact texts: libp2p's for a dial to a dropped path, and to a closed port).
const timeout: LostPeer = { peerId: 'B', since: 45_000, attempts: 3, message: 'peer B is unreachable: ...', lastError: 'AbortError The operation was aborted due to timeout' };
const refused: LostPeer = { peerId: 'C', since: 45_000, attempts: 2, message: 'peer C is unreachable: ...', lastError: 'connect ECONNREFUSED 10.0.0.3:52416' };

function status(partition: StatusJson['partition']): StatusJson {
  return {
    self: { peerId: 'A', name: 'alpha' },
    mode: 'open',
    clusterKeyId: null,
    coordinator: 'A',
    nodes: Object.values(state.nodes).map((n) => ({ ...n, profile: profile(n.peerId, n.name) })),
    links: [],
    notInCluster: [],
    unreachable: [],
    duplicateIdentity: null,
    partition,
  };
}

describe('partition report', () => {
  it('a member that gives no answer at all means a split; one that refuses is down; one that said goodbye, or a peer never in the pod, is neither', () => {
    const relay: LostPeer = { peerId: 'R', since: 1, attempts: 9, message: '', lastError: 'The operation was aborted due to timeout' };
    const r = partitionReport({ state, selfId: 'A', lost: [timeout, refused, relay, { peerId: 'D', since: 50_000, attempts: 4, message: '', lastError: 'ECONNREFUSED' }], heals: [], now: 60_000 });
    expect(r.unreachable.map((u) => [u.peerId, u.name, u.cause])).toEqual([
      ['B', 'beta', 'no-answer'],
      ['C', 'gamma', 'refused'],
    ]);
    expect(r.split).toBe(true);
    expect(r.message).toBe('beta does not answer: the network between is likely cut and the pod split (each side serves on its own; they merge back when they reconnect); gamma refuses connections: the daemon there is not running.');
    const text = formatStatus(status(r));
    expect(text).toContain('WARNING: pod split: beta does not answer');
    expect(text).toMatch(/○ beta B \[?.*gone \(silent, no answer: split\?\)/);
    expect(text).toMatch(/○ gamma C gone \(silent, refuses connections\)/);
    expect(text).toMatch(/○ delta D gone \(shutdown\)\n/);
  });

  it('only a refused or not yet dialled member is no split; a silent member the dialer does not track is listed', () => {
    const r = partitionReport({ state, selfId: 'A', lost: [refused, { ...timeout, attempts: 0, lastError: null }], heals: [], now: 60_000 });
    expect(r.split).toBe(false);
    expect(r.unreachable.map((u) => u.cause)).toEqual(['silent', 'refused']);
    expect(formatStatus(status(r))).toContain('unreachable: gamma refuses connections: the daemon there is not running; beta went silent.');
    const untracked = partitionReport({ state, selfId: 'A', lost: [], heals: [], now: 60_000 });
    expect(untracked.unreachable.map((u) => [u.peerId, u.cause, u.since])).toEqual([['B', 'silent', 50_000], ['C', 'silent', 50_000]]);
  });

  it('the whole pod reachable: no message; a recent heal is shown with the duplicate that retires', () => {
    const whole = applyEvents(emptyState, [{ type: 'node-joined', peerId: 'A', name: 'alpha', at: 1 }, { type: 'node-joined', peerId: 'B', name: 'beta', at: 1 }]);
    const heal: Heal = { at: 40_000, from: 'B', merged: { epoch: 3, leader: 'B', seq: 9 }, superseded: [{ model: 'orchard-demo', keeper: 'orchard-demo-1', retiring: 'orchard-demo-2' }] };
    const r = partitionReport({ state: whole, selfId: 'A', lost: [], heals: [heal], now: 52_000 });
    expect(r).toMatchObject({ unreachable: [], split: false, message: null, lastHeal: { from: 'B', agoSec: 12 } });
    const s = { ...status(r), nodes: Object.values(whole.nodes).map((n) => ({ ...n, profile: profile(n.peerId, n.name) })) };
    const text = formatStatus(s);
    expect(text).not.toContain('WARNING');
    expect(text).toContain("pod re-formed 12 s ago after a split: merged the state of beta's side; orchard-demo-2 (orchard-demo) retires once idle, orchard-demo-1 kept");
    // An old heal is history: not shown.
    expect(formatStatus({ ...s, partition: partitionReport({ state: whole, selfId: 'A', lost: [], heals: [heal], now: 40_000 + 3_600_000 }) })).not.toContain('re-formed');
  });
});
