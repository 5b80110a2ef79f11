import { describe, expect, it } from 'vitest';
import type { FromRunner } from '../../src/runner/protocol.js';
import { TokenBatcher } from '../../src/runner/token-batch.js';

/** A batcher whose flushes run when the test says (`turn()`), recording what reaches the daemon. */
function harness() {
  const sent: FromRunner[] = [];
  const due: (() => void)[] = [];
  const b = new TokenBatcher((m) => sent.push(m), { schedule: (f) => due.push(f), intervalMs: 0 });
  const turn = () => {
    for (const f of due.splice(0)) f();
  };
  return { b, sent, turn };
}

describe('TokenBatcher', () => {
  it('sends the tokens of one turn as one message, in the order they were sampled, and a lone token as `token`', () => {
    const { b, sent, turn } = harness();
    b.token(1, 10);
    b.token(2, 20, { id: 20, logprob: -0.5, top: [] });
    b.token(1, 11);
    expect(sent).toEqual([]);
    turn();
    expect(sent).toEqual([{ type: 'tokens', tokens: [{ id: 1, token: 10 }, { id: 2, token: 20, logprob: { id: 20, logprob: -0.5, top: [] } }, { id: 1, token: 11 }] }]);
    b.token(3, 30);
    turn();
    expect(sent[1]).toEqual({ type: 'token', id: 3, token: 30 });
    turn();
    expect(sent).toHaveLength(2);
  });

  it('never lets another message overtake waiting tokens (a done after its last token)', () => {
    const { b, sent, turn } = harness();
    b.token(4, 40);
    b.token(4, 41);
    b.send({ type: 'done', id: 4, outcome: { tokens: [40, 41], finishReason: 'length', promptTokens: 1, prefillMs: 0, decodeMs: 0 } });
    turn();
    expect(sent.map((m) => m.type)).toEqual(['tokens', 'done']);
  });

  it('by default sends a step that awaits between its picks as one message, before the driver yields for its next step', async () => {
    const sent: FromRunner[] = [];
    const b = new TokenBatcher((m) => sent.push(m), { intervalMs: 0 });
    // As BatchDriver.#step: each sequence's pick is awaited (pickToken is async) before its token is handed out.
    const step = async () => {
      for (const [id, token] of [[5, 1], [6, 2], [7, 3]]) {
        await Promise.resolve();
        b.token(id, token);
      }
    };
    await step();
    expect(sent).toEqual([]);
    // The driver's yield between steps (a setImmediate queued after the flush).
    await new Promise((resolve) => setImmediate(resolve));
    expect(sent).toEqual([{ type: 'tokens', tokens: [{ id: 5, token: 1 }, { id: 6, token: 2 }, { id: 7, token: 3 }] }]);
  });

  it('sends token messages at least the interval apart: a first token at once, later ones at the end of the interval, a done at once', () => {
    const sent: FromRunner[] = [];
    let now = 1000;
    const due: (() => void)[] = [];
    const timers: { at: number; f: () => void; live: boolean }[] = [];
    const b = new TokenBatcher((m) => sent.push(m), {
      intervalMs: 2,
      now: () => now,
      schedule: (f) => due.push(f),
      after: (f, ms) => {
        const t = { at: now + ms, f, live: true };
        timers.push(t);
        return () => (t.live = false);
      },
    });
    const turn = () => {
      for (const f of due.splice(0)) f();
      for (const t of timers) if (t.live && t.at <= now) (t.live = false), t.f();
    };
    b.token(1, 10);
    turn();
    expect(sent).toEqual([{ type: 'token', id: 1, token: 10 }]);
    // Steps 0.5 ms apart: nothing goes until 2 ms after the last message.
    for (const token of [11, 12, 13]) {
      now += 0.5;
      b.token(1, token);
      turn();
    }
    expect(sent).toHaveLength(1);
    now += 0.5;
    turn();
    expect(sent[1]).toEqual({ type: 'tokens', tokens: [11, 12, 13].map((token) => ({ id: 1, token })) });
    // A done does not wait: the tokens before it go first, and the timer it leaves sends nothing twice.
    now += 0.5;
    b.token(1, 14);
    b.send({ type: 'done', id: 1, outcome: { tokens: [10, 11, 12, 13, 14], finishReason: 'length', promptTokens: 1, prefillMs: 0, decodeMs: 0 } });
    now += 5;
    turn();
    expect(sent.slice(2).map((m) => m.type)).toEqual(['token', 'done']);
    // After a quiet spell the next token goes at once again.
    b.token(2, 20);
    turn();
    expect(sent[4]).toEqual({ type: 'token', id: 2, token: 20 });
  });

  it('holds tokens whose timer fires early (Node counts whole milliseconds) until the interval has passed: on a timer for a millisecond or more left, else at the next turn', () => {
    const sent: FromRunner[] = [];
    let now = 1000;
    const due: (() => void)[] = [];
    const timers: { ms: number; f: () => void; live: boolean }[] = [];
    const b = new TokenBatcher((m) => sent.push(m), {
      intervalMs: 3,
      now: () => now,
      schedule: (f) => due.push(f),
      after: (f, ms) => {
        const t = { ms, f, live: true };
        timers.push(t);
        return () => (t.live = false);
      },
    });
    const fire = () => {
      for (const t of timers.splice(0)) if (t.live) t.f();
    };
    const turn = () => {
      for (const f of due.splice(0)) f();
    };
    b.token(1, 10);
    turn();
    expect(sent).toHaveLength(1);
    now += 0.25;
    b.token(1, 11);
    expect(timers.map((t) => t.ms)).toEqual([2.75]);
    // The timer fires 1.5 ms early: it waits again for the 1.5 ms left, on a timer.
    now += 1.25;
    fire();
    expect(sent).toHaveLength(1);
    expect(timers.map((t) => t.ms)).toEqual([1.5]);
    // Early again, 0.5 ms left: no timer (it would wait a whole millisecond), the next turn looks again.
    now += 1;
    fire();
    turn();
    expect(sent).toHaveLength(1);
    expect(timers).toHaveLength(0);
    now += 0.5;
    turn();
    expect(sent[1]).toEqual({ type: 'token', id: 1, token: 11 });
    // A done while the rest is waited for goes at once after its token, and the wait then sends nothing.
    now += 0.5;
    b.token(1, 12);
    now += 2;
    fire();
    b.send({ type: 'done', id: 1, outcome: { tokens: [10, 11, 12], finishReason: 'length', promptTokens: 1, prefillMs: 0, decodeMs: 0 } });
    now += 1;
    turn();
    fire();
    expect(sent.slice(2).map((m) => m.type)).toEqual(['token', 'done']);
  });

  it('refuses an interval out of 0..1000 ms, given or set', () => {
    expect(() => new TokenBatcher(() => undefined, { intervalMs: -1 })).toThrow(/token interval must be 0 to 1000 ms, got -1/);
    const b = new TokenBatcher(() => undefined);
    expect(() => (b.intervalMs = Number.NaN)).toThrow(/token interval/);
    b.intervalMs = 0;
    expect(b.intervalMs).toBe(0);
  });
});
