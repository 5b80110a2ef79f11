/**
 * When to dial a pod member again after its connection dropped: pure data and functions, time and
 * randomness passed in, so the schedule is tested without sockets or clocks.
 *
 * A member whose connection dropped is dialled again after BASE, then twice as long each failure up to
 * MAX, each delay drawn from ±JITTER of its value so that both ends of a healed cable (and every node
 * of a pod) do not dial each other in lockstep. Discovery seeing the peer again (an mDNS answer, a
 * bootstrap address) makes it due at once: the network just proved a path exists. A member that stays
 * unreachable for FORGET_AFTER is dropped from the schedule (it left for good; discovery brings it back).
 */

export interface RedialPolicy {
  /** First delay after a drop, ms. */
  baseMs: number;
  /** Longest delay between two dials, ms. */
  maxMs: number;
  /** Each delay is drawn from [d·(1-jitter), d·(1+jitter)]. */
  jitter: number;
  /** Stop re-dialling a member unreachable this long, ms. */
  forgetAfterMs: number;
}

export const DEFAULT_REDIAL_POLICY: RedialPolicy = { baseMs: 1000, maxMs: 5000, jitter: 0.2, forgetAfterMs: 3_600_000 };

export interface RedialEntry {
  readonly peerId: string;
  /** Since when it has been unreachable (the drop). */
  readonly since: number;
  /** Failed dials since the drop. */
  readonly attempts: number;
  readonly dueAt: number;
  /** When the last dial failed (null: none yet). */
  readonly lastTriedAt: number | null;
  readonly lastError: string | null;
}

export type RedialSchedule = ReadonlyMap<string, RedialEntry>;

export const emptySchedule: RedialSchedule = new Map();

/** The delay before dial number `attempt + 1` (attempt 0: the first dial after the drop), ms. */
export function backoffMs(attempt: number, policy: RedialPolicy, random: () => number): number {
  const d = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, attempt));
  const factor = 1 - policy.jitter + 2 * policy.jitter * Math.min(1, Math.max(0, random()));
  return Math.round(d * factor);
}

function withEntry(s: RedialSchedule, e: RedialEntry): RedialSchedule {
  const next = new Map(s);
  next.set(e.peerId, e);
  return next;
}

/** A member's connection dropped (the last one to it): schedule the first dial, unless already scheduled. */
export function dropped(s: RedialSchedule, peerId: string, now: number, policy: RedialPolicy, random: () => number): RedialSchedule {
  if (s.has(peerId)) return s;
  return withEntry(s, { peerId, since: now, attempts: 0, dueAt: now + backoffMs(0, policy, random), lastTriedAt: null, lastError: null });
}

/** A dial failed: next one later (or forget the member once it has been unreachable for too long). */
export function failed(s: RedialSchedule, peerId: string, error: string, now: number, policy: RedialPolicy, random: () => number): RedialSchedule {
  const e = s.get(peerId);
  if (!e) return s;
  if (now - e.since >= policy.forgetAfterMs) return connected(s, peerId);
  const attempts = e.attempts + 1;
  return withEntry(s, { ...e, attempts, dueAt: now + backoffMs(attempts, policy, random), lastTriedAt: now, lastError: error });
}

/** Connected again (by our dial or theirs): nothing to do for it. */
export function connected(s: RedialSchedule, peerId: string): RedialSchedule {
  if (!s.has(peerId)) return s;
  const next = new Map(s);
  next.delete(peerId);
  return next;
}

/** Discovery reported the member again: dial it at `at` (now, or a moment later) rather than at its backed-off time. */
export function rediscovered(s: RedialSchedule, peerId: string, at: number): RedialSchedule {
  const e = s.get(peerId);
  if (!e || e.dueAt <= at) return s;
  return withEntry(s, { ...e, dueAt: at });
}

/** Members whose dial is due, the longest-waiting first. */
export function due(s: RedialSchedule, now: number): RedialEntry[] {
  return [...s.values()].filter((e) => e.dueAt <= now).sort((a, b) => a.dueAt - b.dueAt || (a.peerId < b.peerId ? -1 : 1));
}
