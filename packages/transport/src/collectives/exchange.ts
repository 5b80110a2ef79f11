/**
 * The point-to-point layer every backend provides (TCP, simulated fabric, RDMA). Collective
 * schedules are written against this and nothing else.
 *
 * Contract:
 * - Messages from one rank to another with the same tag arrive in the order they were sent.
 * - `recv` must be given exactly the message's size; a mismatch fails the link.
 * - `send` resolves once `bytes` may be reused by the caller.
 * - A link failure (peer gone, stalled past `timeoutMs`, garbage) rejects every pending operation
 *   with that peer with an error naming the peer.
 */
export interface ExchangeOpOptions {
  /** Reject if the peer shows no progress for this long, ms. */
  timeoutMs: number;
  signal?: AbortSignal;
}

export interface Exchange {
  readonly rank: number;
  readonly size: number;
  send(peer: number, tag: number, bytes: Uint8Array, options: ExchangeOpOptions): Promise<void>;
  recv(peer: number, tag: number, into: Uint8Array, options: ExchangeOpOptions): Promise<void>;
  /** Fail every pending operation with `reason` and release links. Idempotent. */
  close(reason?: Error): Promise<void>;
}

/** User point-to-point traffic. */
export const USER_TAG = 0;

/**
 * Tag of one step of one collective: high bit set, 23 bits of the operation counter, 8 bits of step.
 * Collectives are started in the same order on every rank, so the counter agrees everywhere.
 */
export function collectiveTag(opSeq: number, step: number): number {
  if (step < 0 || step > 255) throw new RangeError(`collective step ${step} outside 0..255`);
  return (0x80000000 | ((opSeq & 0x7fffff) << 8) | step) >>> 0;
}
