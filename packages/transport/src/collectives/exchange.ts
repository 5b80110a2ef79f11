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

/**
 * Groups of up to this many ranks may make a sub-group of any member set: the set travels in each of
 * the sub-group's message tags as a bit mask over the ranks (see subgroupNamespace).
 */
export const SUBGROUP_MASK_RANKS = 16;

/** Most ranks a group may have for sub-groups to be made of it (larger ones: consecutive ranks only). */
export const SUBGROUP_MAX_RANKS = 128;

/**
 * Tag of one message of a sub-group: `tag` (USER_TAG or a collectiveTag) moved into the namespace of
 * its member set (`namespace`: 1..65535, one per member set, see subgroupNamespace in
 * exchange-group.ts). High bit clear and the namespace in bits 15..30, so it is never USER_TAG, never
 * a collective tag of the whole group, and never another member set's tag: traffic of the group and of
 * its sub-groups can share a link without matching each other's receives. Below the namespace: bit 14
 * marks a collective, bits 8..13 the low 6 bits of its counter (collectives of a group run one at a
 * time and no rank gets a whole collective ahead of a peer, so 64 values never meet an old one still
 * in flight; messages of one tag also keep their order), bits 0..7 its step.
 */
export function subgroupTag(namespace: number, tag: number): number {
  if (tag === USER_TAG) return namespace << 15;
  if (tag < 0x80000000) throw new RangeError(`tag 0x${tag.toString(16)} is neither USER_TAG nor a collective tag`);
  return (namespace << 15) | 0x4000 | (((tag >>> 8) & 0x3f) << 8) | (tag & 0xff);
}
