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
 *
 * Across steps, token messages are at least `intervalMs` apart (TOKEN_INTERVAL_MS): a lone stream
 * of a small model steps every few hundred microseconds, and a message per step cost the runner a
 * pipe write (on a loaded machine, the daemon woken onto its core) and the daemon a wake-up, an IPC
 * parse and a socket write per token. A token after a quiet spell (a request's first) goes at once;
 * one that follows a flush by less than the interval waits for the rest of it, so a token reaches the
 * daemon at most `intervalMs` late, and a request's last tokens go with its `done` at once.
 * The wait is checked against `now` when its timer fires and, if early, waits again for what is left:
 * Node's timers count whole milliseconds of a loop clock read at the start of the loop's turn, and a
 * wait of 1.7 ms fired after ~1 ms, so the messages of a lone stream went ~1 ms apart, twice the
 * messages (each one waking the daemon: ~55 us of the runner's wall time on the 2-core bench machine).
 */
import type { TokenLogprob } from '@orchard/engine';
import type { FromRunner, TokenItem } from './protocol.js';

/** Least time between two token messages, ms: ~6 steps of a 3,000 tok/s stream in one message, a delay no reader sees. */
export const TOKEN_INTERVAL_MS = 2;

export interface TokenBatcherOptions {
  /** Runs the flush of a turn's tokens later (tests). @default setImmediate */
  schedule?: (flush: () => void) => void;
  /** Least time between token messages, ms (0: one message per turn). @default TOKEN_INTERVAL_MS */
  intervalMs?: number;
  /** Runs the flush after `ms` (tests); returns a cancel. @default setTimeout */
  after?: (flush: () => void, ms: number) => () => void;
  /** ms. @default performance.now */
  now?: () => number;
}

export class TokenBatcher {
  readonly #send: (m: FromRunner) => void;
  readonly #schedule: (flush: () => void) => void;
  readonly #after: (flush: () => void, ms: number) => () => void;
  readonly #now: () => number;
  #intervalMs = TOKEN_INTERVAL_MS;
  #items: TokenItem[] = [];
  /** When the last token message went, ms (-Infinity: none yet). */
  #last = -Infinity;
  /** Cancels the waiting timed flush, when one waits. */
  #cancel: (() => void) | null = null;

  constructor(send: (m: FromRunner) => void, o: TokenBatcherOptions = {}) {
    this.#send = send;
    this.#schedule = o.schedule ?? ((f) => void setImmediate(f));
    this.#after =
      o.after ??
      ((f, ms) => {
        const t = setTimeout(f, ms);
        return () => clearTimeout(t);
      });
    this.#now = o.now ?? (() => performance.now());
    this.intervalMs = o.intervalMs ?? TOKEN_INTERVAL_MS;
  }

  /** Least time between token messages, ms; a change applies from the next message. */
  get intervalMs(): number {
    return this.#intervalMs;
  }

  set intervalMs(ms: number) {
    if (!(ms >= 0 && ms <= 1000)) throw new RangeError(`token interval must be 0 to 1000 ms, got ${ms}`);
    this.#intervalMs = ms;
  }

  /** Request `id` sampled `token`: sent with the other tokens of this turn, or of this interval. */
  token(id: number, token: number, logprob?: TokenLogprob): void {
    if (this.#items.length === 0) {
      const wait = this.#last + this.#intervalMs - this.#now();
      if (wait > 0) this.#cancel = this.#after(() => this.#due(), wait);
      else this.#schedule(() => this.flush());
    }
    this.#items.push(logprob ? { id, token, logprob } : { id, token });
  }

  /**
   * The interval's timer fired: flush, unless it fired before the interval ended. Then the rest is
   * waited for on a timer when it is a millisecond or more, else at the next turn of the event loop (a
   * timer waits at least 1 ms: the message would go up to a millisecond late).
   */
  #due(): void {
    const left = this.#last + this.#intervalMs - this.#now();
    if (left <= 0 || this.#items.length === 0) return this.flush();
    if (left >= 1) this.#cancel = this.#after(() => this.#due(), left);
    else {
      let live = true;
      this.#cancel = () => (live = false);
      this.#schedule(() => live && this.#due());
    }
  }

  /** Any other message: the tokens waiting go first. */
  send(m: FromRunner): void {
    this.flush();
    this.#send(m);
  }

  /** Sends the waiting tokens: a lone one as `token` (the message older daemons read), more as `tokens`. */
  flush(): void {
    this.#cancel?.();
    this.#cancel = null;
    if (this.#items.length === 0) return;
    const items = this.#items;
    this.#items = [];
    this.#last = this.#now();
    this.#send(items.length === 1 ? { type: 'token', ...items[0] } : { type: 'tokens', tokens: items });
  }
}
