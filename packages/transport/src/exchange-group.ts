/**
 * A `Group` on top of any Exchange: argument checks, operation ordering, failure handling and the
 * collective schedules. Backends (TCP, simulated fabric, RDMA) only provide the Exchange.
 */
import { GroupClosedError, TransportError, UsageError } from './errors.js';
import type { Group, OpOptions, ReduceOp, ReducibleBuffer } from './group.js';
import { allGather, barrier } from './collectives/all-gather.js';
import { allReduce, type AllReduceParams } from './collectives/all-reduce.js';
import { USER_TAG, type Exchange, type ExchangeOpOptions } from './collectives/exchange.js';
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
  return new ExchangeGroup(ex, options);
}

class ExchangeGroup implements Group {
  readonly rank: number;
  readonly size: number;
  readonly #ex: Exchange;
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

  constructor(ex: Exchange, options: CollectiveOptions) {
    this.#ex = ex;
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

  async close(): Promise<void> {
    this.#broken ??= new GroupClosedError('group closed');
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
    void this.#ex.close(err instanceof Error ? err : new TransportError(reason));
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
