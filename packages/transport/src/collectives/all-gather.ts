/**
 * All-gather and barrier drivers. All-gather is direct: each rank sends its input to every other
 * rank, which receives it straight into its slot of the output (on a full mesh every link carries
 * the same bytes as a ring would, with one step of latency instead of size-1).
 */
import { settleAll } from './all-reduce.js';
import { collectiveTag, type Exchange, type ExchangeOpOptions } from './exchange.js';
import { chunks } from './schedule.js';

function bytesOf(v: ArrayBufferView): Uint8Array {
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}

export interface GatherParams {
  opSeq: number;
  chunkBytes: number;
  io: ExchangeOpOptions;
  onError: (err: unknown) => void;
}

export async function allGather(ex: Exchange, input: ArrayBufferView, output: ArrayBufferView, p: GatherParams): Promise<void> {
  const { rank, size } = ex;
  const n = input.byteLength;
  const src = bytesOf(input);
  const dst = bytesOf(output);
  const own = dst.subarray(rank * n, (rank + 1) * n);
  // Copy our own slot unless the caller passed an input that already is that slot.
  if (!(own.buffer === src.buffer && own.byteOffset === src.byteOffset)) own.set(src);
  if (size === 1) return;
  const tag = collectiveTag(p.opSeq, 0);
  const ops: Promise<void>[] = [];
  for (const [a, b] of chunks([0, n], Math.max(1, p.chunkBytes))) {
    for (let k = 1; k < size; k++) ops.push(ex.send((rank + k) % size, tag, src.subarray(a, b), p.io));
    for (let k = 1; k < size; k++) {
      const peer = (rank - k + size) % size;
      ops.push(ex.recv(peer, tag, dst.subarray(peer * n + a, peer * n + b), p.io));
    }
  }
  await settleAll(ops, p.onError);
}

const EMPTY = new Uint8Array(0);

/** Everyone tells everyone it arrived; one step of latency. */
export async function barrier(ex: Exchange, p: Omit<GatherParams, 'chunkBytes'>): Promise<void> {
  const { rank, size } = ex;
  if (size === 1) return;
  const tag = collectiveTag(p.opSeq, 0);
  const ops: Promise<void>[] = [];
  for (let k = 1; k < size; k++) ops.push(ex.send((rank + k) % size, tag, EMPTY, p.io));
  for (let k = 1; k < size; k++) ops.push(ex.recv((rank - k + size) % size, tag, new Uint8Array(0), p.io));
  await settleAll(ops, p.onError);
}
