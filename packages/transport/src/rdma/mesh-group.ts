/**
 * `Group` over one ordered link per peer (RDMA, or TCP where a link fell back) — the mesh shape of
 * Thunderbolt cabling, like MLX's JACCL mesh:
 * - all-reduce ≤ `smallAllReduceBytes` or 2 ranks: everyone sends the whole buffer to everyone and reduces
 *   in rank order 0..n-1, so every rank gets bit-identical results;
 * - larger: reduce-scatter (rank r owns segment r, reduces it from all ranks in rank order) then all-gather;
 * - every step posts all its receives before any of its sends (a SEND waits for the peer's RECV);
 * - collectives run one at a time in call order, so the per-link message order matches on every rank.
 * With `topology: 'ring'` (cables only between neighbours, like JACCL's ring) only the links to rank±1 are
 * needed: all-reduce is a ring reduce-scatter + all-gather, all-gather and barrier go around the ring, one
 * step at a time so each link carries its messages in the same order on both ends. Partial sums travel in
 * the buffer's own type, so f16 rounds at each hop (results are still bit-identical on every rank).
 *
 * Sub-groups (`subgroup`) use the same links. An RDMA link carries no tags: a message matches the next
 * receive posted on that link, so the group's and its sub-groups' messages on a shared link are kept
 * apart only by order. Their collectives therefore run in one queue (call order, as on every rank), and
 * point-to-point messages of the group and of a sub-group between the same two ranks must be issued in
 * the same order on both ends (the runner's data plane does). A sub-group collective that fails leaves
 * the shared links out of step, so it breaks the whole group; closing a sub-group cancels nothing in
 * flight (cancelling a posted RDMA receive would break the shared link).
 */
import { combine, reduceInRankOrder } from '../collectives/reduce.js';
import { ringSteps, segments } from '../collectives/schedule.js';
import { ScratchArena } from '../collectives/scratch.js';
import { UsageError } from '../errors.js';
import { rootMembers } from '../exchange-group.js';
import type { Group, OpOptions, ReduceOp, ReducibleBuffer } from '../group.js';
import { RdmaClosedError } from './errors.js';
import type { PeerLink } from './link.js';

export type Topology = 'mesh' | 'ring';

export interface MeshGroupOptions {
  rank: number;
  size: number;
  /** One link per rank (undefined at this rank; in a ring, only rank±1 are required). */
  links: (PeerLink | undefined)[];
  /** @default 'mesh' */
  topology?: Topology;
  /** Direct all-reduce at or below this many bytes. */
  smallAllReduceBytes?: number;
  timeoutMs?: number;
  /** Extra clean-up (queue pairs, devices) after the links closed. */
  onClose?: () => Promise<void>;
}

/** JACCL's switch point; the TCP transport measures its own. */
export const DEFAULT_SMALL_ALL_REDUCE_BYTES = 32 * 1024;

/** The ranks a ring member talks to (one rank for a 2-ring, none alone). */
export function ringNeighbours(rank: number, size: number): number[] {
  if (size < 2) return [];
  return [...new Set([(rank - 1 + size) % size, (rank + 1) % size])].filter((p) => p !== rank);
}

function bytesOf(v: ArrayBufferView): Uint8Array {
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}

export class MeshGroup implements Group {
  readonly rank: number;
  readonly size: number;
  private readonly links: (PeerLink | undefined)[];
  private readonly small: number;
  private readonly timeoutMs: number;
  /** The collectives queue, shared with every sub-group (their messages share untagged links). */
  private order: { chain: Promise<unknown> } = { chain: Promise.resolve() };
  private closed = false;
  private broken: RdmaClosedError | null = null;
  /** Grow-only receive staging and f32 accumulator: no allocation per collective once warm. */
  private readonly stage = new ScratchArena();
  private readonly accumulator = new ScratchArena();
  private readonly onClose?: () => Promise<void>;
  /** Sub-groups: the group they are made of (null for that group) and root ranks; the root's sub-groups by member list. */
  private root: MeshGroup | null = null;
  private ranks: readonly number[] | null = null;
  private readonly subgroups = new Map<string, MeshGroup>();

  readonly topology: Topology;

  constructor(o: MeshGroupOptions) {
    if (o.links.length !== o.size) throw new RangeError(`need ${o.size} link slots, got ${o.links.length}`);
    this.topology = o.topology ?? 'mesh';
    const required = this.topology === 'ring' ? ringNeighbours(o.rank, o.size) : [...Array(o.size).keys()].filter((p) => p !== o.rank);
    for (const p of required) if (!o.links[p]) throw new RangeError(`no link to rank ${p}`);
    this.rank = o.rank;
    this.size = o.size;
    this.links = o.links;
    this.small = o.smallAllReduceBytes ?? DEFAULT_SMALL_ALL_REDUCE_BYTES;
    this.timeoutMs = o.timeoutMs ?? 5000;
    this.onClose = o.onClose;
  }

  /** Which transport each link uses (the daemon shows it in `orchard status`). */
  transports(): (PeerLink['transport'] | 'self')[] {
    return this.links.map((l) => (l ? l.transport : 'self'));
  }

  private link(peer: number, what = 'send/recv'): PeerLink {
    if (this.closed) throw new RdmaClosedError('group is closed');
    if (!Number.isInteger(peer) || peer < 0 || peer >= this.size || peer === this.rank) {
      throw new UsageError(`${what}: peer must be a rank in 0..${this.size - 1} other than this rank (${this.rank}), got ${peer}`);
    }
    const link = this.links[peer];
    if (!link) throw new UsageError(`${what}: no link to rank ${peer} (ring topology: only ranks ${ringNeighbours(this.rank, this.size).join(' and ')})`);
    return link;
  }

  private opts(o?: OpOptions): OpOptions {
    return { timeoutMs: o?.timeoutMs ?? this.timeoutMs, signal: o?.signal };
  }

  async send(peer: number, buf: ArrayBufferView, options?: OpOptions): Promise<void> {
    return this.link(peer, 'send').send(bytesOf(buf), this.opts(options));
  }

  async recv(peer: number, buf: ArrayBufferView, options?: OpOptions): Promise<void> {
    return this.link(peer, 'recv').recv(bytesOf(buf), this.opts(options));
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new RdmaClosedError('group is closed'));
    const guarded = async () => {
      if (this.broken) throw this.broken;
      try {
        return await fn();
      } catch (err) {
        this.breakGroup(err);
        throw err;
      }
    };
    const run = this.order.chain.then(guarded, guarded);
    this.order.chain = run.catch(() => {});
    return run;
  }

  /**
   * A collective that failed part-way leaves the ranks out of step, so the group is done: every link is
   * closed and later calls reject naming the first failure. Peers notice through their own watchdogs.
   */
  private breakGroup(err: unknown): void {
    if (this.broken || err instanceof UsageError) return;
    // The links are shared and untagged: a sub-group out of step puts the whole group out of step.
    if (this.root) return this.root.breakGroup(err);
    const reason = err instanceof Error ? err.message : String(err);
    this.broken = new RdmaClosedError(`group unusable after an earlier failure: ${reason}`, { cause: err });
    for (const sub of this.subgroups.values()) sub.broken ??= this.broken;
    this.subgroups.clear();
    for (const l of this.links) void l?.close();
  }

  /**
   * The group of `members` over the same links (see the file comment for what sharing untagged links
   * means); the same list always gives the same object (closed once closed).
   */
  subgroup(members: readonly number[]): Group {
    const root = this.root ?? this;
    const ranks = rootMembers(members, this.rank, this.size, this.ranks ?? undefined);
    const key = ranks.join(',');
    const known = root.subgroups.get(key);
    if (known) return known;
    if (this.closed || root.closed) throw new RdmaClosedError('group is closed');
    if (this.broken ?? root.broken) throw this.broken ?? root.broken;
    let sub: MeshGroup;
    try {
      sub = new MeshGroup({
        rank: ranks.indexOf(root.rank),
        size: ranks.length,
        links: ranks.map((r) => (r === root.rank ? undefined : root.links[r])),
        topology: root.topology,
        smallAllReduceBytes: root.small,
        timeoutMs: root.timeoutMs,
      });
    } catch (err) {
      throw new UsageError(`subgroup: members [${ranks.join(', ')}] are not linked to each other in this ${root.topology}: ${(err as Error).message}`);
    }
    sub.root = root;
    sub.ranks = ranks;
    sub.order = root.order;
    root.subgroups.set(key, sub);
    return sub;
  }

  /** One exchange step: all receives first, then all sends, then wait for everything. */
  private async step(recvs: Array<[number, Uint8Array]>, sends: Array<[number, Uint8Array]>, o: OpOptions): Promise<void> {
    const pending: Promise<void>[] = [];
    for (const [p, b] of recvs) pending.push(this.link(p).recv(b, o));
    for (const [p, b] of sends) pending.push(this.link(p).send(b, o));
    const results = await Promise.allSettled(pending);
    const failed = results.find((r) => r.status === 'rejected') as PromiseRejectedResult | undefined;
    if (failed) throw failed.reason;
  }

  allReduce(buf: ReducibleBuffer, op: ReduceOp = 'sum', options?: OpOptions): Promise<void> {
    if (!(buf instanceof Float32Array) && !(buf instanceof Uint16Array)) {
      return Promise.reject(new UsageError('allReduce: buffer must be a Float32Array or a Uint16Array (f16 bits)'));
    }
    if (op !== 'sum' && op !== 'max' && op !== 'min') return Promise.reject(new UsageError(`allReduce: op must be sum, max or min, got ${String(op)}`));
    return this.serial(async () => {
      if (this.size === 1 || buf.length === 0) return;
      const o = this.opts(options);
      const elem = buf.BYTES_PER_ELEMENT;
      // Staging views for `count` elements from each of the size-1 peers, same element type as buf.
      const staging = (count: number) => {
        const ab = this.stage.get(count * elem * (this.size - 1));
        let slot = 0;
        return () => (buf instanceof Float32Array ? new Float32Array(ab, count * elem * slot++, count) : new Uint16Array(ab, count * elem * slot++, count));
      };
      const acc = (count: number) => new Float32Array(this.accumulator.get(count * 4), 0, count);
      if (this.topology === 'ring' && this.size > 2) return this.ringAllReduce(buf, op, o);
      if (this.size === 2 || buf.byteLength <= this.small) {
        const next = staging(buf.length);
        const contributions: ReducibleBuffer[] = [];
        const recvs: Array<[number, Uint8Array]> = [];
        const sends: Array<[number, Uint8Array]> = [];
        for (let p = 0; p < this.size; p++) {
          if (p === this.rank) {
            contributions.push(buf);
            continue;
          }
          const scratch = next();
          contributions.push(scratch);
          recvs.push([p, bytesOf(scratch)]);
          sends.push([p, bytesOf(buf)]);
        }
        await this.step(recvs, sends, o);
        reduceInRankOrder(op, buf, contributions, 0, buf.length, acc(buf.length));
        return;
      }
      // Reduce-scatter: segment s (elements [bounds[s], bounds[s+1])) is reduced by rank s.
      const n = buf.length;
      const bounds = [...Array(this.size + 1).keys()].map((s) => Math.floor((s * n) / this.size));
      const seg = (s: number) => (buf instanceof Float32Array ? buf.subarray(bounds[s], bounds[s + 1]) : buf.subarray(bounds[s], bounds[s + 1]));
      const mine = seg(this.rank);
      const next = staging(mine.length);
      const contributions: ReducibleBuffer[] = [];
      const recvs: Array<[number, Uint8Array]> = [];
      const sends: Array<[number, Uint8Array]> = [];
      for (let p = 0; p < this.size; p++) {
        if (p === this.rank) {
          contributions.push(mine);
          continue;
        }
        const scratch = next();
        contributions.push(scratch);
        recvs.push([p, bytesOf(scratch)]);
        sends.push([p, bytesOf(seg(p))]);
      }
      await this.step(recvs, sends, o);
      reduceInRankOrder(op, mine, contributions, 0, mine.length, acc(mine.length));
      // All-gather of the reduced segments straight into place.
      const agRecvs: Array<[number, Uint8Array]> = [];
      const agSends: Array<[number, Uint8Array]> = [];
      for (let p = 0; p < this.size; p++) {
        if (p === this.rank) continue;
        agRecvs.push([p, new Uint8Array(buf.buffer, buf.byteOffset + bounds[p]! * elem, (bounds[p + 1]! - bounds[p]!) * elem)]);
        agSends.push([p, bytesOf(mine)]);
      }
      await this.step(agRecvs, agSends, o);
    });
  }

  /** Ring reduce-scatter then all-gather (collectives/schedule.ts), one step at a time. */
  private async ringAllReduce(buf: ReducibleBuffer, op: ReduceOp, o: OpOptions): Promise<void> {
    const n = this.size;
    const next = (this.rank + 1) % n;
    const prev = (this.rank - 1 + n) % n;
    const elem = buf.BYTES_PER_ELEMENT;
    const segs = segments(buf.length, n);
    const maxSeg = Math.max(...segs.map(([a, b]) => b - a));
    const ab = this.stage.get(maxSeg * elem);
    const stage = buf instanceof Float32Array ? new Float32Array(ab, 0, maxSeg) : new Uint16Array(ab, 0, maxSeg);
    const part = (a: number, b: number) => new Uint8Array(buf.buffer, buf.byteOffset + a * elem, (b - a) * elem);
    for (const step of ringSteps(this.rank, n)) {
      const [ra, rb] = segs[step.recv]!;
      const [sa, sb] = segs[step.send]!;
      const into = step.reduce ? new Uint8Array(ab, 0, (rb - ra) * elem) : part(ra, rb);
      await this.step([[prev, into]], [[next, part(sa, sb)]], o);
      // buf[i] = buf[i] op stage[i - ra]
      if (step.reduce) combine(op, buf, buf, stage, ra, rb, 0);
    }
  }

  allGather(input: ArrayBufferView, output: ArrayBufferView, options?: OpOptions): Promise<void> {
    if (output.byteLength !== input.byteLength * this.size) {
      return Promise.reject(
        new UsageError(`allGather: output is ${output.byteLength} bytes, expected ${input.byteLength} x ${this.size} = ${input.byteLength * this.size}`),
      );
    }
    return this.serial(async () => {
      const out = bytesOf(output);
      const len = input.byteLength;
      out.set(bytesOf(input), this.rank * len);
      if (this.topology === 'ring' && this.size > 2) {
        // Block (rank - s) moves one hop per step; after size-1 steps every rank holds every block.
        const n = this.size;
        const block = (k: number) => out.subarray(k * len, (k + 1) * len);
        for (let s = 0; s < n - 1; s++) {
          const sendBlock = (this.rank - s + n) % n;
          const recvBlock = (this.rank - s - 1 + n) % n;
          await this.step([[(this.rank - 1 + n) % n, block(recvBlock)]], [[(this.rank + 1) % n, block(sendBlock)]], this.opts(options));
        }
        return;
      }
      const recvs: Array<[number, Uint8Array]> = [];
      const sends: Array<[number, Uint8Array]> = [];
      for (let p = 0; p < this.size; p++) {
        if (p === this.rank) continue;
        recvs.push([p, out.subarray(p * len, (p + 1) * len)]);
        sends.push([p, bytesOf(input)]);
      }
      await this.step(recvs, sends, this.opts(options));
    });
  }

  barrier(options?: OpOptions): Promise<void> {
    if (this.topology === 'ring' && this.size > 2) {
      // An all-gather of one byte per rank: nobody finishes before every rank's byte went round.
      return this.allGather(new Uint8Array(1), new Uint8Array(this.size), options);
    }
    return this.serial(async () => {
      if (this.size === 1) return;
      const token = new Uint8Array([1]);
      const recvs: Array<[number, Uint8Array]> = [];
      const sends: Array<[number, Uint8Array]> = [];
      for (let p = 0; p < this.size; p++) {
        if (p === this.rank) continue;
        recvs.push([p, new Uint8Array(1)]);
        sends.push([p, token]);
      }
      await this.step(recvs, sends, this.opts(options));
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.root) {
      // A sub-group: leave the shared links to the group it was made of (it stays registered, closed).
      this.stage.release();
      this.accumulator.release();
      return;
    }
    for (const sub of this.subgroups.values()) sub.closed = true;
    this.subgroups.clear();
    await Promise.allSettled(this.links.map((l) => l?.close()));
    await this.onClose?.();
    this.stage.release();
    this.accumulator.release();
  }
}
