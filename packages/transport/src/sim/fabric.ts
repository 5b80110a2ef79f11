/**
 * A simulated in-process fabric: `size` ranks in one process, each with a real `Group` running the
 * same collective schedules as the TCP backend, over links with injectable latency, bandwidth and
 * failures. For engine and daemon tests that need a group without sockets.
 *
 * Link model: each directed link serialises its messages at `bandwidthGbps`, then delivers them
 * `latencyUs` later; a send resolves when its last byte left the sender. Timers have ~1 ms
 * resolution, so latencies below that are rounded up when non-zero.
 */
import { PeerClosedError, PeerTimeoutError, TransportError, UsageError } from '../errors.js';
import type { Group } from '../group.js';
import type { Exchange, ExchangeOpOptions } from '../collectives/exchange.js';
import { groupOverExchange, type CollectiveOptions } from '../exchange-group.js';

export interface SimFailure {
  rank: number;
  /** crash: the rank's links drop (peers see a closed connection). stall: it goes silent (peers time out). */
  mode: 'crash' | 'stall';
  /** Fail after the rank has sent this many messages. @default 0 (immediately at first send) */
  afterMessages?: number;
}

export interface SimFabricOptions extends CollectiveOptions {
  /** One-way latency per message, microseconds. @default 0 */
  latencyUs?: number;
  /** Per-direction link bandwidth, Gbit/s. @default Infinity */
  bandwidthGbps?: number;
  /** Failures to inject. */
  failures?: SimFailure[];
}

export interface SimFabric {
  /** One group per rank, index = rank. */
  readonly groups: Group[];
  /** Crash a rank now: its links drop. */
  kill(rank: number): void;
  /** Stall a rank now: nothing it sends arrives, nothing sent to it is taken. */
  stall(rank: number): void;
  /** Messages and payload bytes sent so far (all ranks). */
  readonly stats: { messages: number; bytes: number };
}

interface Posted {
  into: Uint8Array;
  resolve: () => void;
  reject: (e: unknown) => void;
  timer: NodeJS.Timeout;
  postedAt: number;
  timeoutMs: number;
  onAbort?: () => void;
  signal?: AbortSignal;
}

type RankState = 'up' | 'crashed' | 'stalled' | 'closed';

/** Creates `size` connected groups; `createSimGroup(n, o)` is `createSimFabric(n, o).groups`. */
export function createSimFabric(size: number, options: SimFabricOptions = {}): SimFabric {
  if (!Number.isInteger(size) || size < 1) throw new UsageError(`createSimFabric: size must be a positive integer, got ${size}`);
  const latencyMs = (options.latencyUs ?? 0) / 1000;
  const gbps = options.bandwidthGbps ?? Infinity;
  if (!(latencyMs >= 0)) throw new UsageError(`latencyUs must be >= 0, got ${options.latencyUs}`);
  if (!(gbps > 0)) throw new UsageError(`bandwidthGbps must be > 0, got ${options.bandwidthGbps}`);
  const stats = { messages: 0, bytes: 0 };
  const state: RankState[] = Array.from({ length: size }, () => 'up');
  const sentCount = new Array<number>(size).fill(0);
  const failures = options.failures ?? [];
  // busyUntil[src][dst]: when the directed link finishes serialising what it was given.
  const busyUntil = Array.from({ length: size }, () => new Array<number>(size).fill(0));
  // lastArrival[dst][src]: for progress-based timeouts.
  const lastArrival = Array.from({ length: size }, () => new Array<number>(size).fill(0));
  // Queues keyed by `${dst}/${src}/${tag}`.
  const arrived = new Map<string, Uint8Array[]>();
  const posted = new Map<string, Posted[]>();
  const exchanges: SimExchange[] = [];
  const ref = (rank: number) => ({ rank, address: `sim:${rank}` });
  const key = (dst: number, src: number, tag: number) => `${dst}/${src}/${tag}`;

  const failPosted = (match: (dst: number, src: number) => boolean, err: (dst: number, src: number) => Error) => {
    for (const [k, q] of posted) {
      const [dst, src] = k.split('/').map(Number);
      if (!match(dst, src)) continue;
      posted.delete(k);
      for (const p of q) settle(p, err(dst, src));
    }
  };

  const settle = (p: Posted, err?: unknown) => {
    clearTimeout(p.timer);
    if (p.onAbort) p.signal?.removeEventListener('abort', p.onAbort);
    if (err) p.reject(err);
    else p.resolve();
  };

  const crash = (rank: number, why: string) => {
    if (state[rank] === 'crashed' || state[rank] === 'closed') return;
    state[rank] = why === 'closed' ? 'closed' : 'crashed';
    failPosted(
      (dst, src) => dst === rank || src === rank,
      (dst, src) => (dst === rank ? new PeerClosedError(ref(src), `this rank ${why}`) : new PeerClosedError(ref(rank), `peer ${why}`)),
    );
    for (const k of [...arrived.keys()]) if (k.startsWith(`${rank}/`)) arrived.delete(k);
  };

  const deliver = (src: number, dst: number, tag: number, data: Uint8Array) => {
    if (state[src] !== 'up' || state[dst] !== 'up') return;
    lastArrival[dst][src] = performance.now();
    const k = key(dst, src, tag);
    const q = posted.get(k);
    const p = q?.shift();
    if (q && q.length === 0) posted.delete(k);
    if (!p) {
      let a = arrived.get(k);
      if (!a) arrived.set(k, (a = []));
      a.push(data);
      return;
    }
    if (p.into.length !== data.length) {
      const err = new TransportError(`rank ${src} sent ${data.length} bytes with tag ${tag} but rank ${dst} expected ${p.into.length}`);
      settle(p, err);
      return;
    }
    p.into.set(data);
    settle(p);
  };

  class SimExchange implements Exchange {
    constructor(
      readonly rank: number,
      readonly size: number,
    ) {}

    send(peer: number, tag: number, bytes: Uint8Array, o: ExchangeOpOptions): Promise<void> {
      const me = this.rank;
      if (state[me] === 'closed') return Promise.reject(new PeerClosedError(ref(peer), 'group closed'));
      if (state[me] === 'crashed') return Promise.reject(new PeerClosedError(ref(peer), 'this rank crashed'));
      if (state[peer] === 'crashed' || state[peer] === 'closed') return Promise.reject(new PeerClosedError(ref(peer), `peer ${state[peer]}`));
      if (o.signal?.aborted) return Promise.reject(o.signal.reason);
      sentCount[me]++;
      for (const f of failures) {
        if (f.rank === me && sentCount[me] > (f.afterMessages ?? 0) && state[me] === 'up') {
          if (f.mode === 'crash') crash(me, 'crashed');
          else state[me] = 'stalled';
        }
      }
      if ((state[me] as RankState) === 'crashed') return Promise.reject(new PeerClosedError(ref(peer), 'this rank crashed'));
      if (state[me] === 'stalled') return new Promise<void>(() => {}); // a stalled rank never finishes
      stats.messages++;
      stats.bytes += bytes.length;
      const copy = bytes.slice();
      const now = performance.now();
      const start = Math.max(now, busyUntil[me][peer]);
      const txMs = Number.isFinite(gbps) ? (bytes.length * 8) / (gbps * 1e6) : 0;
      busyUntil[me][peer] = start + txMs;
      const arriveIn = start + txMs + latencyMs - now;
      if (arriveIn <= 0) setImmediate(() => deliver(me, peer, tag, copy));
      else setTimeout(() => deliver(me, peer, tag, copy), arriveIn);
      const doneIn = start + txMs - now;
      return new Promise((resolve) => (doneIn <= 0 ? resolve() : setTimeout(resolve, doneIn)));
    }

    recv(peer: number, tag: number, into: Uint8Array, o: ExchangeOpOptions): Promise<void> {
      const me = this.rank;
      if (state[me] === 'closed') return Promise.reject(new PeerClosedError(ref(peer), 'group closed'));
      if (state[me] === 'crashed') return Promise.reject(new PeerClosedError(ref(peer), 'this rank crashed'));
      if (o.signal?.aborted) return Promise.reject(o.signal.reason);
      const k = key(me, peer, tag);
      const ready = arrived.get(k);
      if (ready?.length) {
        const data = ready.shift()!;
        if (ready.length === 0) arrived.delete(k);
        if (data.length !== into.length) {
          return Promise.reject(new TransportError(`rank ${peer} sent ${data.length} bytes with tag ${tag} but rank ${me} expected ${into.length}`));
        }
        into.set(data);
        return Promise.resolve();
      }
      if (state[peer] === 'crashed' || state[peer] === 'closed') return Promise.reject(new PeerClosedError(ref(peer), `peer ${state[peer]}`));
      return new Promise<void>((resolve, reject) => {
        const p: Posted = { into, resolve, reject, timer: undefined as unknown as NodeJS.Timeout, postedAt: performance.now(), timeoutMs: o.timeoutMs, signal: o.signal };
        const arm = (ms: number) => {
          p.timer = setTimeout(() => {
            // Progress-based, like TCP: time out only if nothing arrived from the peer lately.
            const idle = performance.now() - Math.max(p.postedAt, lastArrival[me][peer]);
            if (idle + 1 < p.timeoutMs) return arm(p.timeoutMs - idle);
            const q = posted.get(k);
            const i = q?.indexOf(p) ?? -1;
            if (q && i >= 0) q.splice(i, 1);
            settle(p, new PeerTimeoutError(ref(peer), p.timeoutMs));
          }, ms);
        };
        if (Number.isFinite(o.timeoutMs)) arm(o.timeoutMs); // Infinity: wait until delivery or failure
        if (o.signal) {
          p.onAbort = () => {
            const q = posted.get(k);
            const i = q?.indexOf(p) ?? -1;
            if (q && i >= 0) q.splice(i, 1);
            settle(p, o.signal!.reason);
          };
          o.signal.addEventListener('abort', p.onAbort, { once: true });
        }
        let q = posted.get(k);
        if (!q) posted.set(k, (q = []));
        q.push(p);
      });
    }

    async close(): Promise<void> {
      crash(this.rank, 'closed');
    }
  }

  for (let r = 0; r < size; r++) exchanges.push(new SimExchange(r, size));
  const groups = exchanges.map((ex) => groupOverExchange(ex, options));
  return {
    groups,
    stats,
    kill(rank) {
      crash(rank, 'crashed');
    },
    stall(rank) {
      if (state[rank] === 'up') state[rank] = 'stalled';
    },
  };
}

/** `size` groups over one simulated fabric, index = rank. */
export function createSimGroup(size: number, options: SimFabricOptions = {}): Group[] {
  return createSimFabric(size, options).groups;
}
