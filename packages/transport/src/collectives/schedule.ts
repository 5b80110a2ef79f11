/**
 * Collective schedules as pure functions: who sends which slice to whom in which step.
 * No I/O here; the drivers in all-reduce.ts / all-gather.ts execute these over an Exchange.
 */

/** Half-open element range [start, end). */
export type Range = readonly [start: number, end: number];

/**
 * Splits `count` elements into `parts` contiguous segments whose sizes differ by at most one.
 * Works for count < parts (some segments are empty).
 */
export function segments(count: number, parts: number): Range[] {
  const out: Range[] = [];
  for (let j = 0; j < parts; j++) {
    out.push([Math.floor((j * count) / parts), Math.floor(((j + 1) * count) / parts)]);
  }
  return out;
}

/** Splits a range into pipeline chunks of at most `chunkElems` elements (one empty chunk for an empty range). */
export function chunks(range: Range, chunkElems: number): Range[] {
  const [start, end] = range;
  if (end <= start) return [[start, start]];
  const out: Range[] = [];
  for (let a = start; a < end; a += chunkElems) out.push([a, Math.min(end, a + chunkElems)]);
  return out;
}

export interface RingStep {
  /** Segment this rank sends to its successor `(rank + 1) % size`. */
  send: number;
  /** Segment this rank receives from its predecessor `(rank - 1 + size) % size`. */
  recv: number;
  /** Reduce-scatter step (combine received data with local) or all-gather step (overwrite). */
  reduce: boolean;
}

/**
 * Ring all-reduce = reduce-scatter (size-1 steps) then all-gather (size-1 steps).
 * After the reduce-scatter, rank r owns the fully reduced segment (r + 1) % size; the segment
 * sent at each step is always the one received (and reduced) in the previous step, which is what
 * lets chunks pipeline through the ring.
 */
export function ringSteps(rank: number, size: number): RingStep[] {
  const mod = (x: number) => ((x % size) + size) % size;
  const steps: RingStep[] = [];
  for (let s = 0; s < size - 1; s++) steps.push({ send: mod(rank - s), recv: mod(rank - s - 1), reduce: true });
  for (let s = 0; s < size - 1; s++) steps.push({ send: mod(rank + 1 - s), recv: mod(rank - s), reduce: false });
  return steps;
}

export type AllReduceAlgorithm = 'direct' | 'ring';

/**
 * Direct (everyone sends everything to everyone, reduced in rank order) costs one latency and
 * (size-1)x the bytes per link; the ring costs 2(size-1) latencies and 2(size-1)/size x the bytes.
 * Two ranks move the same bytes either way, so they always use direct. The switch compares what
 * one rank would send with direct, `bytes * (size - 1)`, with `maxDirectSendBytes`.
 */
export function chooseAllReduce(bytes: number, size: number, maxDirectSendBytes: number): AllReduceAlgorithm {
  return size <= 2 || bytes * (size - 1) <= maxDirectSendBytes ? 'direct' : 'ring';
}
