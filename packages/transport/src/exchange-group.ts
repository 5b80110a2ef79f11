/**
 * A `Group` on top of any Exchange: argument checks, operation ordering, failure handling and the
 * collective schedules. Backends (TCP, simulated fabric) only provide the Exchange. A sub-group is the
 * same `Group` over a `SubExchange` (rank mapping + a tag namespace per member set), so every backend
 * with tags gets sub-groups from here.
 */
import { setMaxListeners } from 'node:events';
import { GroupClosedError, TransportError, UsageError } from './errors.js';
import type { Group, OpOptions, ReduceOp, ReducibleBuffer } from './group.js';
import { allGather, barrier } from './collectives/all-gather.js';
import { allReduce, type AllReduceParams } from './collectives/all-reduce.js';
import { SUBGROUP_MASK_RANKS, SUBGROUP_MAX_RANKS, USER_TAG, subgroupTag, type Exchange, type ExchangeOpOptions } from './collectives/exchange.js';
import { ScratchArena } from './collectives/scratch.js';
import { SimdStage } from './collectives/simd-stage.js';
import { DirectViews } from './collectives/direct-views.js';
import { ALLREDUCE_DIRECT_MAX_SEND_BYTES, DEFAULT_TIMEOUT_MS, PIPELINE_CHUNK_BYTES } from './collectives/tuning.js';

export interface CollectiveOptions {
  /** Default per-operation timeout, ms. @default 5000 */
  timeoutMs?: number;
  /**
   * All-reduce uses the direct algorithm while `bytes * (size - 1)` is at most this, else the ring.
   * @default ALLREDUCE_DIRECT_MAX_SEND_BYTES (measured, see collectives/tuning.ts)
   */
  thresholdBytes?: number;
  /** Pipeline chunk, bytes. @default PIPELINE_CHUNK_BYTES */
  chunkBytes?: number;
}

const OPS: readonly ReduceOp[] = ['sum', 'max', 'min'];

function checkPositive(name: string, v: number | undefined): void {
  if (v !== undefined && !(Number.isFinite(v) && v > 0)) {
    throw new UsageError(`${name} must be a positive number, got ${v}`);
  }
}

/** Wraps an Exchange into a Group. The group owns the exchange and closes it. */
export function groupOverExchange(ex: Exchange, options: CollectiveOptions = {}): Group {
  checkPositive('timeoutMs', options.timeoutMs);
  checkPositive('thresholdBytes', options.thresholdBytes);
  checkPositive('chunkBytes', options.chunkBytes);
  return new ExchangeGroup(ex, options, null);
}

/**
 * Checks a sub-group's member list for a group of `size` ranks seen from `rank` and returns the members
 * as ranks of the root group (`ranks[m]` for member m; m itself without `ranks`), ascending. Error
 * messages name the bad value. Cheap for a valid list: callers may look sub-groups up per operation.
 */
export function rootMembers(members: readonly number[], rank: number, size: number, ranks?: readonly number[]): number[] {
  const list = () => (Array.isArray(members) ? `[${members.join(', ')}]` : String(members));
  if (!Array.isArray(members) || members.length === 0) throw new UsageError(`subgroup: members must be a non-empty array of ranks, got ${list()}`);
  const out: number[] = [];
  let prev = -1;
  let mine = false;
  for (let i = 0; i < members.length; i++) {
    const m = members[i];
    if (!Number.isInteger(m) || m < 0 || m >= size) throw new UsageError(`subgroup: member ${m} is not a rank in 0..${size - 1} (members ${list()})`);
    if (m <= prev) throw new UsageError(`subgroup: members must be ascending and distinct, got ${m} after ${prev} (members ${list()})`);
    if (m === rank) mine = true;
    out.push(ranks ? ranks[m] : m);
    prev = m;
  }
  if (!mine) throw new UsageError(`subgroup: members ${list()} do not include this rank (${rank})`);
  return out;
}

/**
 * The tag namespace (`subgroupTag`) of a member set, given as ascending ranks of a root group of
 * `size` ranks; the same on every rank, and distinct for distinct sets. Up to SUBGROUP_MASK_RANKS
 * ranks it is the set itself as a bit mask, so any set works. Larger groups (up to
 * SUBGROUP_MAX_RANKS) get consecutive ranks only, numbered by first rank and count: that covers the
 * runner's use (a pipeline stage's tensor ranks are consecutive) within the tag's 16 bits.
 */
export function subgroupNamespace(ranks: readonly number[], size: number): number {
  if (size <= SUBGROUP_MASK_RANKS) return ranks.reduce((mask, r) => mask | (1 << r), 0);
  if (size > SUBGROUP_MAX_RANKS) {
    throw new UsageError(`subgroup: groups of at most ${SUBGROUP_MAX_RANKS} ranks have sub-groups (the member set travels in each message's tag), this one has ${size}`);
  }
  const first = ranks[0];
  if (ranks.some((r, i) => r !== first + i)) {
    throw new UsageError(
      `subgroup: in a group of more than ${SUBGROUP_MASK_RANKS} ranks (this one has ${size}) a sub-group's ranks must be consecutive, got [${ranks.join(', ')}]`,
    );
  }
  return 1 + first * SUBGROUP_MAX_RANKS + (ranks.length - 1);
}

/**
 * The Exchange of a sub-group: rank i is the parent's rank `ranks[i]`, and every tag moves into the
 * member set's namespace (`subgroupTag`), so the parent's and other sub-groups' messages on the same
 * links never match its receives. Closing it aborts only its own pending operations (through a signal
 * given to each), never the parent's links; the parent closing or failing rejects them as its own.
 */
class SubExchange implements Exchange {
  readonly rank: number;
  readonly size: number;
  readonly #parent: Exchange;
  readonly #ranks: readonly number[];
  readonly #namespace: number;
  readonly #closer = new AbortController();
  /** The last options given and their translation (one collective passes the same object to every send and receive). */
  #lastIn: ExchangeOpOptions | null = null;
  #lastOut: ExchangeOpOptions | null = null;

  constructor(parent: Exchange, ranks: readonly number[], namespace: number) {
    this.#parent = parent;
    this.#ranks = ranks;
    this.#namespace = namespace;
    this.rank = ranks.indexOf(parent.rank);
    this.size = ranks.length;
    // Every pending receive listens on the closer: a ring all-reduce posts many at once.
    setMaxListeners(0, this.#closer.signal);
  }

  send(peer: number, tag: number, bytes: Uint8Array, options: ExchangeOpOptions): Promise<void> {
    return this.#parent.send(this.#ranks[peer], subgroupTag(this.#namespace, tag), bytes, this.#io(options));
  }

  recv(peer: number, tag: number, into: Uint8Array, options: ExchangeOpOptions): Promise<void> {
    return this.#parent.recv(this.#ranks[peer], subgroupTag(this.#namespace, tag), into, this.#io(options));
  }

  async close(reason?: Error): Promise<void> {
    if (!this.#closer.signal.aborted) this.#closer.abort(reason ?? new GroupClosedError('sub-group closed'));
  }

  #io(options: ExchangeOpOptions): ExchangeOpOptions {
    if (options === this.#lastIn) return this.#lastOut!;
    const closer = this.#closer.signal;
    const signal = options.signal ? AbortSignal.any([options.signal, closer]) : closer;
    this.#lastIn = options;
    this.#lastOut = { timeoutMs: options.timeoutMs, signal };
    return this.#lastOut;
  }
}

class ExchangeGroup implements Group {
  readonly rank: number;
  readonly size: number;
  readonly #ex: Exchange;
  readonly #options: CollectiveOptions;
  /** The group sub-groups are made of (null for that group itself). */
  readonly #root: ExchangeGroup | null;
  /** Root ranks of this group's ranks (null for the root: the identity). */
  readonly #ranks: readonly number[] | null;
  /**
   * The root's sub-groups by tag namespace (`subgroupNamespace`); sub-groups of a sub-group are made of the root. A closed one
   * stays: its member set cannot start over in the same tag namespace while messages of its last
   * operations may still be on the way.
   */
  readonly #subgroups = new Map<number, ExchangeGroup>();
  readonly #timeoutMs: number;
  readonly #threshold: number;
  readonly #chunk: number;
  readonly #scratch = new ScratchArena();
  readonly #accumulator = new ScratchArena();
  readonly #simd = new SimdStage();
  readonly #views = new DirectViews();
  /** Collectives run one at a time, in call order; the counter tags their messages. */
  #opSeq = 0;
  #tail: Promise<unknown> = Promise.resolve();
  /** Collectives started or queued and not yet finished. */
  #running = 0;
  /** Set once the group is closed or broken; every later call rejects with it. */
  #broken: GroupClosedError | null = null;
  /** Made once: collectives are latency-bound, so nothing is allocated per call that can be kept. */
  readonly #onError = (err: unknown): void => this.#fail(err);
  /** Options of every operation called without any (never mutated). */
  readonly #defaultIo: ExchangeOpOptions;
  readonly #params: AllReduceParams;

  constructor(ex: Exchange, options: CollectiveOptions, root: ExchangeGroup | null, ranks: readonly number[] | null = null) {
    this.#ex = ex;
    this.#options = options;
    this.#root = root;
    this.#ranks = ranks;
    this.rank = ex.rank;
    this.size = ex.size;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#threshold = options.thresholdBytes ?? ALLREDUCE_DIRECT_MAX_SEND_BYTES;
    this.#chunk = options.chunkBytes ?? PIPELINE_CHUNK_BYTES;
    this.#defaultIo = { timeoutMs: this.#timeoutMs };
    this.#params = {
      opSeq: 0,
      io: this.#defaultIo,
      onError: this.#onError,
      thresholdBytes: this.#threshold,
      chunkBytes: this.#chunk,
      scratch: this.#scratch,
      accumulator: this.#accumulator,
      simd: this.#simd,
      views: this.#views,
    };
  }

  async send(peer: number, buf: ArrayBufferView, options?: OpOptions): Promise<void> {
    this.#checkPeer('send', peer);
    this.#checkView('send', buf);
    const io = this.#io(options);
    this.#ready();
    try {
      await this.#ex.send(peer, USER_TAG, new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength), io);
    } catch (err) {
      this.#failFrom(err, options?.signal);
      throw err;
    }
  }

  async recv(peer: number, buf: ArrayBufferView, options?: OpOptions): Promise<void> {
    this.#checkPeer('recv', peer);
    this.#checkView('recv', buf);
    const io = this.#io(options);
    this.#ready();
    try {
      await this.#ex.recv(peer, USER_TAG, new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength), io);
    } catch (err) {
      this.#failFrom(err, options?.signal);
      throw err;
    }
  }

  allReduce(buf: ReducibleBuffer, op: ReduceOp = 'sum', options?: OpOptions): Promise<void> {
    if (!(buf instanceof Float32Array) && !(buf instanceof Uint16Array)) {
      return Promise.reject(new UsageError('allReduce: buffer must be a Float32Array or a Uint16Array (f16 bits)'));
    }
    if (!OPS.includes(op)) return Promise.reject(new UsageError(`allReduce: op must be one of ${OPS.join(', ')}, got ${String(op)}`));
    return this.#collective(options, (opSeq, io) => {
      // One parameter object per group, set as each all-reduce starts: collectives on a group run
      // one at a time, and each finishes (every send and receive settled) before the next starts.
      const p = this.#params;
      p.opSeq = opSeq;
      p.io = io;
      return allReduce(this.#ex, buf, op, p);
    });
  }

  allGather(input: ArrayBufferView, output: ArrayBufferView, options?: OpOptions): Promise<void> {
    try {
      this.#checkView('allGather input', input);
      this.#checkView('allGather output', output);
    } catch (err) {
      return Promise.reject(err);
    }
    if (output.byteLength !== input.byteLength * this.size) {
      return Promise.reject(
        new UsageError(`allGather: output is ${output.byteLength} bytes, expected ${input.byteLength} x ${this.size} = ${input.byteLength * this.size}`),
      );
    }
    return this.#collective(options, (opSeq, io, onError) => allGather(this.#ex, input, output, { opSeq, io, onError, chunkBytes: this.#chunk }));
  }

  barrier(options?: OpOptions): Promise<void> {
    return this.#collective(options, (opSeq, io, onError) => barrier(this.#ex, { opSeq, io, onError }));
  }

  subgroup(members: readonly number[]): Group {
    const root = this.#root ?? this;
    const ranks = rootMembers(members, this.rank, this.size, this.#ranks ?? undefined);
    const namespace = subgroupNamespace(ranks, root.size);
    const known = root.#subgroups.get(namespace);
    if (known) return known;
    this.#ready();
    const sub = new ExchangeGroup(new SubExchange(root.#ex, ranks, namespace), root.#options, root, ranks);
    root.#subgroups.set(namespace, sub);
    return sub;
  }

  async close(): Promise<void> {
    this.#broken ??= new GroupClosedError('group closed');
    if (!this.#root) {
      for (const sub of this.#subgroups.values()) sub.#parentGone(new GroupClosedError('group closed: its parent group was closed'));
      this.#subgroups.clear();
    }
    await this.#ex.close(new GroupClosedError('group closed'));
    this.#scratch.release();
    this.#accumulator.release();
    this.#simd.release();
    this.#views.release();
  }

  #collective(
    options: OpOptions | undefined,
    run: (opSeq: number, io: ExchangeOpOptions, onError: (err: unknown) => void) => Promise<void>,
  ): Promise<void> {
    let io: ExchangeOpOptions;
    try {
      io = this.#io(options);
    } catch (err) {
      return Promise.reject(err);
    }
    // The counter is taken at call time so that the tag depends only on call order.
    const opSeq = this.#opSeq++;
    // Fast path: nothing queued, start now instead of behind an already-settled tail (and without
    // a closure for the queue). A queued call starts once the one before settles either way.
    let result: Promise<void>;
    if (this.#running++ === 0) result = this.#run(opSeq, io, options?.signal, run);
    else {
      const start = () => this.#run(opSeq, io, options?.signal, run);
      result = this.#tail.then(start, start);
    }
    this.#tail = result;
    return result;
  }

  async #run(
    opSeq: number,
    io: ExchangeOpOptions,
    signal: AbortSignal | undefined,
    run: (opSeq: number, io: ExchangeOpOptions, onError: (err: unknown) => void) => Promise<void>,
  ): Promise<void> {
    try {
      this.#ready();
      signal?.throwIfAborted();
      await run(opSeq, io, this.#onError);
    } finally {
      this.#running--;
    }
  }

  #io(options: OpOptions | undefined): ExchangeOpOptions {
    if (options === undefined) return this.#defaultIo;
    const timeoutMs = options?.timeoutMs ?? this.#timeoutMs;
    // Infinity is allowed per operation for waits that are idle by design (a follower waiting for
    // the next request); a dead peer still fails them through the closed connection.
    if (timeoutMs !== Infinity) checkPositive('timeoutMs', timeoutMs);
    return { timeoutMs, signal: options?.signal };
  }

  #ready(): void {
    if (this.#broken) throw this.#broken;
  }

  /** A collective that fails part-way leaves peers out of step: the group cannot be used again. */
  #fail(err: unknown): void {
    if (this.#broken) return;
    const reason = err instanceof Error ? err.message : String(err);
    this.#broken = new GroupClosedError(`group unusable after an earlier failure: ${reason}`, { cause: err });
    if (!this.#root) {
      for (const sub of this.#subgroups.values()) sub.#parentGone(new GroupClosedError(`group unusable: its parent group failed: ${reason}`, { cause: err }));
      this.#subgroups.clear();
    }
    void this.#ex.close(err instanceof Error ? err : new TransportError(reason));
  }

  /** A sub-group whose root closed or failed: later calls reject with `err`, pending ones now. */
  #parentGone(err: GroupClosedError): void {
    this.#broken ??= err;
    void this.#ex.close(err);
  }

  /** Point-to-point failures break the group only when the link itself failed. */
  #failFrom(err: unknown, signal: AbortSignal | undefined): void {
    if (signal?.aborted && err === signal.reason) return;
    if (err instanceof UsageError) return;
    if (err instanceof TransportError) this.#fail(err);
  }

  #checkPeer(what: string, peer: number): void {
    if (!Number.isInteger(peer) || peer < 0 || peer >= this.size || peer === this.rank) {
      throw new UsageError(`${what}: peer must be a rank in 0..${this.size - 1} other than this rank (${this.rank}), got ${peer}`);
    }
  }

  #checkView(what: string, v: ArrayBufferView): void {
    if (!ArrayBuffer.isView(v)) throw new UsageError(`${what}: expected a typed array or DataView`);
  }
}
