/** The schedule on which a lost pod member is dialled again: backoff, cap, jitter, rediscovery, forgetting. */
import { describe, expect, it } from 'vitest';
import { backoffMs, connected, due, dropped, emptySchedule, failed, rediscovered, type RedialPolicy } from '../../src/node/redial-schedule.js';

const policy: RedialPolicy = { baseMs: 1000, maxMs: 5000, jitter: 0.2, forgetAfterMs: 60_000 };
const mid = () => 0.5; // no jitter: the middle of the range

describe('redial schedule', () => {
  it('doubles the delay after each failure up to the cap', () => {
    expect([0, 1, 2, 3, 4, 10].map((a) => backoffMs(a, policy, mid))).toEqual([1000, 2000, 4000, 5000, 5000, 5000]);
  });

  it('jitters each delay within ±jitter of it, never outside', () => {
    expect(backoffMs(1, policy, () => 0)).toBe(1600);
    expect(backoffMs(1, policy, () => 1)).toBe(2400);
    expect(backoffMs(3, policy, () => 1)).toBe(6000);
    // A random source out of range is clamped, not trusted.
    expect(backoffMs(0, policy, () => 7)).toBe(1200);
    const seen = new Set(Array.from({ length: 200 }, () => backoffMs(2, policy, Math.random)));
    for (const d of seen) expect(d >= 3200 && d <= 4800).toBe(true);
    expect(seen.size).toBeGreaterThan(20);
  });

  it('a dropped member is due after the first delay, then later after each failed dial', () => {
    let s = dropped(emptySchedule, 'b', 10_000, policy, mid);
    expect(due(s, 10_999)).toEqual([]);
    expect(due(s, 11_000).map((e) => e.peerId)).toEqual(['b']);
    s = failed(s, 'b', 'timeout', 11_000, policy, mid);
    expect(s.get('b')).toMatchObject({ attempts: 1, dueAt: 13_000, since: 10_000, lastTriedAt: 11_000, lastError: 'timeout' });
    s = failed(s, 'b', 'timeout', 13_000, policy, mid);
    expect(s.get('b')!.dueAt).toBe(17_000);
    // A second drop report (another connection closing) does not reset the backoff.
    expect(dropped(s, 'b', 14_000, policy, mid)).toBe(s);
  });

  it('rediscovery makes a backed-off dial due at once; a connection ends the schedule', () => {
    let s = dropped(emptySchedule, 'b', 0, policy, mid);
    s = failed(s, 'b', 'timeout', 1000, policy, mid);
    s = failed(s, 'b', 'timeout', 3000, policy, mid);
    expect(due(s, 3500)).toEqual([]);
    s = rediscovered(s, 'b', 3500);
    expect(due(s, 3500).map((e) => e.peerId)).toEqual(['b']);
    expect(s.get('b')!.attempts).toBe(2); // the backoff is kept for the next failure
    // A later time asked for (the end that yields) counts when earlier than the backed-off one.
    const later = failed(s, 'b', 'x', 3500, policy, mid); // due at 3500 + 4000
    expect(rediscovered(later, 'b', 3700).get('b')!.dueAt).toBe(3700);
    expect(rediscovered(s, 'b', 9000).get('b')!.dueAt).toBe(3500);
    s = connected(s, 'b');
    expect(s.size).toBe(0);
    // Rediscovery of a peer not being re-dialled changes nothing.
    expect(rediscovered(s, 'c', 0)).toBe(s);
  });

  it('forgets a member unreachable for longer than forgetAfterMs', () => {
    let s = dropped(emptySchedule, 'b', 0, policy, mid);
    s = failed(s, 'b', 'timeout', 59_999, policy, mid);
    expect(s.has('b')).toBe(true);
    s = failed(s, 'b', 'timeout', 60_000, policy, mid);
    expect(s.has('b')).toBe(false);
  });

  it('lists due members longest-waiting first', () => {
    let s = dropped(emptySchedule, 'c', 0, policy, () => 1); // due 1200
    s = dropped(s, 'b', 0, policy, () => 0); // due 800
    s = dropped(s, 'd', 5000, policy, mid); // due 6000
    expect(due(s, 2000).map((e) => e.peerId)).toEqual(['b', 'c']);
  });
});
