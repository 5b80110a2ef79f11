/**
 * The collectives contract every backend (TCP, RDMA, simulated fabric) implements.
 * Kept as small as MLX's distributed API on purpose: engines and the daemon only ever
 * see this interface, never a socket or a queue pair.
 *
 * Buffers are views over caller memory. Operations fill or reduce them in place so the
 * hot path allocates nothing. Float16 tensors travel as `Uint16Array` (IEEE half bits).
 */
export type ReduceOp = 'sum' | 'max' | 'min';

/** A tensor buffer that collectives can reduce: f32, or f16 bits in a Uint16Array. */
export type ReducibleBuffer = Float32Array | Uint16Array;

export interface OpOptions {
  /** Abort the operation; the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * Milliseconds to wait for a peer before rejecting with an error naming it.
   * @default the group's `timeoutMs` — no collective waits forever on a dead peer.
   * `Infinity` is accepted for waits that are idle by design; a peer whose connection closes
   * still fails them at once, but a stalled (silent, connected) peer is then never detected.
   */
  timeoutMs?: number;
}

export interface Group {
  /** This process's rank, 0 ≤ rank < size. */
  readonly rank: number;
  /** Number of ranks. A size-1 group makes every collective a no-op, so callers need no branches. */
  readonly size: number;

  /** Send the bytes of `buf` to `peer`. Resolves when the bytes are handed to the link. */
  send(peer: number, buf: ArrayBufferView, options?: OpOptions): Promise<void>;
  /** Receive exactly `buf.byteLength` bytes from `peer` into `buf`. */
  recv(peer: number, buf: ArrayBufferView, options?: OpOptions): Promise<void>;
  /**
   * Reduce `buf` element-wise across all ranks, in place. Every rank ends with bit-identical
   * results (reduction happens in a fixed rank order regardless of arrival order).
   */
  allReduce(buf: ReducibleBuffer, op?: ReduceOp, options?: OpOptions): Promise<void>;
  /**
   * Concatenate every rank's `input` in rank order into `output`
   * (`output.byteLength === input.byteLength * size`).
   */
  allGather(input: ArrayBufferView, output: ArrayBufferView, options?: OpOptions): Promise<void>;
  /** Resolve once every rank has entered the barrier. */
  barrier(options?: OpOptions): Promise<void>;
  /**
   * The group of `members` (ranks of this group, ascending, distinct, this rank among them), like
   * MLX's `group.split`: its rank i is this group's rank `members[i]`, and its operations behave as a
   * group of `members.length` ranks. Every member must ask for the same list. In a group of more than
   * 16 ranks (up to 128) over TCP or the simulated fabric, the members must be consecutive ranks. Its messages never mix
   * with this group's or another sub-group's on the same links (on RDMA links, which carry no tags,
   * see `MeshGroup`). The same list always gives the same object, so callers may look it up per
   * operation; once closed it stays closed (its messages may still be on the way, so its member set
   * does not start over). Closing it leaves this group open; closing or breaking this group fails it.
   */
  subgroup(members: readonly number[]): Group;
  /** Release sockets, buffers and timers; pending operations reject. Idempotent. */
  close(): Promise<void>;
}
