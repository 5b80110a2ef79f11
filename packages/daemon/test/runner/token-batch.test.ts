import { describe, expect, it } from 'vitest';
import type { FromRunner } from '../../src/runner/protocol.js';
import { TokenBatcher } from '../../src/runner/token-batch.js';

/** A batcher whose flushes run when the test says (`turn()`), recording what reaches the daemon. */
function harness() {
  const sent: FromRunner[] = [];
  const due: (() => void)[] = [];
  const b = new TokenBatcher((m) => sent.push(m), (f) => due.push(f));
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
    const b = new TokenBatcher((m) => sent.push(m));
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
});
