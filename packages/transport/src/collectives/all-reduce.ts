/**
 * All-reduce drivers: execute the schedules of schedule.ts over an Exchange.
 *
 * direct: every rank sends its whole buffer to every other rank (chunked so reduction of chunk k
 *         overlaps the transfer of chunk k+1), then reduces all contributions in rank order.
 * ring:   reduce-scatter then all-gather around the ring, chunked: chunk k of a step is forwarded
 *         as soon as it was received and reduced, so several steps are in flight at once.
 */
import type { ReduceOp, ReducibleBuffer } from '../group.js';
import { collectiveTag, type Exchange, type ExchangeOpOptions } from './exchange.js';
import { combine, reduceInRankOrder } from './reduce.js';
import { chooseAllReduce, chunks, ringSteps, segments, type Range } from './schedule.js';
import type { ScratchArena } from './scratch.js';
import type { SimdStage } from './simd-stage.js';
import { DirectViews } from './direct-views.js';

export interface AllReduceParams {
  /** Operation counter, identical on all ranks for the same call. */
  opSeq: number;
  /** Use the ring when one rank would send more than this with direct (more than two ranks). */
  thresholdBytes: number;
  /** Pipeline chunk size in bytes. */
  chunkBytes: number;
  /** Receive staging memory. */
  scratch: ScratchArena;
  /** f32 accumulator memory for the direct algorithm. */
  accumulator: ScratchArena;
  /** Receive staging inside the SIMD kernel's memory, for f32 sums on the ring (optional). */
  simd?: SimdStage;
  /** Views for the direct algorithm, kept between calls (optional). */
  views?: DirectViews;
  io: ExchangeOpOptions;
  /** Called with the first failure, so the owner can fail the links at once (see settleAll). */
  onError: (err: unknown) => void;
}

function view(buf: ReducibleBuffer): Uint8Array {
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

function sameKind(buf: ReducibleBuffer, ab: ArrayBuffer, elemOffset: number, length: number): ReducibleBuffer {
  return buf instanceof Float32Array ? new Float32Array(ab, elemOffset * 4, length) : new Uint16Array(ab, elemOffset * 2, length);
}

const RESOLVED = Promise.resolve();

/** Not async itself: the algorithm's promise is returned as is (one await fewer per operation). */
export function allReduce(ex: Exchange, buf: ReducibleBuffer, op: ReduceOp, p: AllReduceParams): Promise<void> {
  if (ex.size === 1 || buf.length === 0) return RESOLVED;
  return chooseAllReduce(buf.byteLength, ex.size, p.thresholdBytes) === 'direct' ? direct(ex, buf, op, p) : ring(ex, buf, op, p);
}

async function direct(ex: Exchange, buf: ReducibleBuffer, op: ReduceOp, p: AllReduceParams): Promise<void> {
  const { rank, size } = ex;
  const es = buf.BYTES_PER_ELEMENT;
  const count = buf.length;
  const tag = collectiveTag(p.opSeq, 0);
  const chunkElems = Math.max(1, Math.floor(p.chunkBytes / es));
  const stage = p.scratch.get(count * es * (size - 1));
  const v = (p.views ?? new DirectViews()).update(buf, rank, size, stage, p.accumulator.get(Math.min(count, chunkElems) * 4));
  const { bytes, sources, slots, acc } = v;

  if (count <= chunkElems) {
    // One chunk (the latency-bound case): no per-chunk promise chains.
    const ops: Promise<void>[] = [];
    for (let k = 1; k < size; k++) ops.push(ex.send((rank + k) % size, tag, bytes, p.io));
    for (let k = 1; k < size; k++) {
      const peer = (rank - k + size) % size;
      ops.push(ex.recv(peer, tag, slots[peer], p.io));
    }
    // settleAll, inline: one async frame fewer on the latency path.
    try {
      await Promise.all(ops);
    } catch (err) {
      p.onError(err);
      await Promise.allSettled(ops);
      throw err;
    }
    reduceInRankOrder(op, buf, sources, 0, count, acc);
    return;
  }
  const parts = chunks([0, count], chunkElems);

  const pending: Promise<void>[] = [];
  for (const [a, b] of parts) {
    const chunkSends: Promise<void>[] = [];
    const chunkRecvs: Promise<void>[] = [];
    for (let k = 1; k < size; k++) {
      // Staggered order (rank+k) spreads the first chunks over all links instead of all ranks
      // hammering rank 0 first.
      const peer = (rank + k) % size;
      chunkSends.push(ex.send(peer, tag, bytes.subarray(a * es, b * es), p.io));
    }
    for (let k = 1; k < size; k++) {
      const peer = (rank - k + size) % size;
      chunkRecvs.push(ex.recv(peer, tag, slots[peer].subarray(a * es, b * es), p.io));
    }
    // buf is overwritten only after our own sends of this chunk no longer need it.
    pending.push(Promise.all([...chunkSends, ...chunkRecvs]).then(() => reduceInRankOrder(op, buf, sources, a, b, acc)));
  }
  await settleAll(pending, p.onError);
}

async function ring(ex: Exchange, buf: ReducibleBuffer, op: ReduceOp, p: AllReduceParams): Promise<void> {
  const { rank, size } = ex;
  const es = buf.BYTES_PER_ELEMENT;
  const next = (rank + 1) % size;
  const prev = (rank - 1 + size) % size;
  const segs = segments(buf.length, size);
  const chunkElems = Math.max(1, Math.floor(p.chunkBytes / es));
  const segChunks = segs.map((s) => chunks(s, chunkElems));
  const maxSeg = Math.max(...segs.map(([a, b]) => b - a));
  // One staging region per reduce-scatter step: chunks of different steps can be in flight together.
  // f32 sums stage inside the SIMD kernel's memory, where they are added without a copy in.
  const simd = buf instanceof Float32Array && op === 'sum' && p.simd ? p.simd : null;
  const simdStage = simd?.stage(maxSeg * (size - 1)) ?? null;
  const stage = simdStage ?? sameKind(buf, p.scratch.get(maxSeg * es * (size - 1)), 0, maxSeg * (size - 1));
  const bytes = view(buf);
  const slice = ([a, b]: Range) => bytes.subarray(a * es, b * es);

  const all: Promise<void>[] = [];
  let received: Promise<void>[] | null = null;
  ringSteps(rank, size).forEach((step, s) => {
    const tag = collectiveTag(p.opSeq, s);
    const gate = received;
    const sends = segChunks[step.send].map((c, k) => {
      const send = () => ex.send(next, tag, slice(c), p.io);
      return gate ? gate[k].then(send) : send();
    });
    const recvs = segChunks[step.recv].map((c, k) => {
      if (step.reduce) {
        const base = s * maxSeg - segs[step.recv][0];
        const into = new Uint8Array(stage.buffer, stage.byteOffset + (base + c[0]) * es, (c[1] - c[0]) * es);
        if (simdStage) return ex.recv(prev, tag, into, p.io).then(() => simd!.addInto(buf as Float32Array, c[0], base + c[0], c[1] - c[0]));
        return ex.recv(prev, tag, into, p.io).then(() => combine(op, buf, buf, stage, c[0], c[1], base + c[0]));
      }
      // All-gather overwrites a chunk we sent during reduce-scatter. No need to wait for that send:
      // the incoming data is the chunk's full reduction, which exists only after our contribution
      // was received by our successor, so our buffer has been read by then (on any backend).
      return ex.recv(prev, tag, slice(c), p.io);
    });
    all.push(...sends, ...recvs);
    received = recvs;
  });
  await settleAll(all, p.onError);
}

/**
 * Like Promise.all, but waits for every operation to settle before rejecting, so no receive is
 * still writing into caller memory when the caller sees the error. `onError` runs at the first
 * failure; the group uses it to fail all links, which settles the rest promptly.
 */
export async function settleAll(ps: Promise<unknown>[], onError: (err: unknown) => void): Promise<void> {
  try {
    await Promise.all(ps);
  } catch (err) {
    onError(err);
    await Promise.allSettled(ps);
    throw err;
  }
}
