/**
 * The RDMA protocol for one peer, above the verbs table and identical for the simulated fabric, rdma-core
 * and Apple's library:
 * - one registered slab per process (shared by all links), carved into fixed slots of the largest size class;
 * - messages cut by `planChunks` so each SEND and RECV cover the same frame count;
 * - receives are posted as soon as a `recv` is known (collectives start their receives before their sends),
 *   with `depth` (≥ 2) buffers in flight in each direction;
 * - completions dispatched by work-request id, status checked;
 * - a watchdog that turns "no completion for timeoutMs while work is outstanding" into an error naming the peer.
 * A failed link stays failed: after an error or a stall the frame accounting of the queue pair is unknown,
 * so nothing is retried on it.
 */
import type { Group, OpOptions } from '../group.js';
import {
  RdmaClosedError,
  RdmaCompletionError,
  RdmaProtocolError,
  RdmaStallError,
  describeRdmaPeer,
  type RdmaPeer,
} from './errors.js';
import { chunkLength, planChunks, recvLength, type ChunkPlan } from './size-classes.js';
import { WcStatus, wcStatusName, type Handle, type Verbs, type WorkCompletion } from './verbs.js';

/** One ordered, reliable byte-message channel to a peer: what collectives need from RDMA or TCP. */
export interface PeerLink {
  readonly transport: 'rdma' | 'tcp' | 'fallback';
  /** Resolves once `bytes` may be reused (copied into registered memory or handed to the socket). */
  send(bytes: Uint8Array, options?: OpOptions): Promise<void>;
  /** Receives exactly `into.byteLength` bytes; the sender must send the same length. */
  recv(into: Uint8Array, options?: OpOptions): Promise<void>;
  close(): Promise<void>;
}

const SEND = 0;
const RECV = 1;
/** wrId = link index · 2^17 + kind · 2^16 + slot; plain numbers stay exact in a 64-bit wr_id. */
function wrIdOf(link: number, kind: number, slot: number): number {
  return link * 0x20000 + kind * 0x10000 + slot;
}

interface OutMsg {
  bytes: Uint8Array;
  plan: ChunkPlan;
  next: number;
  resolve: () => void;
  reject: (e: Error) => void;
  timeoutMs: number;
}

interface InMsg {
  into: Uint8Array;
  plan: ChunkPlan;
  posted: number;
  done: number;
  resolve: () => void;
  reject: (e: Error) => void;
  timeoutMs: number;
}

/**
 * Polls one completion queue for all links of a process and dispatches by work-request id. Runs only while
 * work is outstanding; waits on the library's completion channel when it has one, else yields with
 * setImmediate between empty polls. Also hosts the watchdog timer.
 */
export class CompletionPoller {
  private readonly links = new Map<number, RdmaLink>();
  private running = false;
  private wake: (() => void) | null = null;
  private watchdog: NodeJS.Timeout | null = null;
  private closed = false;
  /** Completions dispatched, for benchmarks. */
  dispatched = 0;

  constructor(
    private readonly verbs: Verbs,
    readonly cq: Handle,
    private readonly watchdogTickMs = 25,
  ) {}

  add(index: number, link: RdmaLink): void {
    this.links.set(index, link);
  }

  remove(index: number): void {
    this.links.delete(index);
  }

  /** Called whenever work is posted. */
  kick(): void {
    if (this.closed) return;
    if (!this.watchdog) {
      this.watchdog = setInterval(() => this.checkStalls(), this.watchdogTickMs);
      this.watchdog.unref();
    }
    if (this.wake) {
      const w = this.wake;
      this.wake = null;
      w();
    }
    if (!this.running) void this.run();
  }

  close(): void {
    this.closed = true;
    if (this.watchdog) clearInterval(this.watchdog);
    this.watchdog = null;
    this.wake?.();
  }

  private busy(): boolean {
    for (const l of this.links.values()) if (l.outstanding() > 0) return true;
    return false;
  }

  private checkStalls(): void {
    const now = performance.now();
    let any = false;
    for (const l of this.links.values()) if (l.checkStall(now)) any = true;
    if (!any && !this.busy() && this.watchdog) {
      clearInterval(this.watchdog);
      this.watchdog = null;
    }
  }

  private async run(): Promise<void> {
    this.running = true;
    // `running` must turn false in the same tick the loop sees no work, or a receive posted by a
    // continuation of the last completion would find a poller that is about to stop.
    try {
      while (!this.closed && this.busy()) {
        const wcs = this.verbs.pollCq(this.cq, 64);
        if (wcs.length > 0) {
          for (const wc of wcs) this.dispatch(wc);
          continue;
        }
        if (this.verbs.waitCq) {
          const woken = new Promise<void>((resolve) => (this.wake = resolve));
          await Promise.race([this.verbs.waitCq(this.cq), woken]);
          this.wake = null;
        } else {
          await new Promise<void>((resolve) => setImmediate(resolve));
        }
      }
    } catch (err) {
      // The library itself failed (ibv_poll_cq error): every link on this queue fails with it.
      for (const l of [...this.links.values()]) {
        l.fail(new RdmaProtocolError(`polling completions failed: ${(err as Error).message}`, { cause: err }));
      }
    } finally {
      this.running = false;
    }
  }

  private dispatch(wc: WorkCompletion): void {
    this.dispatched++;
    const link = this.links.get(Math.floor(wc.wrId / 0x20000));
    // Completions of a link that already failed or closed are flushes: nothing waits for them.
    if (link) link.onCompletion(wc);
  }
}

export interface RdmaLinkOptions {
  verbs: Verbs;
  poller: CompletionPoller;
  /** Index of this link in the poller (distinct per link of one poller). */
  index: number;
  qp: Handle;
  mr: Handle;
  /** The registered slab's bytes; this link owns [slabOffset, slabOffset + 2·depth·slotBytes). */
  slab: Uint8Array;
  slabOffset: number;
  depth: number;
  sizeClasses: readonly number[];
  peer: RdmaPeer;
  timeoutMs: number;
  /** Releases the queue pair when the link closes. */
  onClose?: () => void;
}

export class RdmaLink implements PeerLink {
  readonly transport = 'rdma' as const;
  readonly peer: RdmaPeer;
  private readonly o: RdmaLinkOptions;
  private readonly slotBytes: number;
  private readonly freeSend: number[] = [];
  private readonly freeRecv: number[] = [];
  private readonly sendQ: OutMsg[] = [];
  private readonly recvQ: InMsg[] = [];
  private readonly postedRecv = new Map<number, { msg: InMsg; chunk: number }>();
  private sendsInFlight = 0;
  private lastProgress = performance.now();
  private failure: Error | null = null;
  private drained: (() => void) | null = null;

  constructor(options: RdmaLinkOptions) {
    if (options.depth < 2) throw new RangeError('RDMA link depth must be at least 2 (double buffering)');
    this.o = options;
    this.peer = options.peer;
    this.slotBytes = options.sizeClasses[options.sizeClasses.length - 1]!;
    for (let i = options.depth - 1; i >= 0; i--) {
      this.freeSend.push(i);
      this.freeRecv.push(i);
    }
    options.poller.add(options.index, this);
  }

  /** Bytes of slab one link needs. */
  static slabBytes(depth: number, sizeClasses: readonly number[]): number {
    return 2 * depth * sizeClasses[sizeClasses.length - 1]!;
  }

  get failed(): Error | null {
    return this.failure;
  }

  outstanding(): number {
    if (this.failure) return 0;
    return this.sendQ.length + this.sendsInFlight + this.recvQ.length;
  }

  send(bytes: Uint8Array, options: OpOptions = {}): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    const plan = planChunks(bytes.byteLength, this.o.sizeClasses);
    if (plan.count === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const untrack = this.track(options, reject);
      const settle = { resolve: () => (untrack(), resolve()), reject: (e: Error) => (untrack(), reject(e)) };
      this.sendQ.push({ bytes, plan, next: 0, ...settle, timeoutMs: options.timeoutMs ?? this.o.timeoutMs });
      this.pumpSend();
    });
  }

  recv(into: Uint8Array, options: OpOptions = {}): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    const plan = planChunks(into.byteLength, this.o.sizeClasses);
    if (plan.count === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const untrack = this.track(options, reject);
      const settle = { resolve: () => (untrack(), resolve()), reject: (e: Error) => (untrack(), reject(e)) };
      this.recvQ.push({ into, plan, posted: 0, done: 0, ...settle, timeoutMs: options.timeoutMs ?? this.o.timeoutMs });
      this.pumpRecv();
    });
  }

  /**
   * Lets sends that already resolved (their bytes are in the slab) leave before the queue pair goes away —
   * a send waits for the peer's receive, and destroying the queue pair would drop it — for at most the
   * link's timeout; then fails whatever is still pending.
   */
  async close(): Promise<void> {
    if (!this.failure && (this.sendQ.length > 0 || this.sendsInFlight > 0)) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.o.timeoutMs);
        timer.unref();
        this.drained = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this.fail(new RdmaClosedError(`RDMA link to ${describeRdmaPeer(this.peer)} closed`));
  }

  /** Fails every pending operation and the link for good; idempotent. */
  fail(error: Error): void {
    if (this.failure) return;
    this.failure = error;
    for (const m of this.sendQ.splice(0)) m.reject(error);
    for (const m of this.recvQ.splice(0)) m.reject(error);
    this.postedRecv.clear();
    this.o.poller.remove(this.o.index);
    this.o.onClose?.();
    this.drained?.();
  }

  /** Starts the stall clock if idle and wires the abort signal; returns the clean-up for when the op settles. */
  private track(options: OpOptions, reject: (e: unknown) => void): () => void {
    if (this.outstanding() === 0) this.lastProgress = performance.now();
    const signal = options.signal;
    if (!signal) return () => {};
    // The aborted operation rejects with the signal's reason. Its receive may already be posted, so the queue
    // pair's frame accounting is off: the link fails rather than pretending the next message lines up.
    const abort = () => {
      reject(signal.reason);
      this.fail(new RdmaClosedError(`RDMA link to ${describeRdmaPeer(this.peer)} unusable after an aborted operation`, { cause: signal.reason }));
    };
    if (signal.aborted) {
      queueMicrotask(abort);
      return () => {};
    }
    signal.addEventListener('abort', abort, { once: true });
    return () => signal.removeEventListener('abort', abort);
  }

  private slotOffset(kind: number, slot: number): number {
    return this.o.slabOffset + (kind * this.o.depth + slot) * this.slotBytes;
  }

  private pumpSend(): void {
    while (!this.failure && this.sendQ.length > 0 && this.freeSend.length > 0) {
      const m = this.sendQ[0]!;
      const len = chunkLength(m.plan, m.next);
      const slot = this.freeSend.pop()!;
      const off = this.slotOffset(SEND, slot);
      const start = m.next * m.plan.chunkBytes;
      this.o.slab.set(m.bytes.subarray(start, start + len), off);
      try {
        this.o.verbs.postSend(this.o.qp, wrIdOf(this.o.index, SEND, slot), this.o.mr, off, len);
      } catch (err) {
        this.fail(new RdmaProtocolError(`posting a send to ${describeRdmaPeer(this.peer)} failed: ${(err as Error).message}`, { cause: err }));
        return;
      }
      this.sendsInFlight++;
      m.next++;
      if (m.next === m.plan.count) {
        this.sendQ.shift();
        m.resolve();
      }
    }
    if (this.sendsInFlight > 0) this.o.poller.kick();
  }

  private pumpRecv(): void {
    for (const m of this.recvQ) {
      while (!this.failure && m.posted < m.plan.count && this.freeRecv.length > 0) {
        const slot = this.freeRecv.pop()!;
        const len = recvLength(chunkLength(m.plan, m.posted));
        try {
          this.o.verbs.postRecv(this.o.qp, wrIdOf(this.o.index, RECV, slot), this.o.mr, this.slotOffset(RECV, slot), len);
        } catch (err) {
          this.fail(new RdmaProtocolError(`posting a receive for ${describeRdmaPeer(this.peer)} failed: ${(err as Error).message}`, { cause: err }));
          return;
        }
        this.postedRecv.set(slot, { msg: m, chunk: m.posted });
        m.posted++;
      }
      // Receives go on the queue in message order: the next message waits until this one is fully posted.
      if (m.posted < m.plan.count) break;
    }
    if (this.recvQ.length > 0) this.o.poller.kick();
  }

  onCompletion(wc: WorkCompletion): void {
    if (this.failure) return;
    const kind = Math.floor(wc.wrId / 0x10000) & 1;
    const slot = wc.wrId & 0xffff;
    if (wc.status !== WcStatus.SUCCESS) {
      this.fail(new RdmaCompletionError(this.peer, wc.status, wcStatusName(wc.status), kind === SEND ? 'send' : 'recv'));
      return;
    }
    this.lastProgress = performance.now();
    if (kind === SEND) {
      this.sendsInFlight--;
      this.freeSend.push(slot);
      this.pumpSend();
      if (this.drained && this.sendsInFlight === 0 && this.sendQ.length === 0) this.drained();
      return;
    }
    const posted = this.postedRecv.get(slot);
    if (!posted) {
      this.fail(new RdmaProtocolError(`receive completion for unknown slot ${slot} from ${describeRdmaPeer(this.peer)}`));
      return;
    }
    this.postedRecv.delete(slot);
    const { msg, chunk } = posted;
    const expected = chunkLength(msg.plan, chunk);
    if (wc.byteLen !== expected) {
      this.fail(
        new RdmaProtocolError(
          `${describeRdmaPeer(this.peer)} sent ${wc.byteLen} bytes where ${expected} were expected: send and recv sizes differ`,
        ),
      );
      return;
    }
    const off = this.slotOffset(RECV, slot);
    msg.into.set(this.o.slab.subarray(off, off + expected), chunk * msg.plan.chunkBytes);
    this.freeRecv.push(slot);
    msg.done++;
    if (msg.done === msg.plan.count) {
      // FIFO per queue pair: the finished message is the oldest one.
      this.recvQ.shift();
      msg.resolve();
    }
    this.pumpRecv();
  }

  /** Watchdog: true while work is outstanding; fails the link when it made no progress for too long. */
  checkStall(now: number): boolean {
    if (this.outstanding() === 0) return false;
    const timeoutMs = Math.min(this.sendQ[0]?.timeoutMs ?? Infinity, this.recvQ[0]?.timeoutMs ?? Infinity, this.o.timeoutMs);
    if (now - this.lastProgress > timeoutMs) {
      const detail = `${this.sendQ.length} sends queued, ${this.sendsInFlight} in flight, ${this.recvQ.length} receives waiting`;
      this.fail(new RdmaStallError(this.peer, timeoutMs, detail));
      return false;
    }
    return true;
  }
}

/**
 * A non-RDMA link over another Group's point-to-point operations — the daemon passes its TCP group, so a
 * link whose RDMA setup failed carries the same messages over TCP. The Group stays owned by the caller.
 */
export function linkOverGroup(group: Group, peer: number): PeerLink {
  return {
    transport: 'tcp',
    send: (bytes, options) => group.send(peer, bytes, options),
    recv: (into, options) => group.recv(peer, into, options),
    close: async () => {},
  };
}
