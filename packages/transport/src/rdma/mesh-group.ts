/**
 * `Group` over one ordered link per peer (RDMA, or TCP where a link fell back) — the mesh shape of
 * Thunderbolt cabling, like MLX's JACCL mesh:
 * - all-reduce ≤ `smallAllReduceBytes` or 2 ranks: everyone sends the whole buffer to everyone and reduces
 *   in rank order 0..n-1, so every rank gets bit-identical results;
 * - larger: reduce-scatter (rank r owns segment r, reduces it from all ranks in rank order) then all-gather;
 * - every step posts all its receives before any of its sends (a SEND waits for the peer's RECV);
 * - collectives run one at a time in call order, so the per-link message order matches on every rank.
 */
import { reduceInRankOrder } from '../collectives/reduce.js';
import { ScratchArena } from '../collectives/scratch.js';
import { UsageError } from '../errors.js';
import type { Group, OpOptions, ReduceOp, ReducibleBuffer } from '../group.js';
import { RdmaClosedError } from './errors.js';
import type { PeerLink } from './link.js';

export interface MeshGroupOptions {
  rank: number;
  size: number;
  links: (PeerLink | undefined)[];
  /** Direct all-reduce at or below this many bytes. */
  smallAllReduceBytes?: number;
  timeoutMs?: number;
  /** Extra clean-up (queue pairs, devices) after the links closed. */
  onClose?: () => Promise<void>;
}

/** JACCL's switch point; the TCP transport measures its own. */
export const DEFAULT_SMALL_ALL_REDUCE_BYTES = 32 * 1024;

function bytesOf(v: ArrayBufferView): Uint8Array {
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}

export class MeshGroup implements Group {
  readonly rank: number;
  readonly size: number;
  private readonly links: (PeerLink | undefined)[];
  private readonly small: number;
  private readonly timeoutMs: number;
  private chain: Promise<unknown> = Promise.resolve();
  private closed = false;
  private broken: RdmaClosedError | null = null;
  /** Grow-only receive staging and f32 accumulator: no allocation per collective once warm. */
  private readonly stage = new ScratchArena();
  private readonly accumulator = new ScratchArena();
  private readonly onClose?: () => Promise<void>;

  constructor(o: MeshGroupOptions) {
    if (o.links.length !== o.size) throw new RangeError(`need ${o.size} link slots, got ${o.links.length}`);
    for (let p = 0; p < o.size; p++) {
      if (p !== o.rank && !o.links[p]) throw new RangeError(`no link to rank ${p}`);
    }
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
    return this.links[peer]!;
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
    const run = this.chain.then(guarded, guarded);
    this.chain = run.catch(() => {});
    return run;
  }

  /**
   * A collective that failed part-way leaves the ranks out of step, so the group is done: every link is
   * closed and later calls reject naming the first failure. Peers notice through their own watchdogs.
   */
  private breakGroup(err: unknown): void {
    if (this.broken || err instanceof UsageError) return;
    const reason = err instanceof Error ? err.message : String(err);
    this.broken = new RdmaClosedError(`group unusable after an earlier failure: ${reason}`, { cause: err });
    for (const l of this.links) void l?.close();
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
    await Promise.allSettled(this.links.map((l) => l?.close()));
    await this.onClose?.();
    this.stage.release();
    this.accumulator.release();
  }
}
