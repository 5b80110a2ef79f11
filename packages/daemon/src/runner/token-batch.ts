/**
 * The runner's messages to its daemon, with the tokens sampled in one turn of its event loop sent as
 * one IPC message. A batched step hands out a token for each of its sequences in one pass (and a
 * confirmed draft several for one sequence): one message each would be one JSON encode, one pipe
 * write and, on a busy machine, one wake-up of the daemon per token. The batch is flushed in a
 * setImmediate, not a microtask: the step awaits each sequence's pick (pickToken is async), and a
 * microtask flush ran at the first of those awaits, so a step of 8 sequences still sent 8 messages.
 * The drivers yield to the event loop between steps (batch-driver.ts: a setImmediate queued after
 * this one; driver.ts: socket waits), so the flush still comes before the next step; and any other
 * message flushes first: a request's `done` never overtakes its last tokens.
 */
import type { TokenLogprob } from '@orchard/engine';
import type { FromRunner, TokenItem } from './protocol.js';

export class TokenBatcher {
  readonly #send: (m: FromRunner) => void;
  readonly #schedule: (flush: () => void) => void;
  #items: TokenItem[] = [];

  constructor(send: (m: FromRunner) => void, schedule: (flush: () => void) => void = (f) => void setImmediate(f)) {
    this.#send = send;
    this.#schedule = schedule;
  }

  /** Request `id` sampled `token`: sent with the other tokens of this turn. */
  token(id: number, token: number, logprob?: TokenLogprob): void {
    if (this.#items.length === 0) this.#schedule(() => this.flush());
    this.#items.push(logprob ? { id, token, logprob } : { id, token });
  }

  /** Any other message: the tokens waiting go first. */
  send(m: FromRunner): void {
    this.flush();
    this.#send(m);
  }

  /** Sends the waiting tokens: a lone one as `token` (the message older daemons read), more as `tokens`. */
  flush(): void {
    if (this.#items.length === 0) return;
    const items = this.#items;
    this.#items = [];
    this.#send(items.length === 1 ? { type: 'token', ...items[0] } : { type: 'tokens', tokens: items });
  }
}
