/**
 * How a file is cut into chunks. The cut depends on the file's size only, so "chunk i of file K"
 * names the same bytes on every node of the pod: availability, digests and hub claims are all
 * exchanged as chunk indices.
 */

/** Smallest chunk: below this a request's round trip costs more than its bytes. */
export const MIN_CHUNK = 64 * 1024;
/** Largest chunk: a lost or corrupt chunk costs at most this much to fetch again. */
export const MAX_CHUNK = 4 * 1024 * 1024;
/** Small files still get this many chunks, so several links can share them. */
const TARGET_CHUNKS = 64;

/** The chunk size for a file of `size` bytes: a power of two in [MIN_CHUNK, MAX_CHUNK]. */
export function chunkSizeFor(size: number): number {
  let c = MIN_CHUNK;
  while (c < MAX_CHUNK && c * TARGET_CHUNKS < size) c *= 2;
  return c;
}

export function chunkCount(size: number, chunkSize: number): number {
  return Math.max(1, Math.ceil(size / chunkSize));
}

/** Byte range [start, end) of chunk `i`. */
export function chunkSpan(i: number, size: number, chunkSize: number): [number, number] {
  return [i * chunkSize, Math.min(size, (i + 1) * chunkSize)];
}

/** Indices of the chunks that hold any byte of `ranges` ([start, end) pairs), ascending. */
export function chunksCovering(ranges: Iterable<readonly [number, number]>, size: number, chunkSize: number): number[] {
  const out = new Set<number>();
  for (const [start, end] of ranges) {
    if (end <= start) continue;
    const last = Math.min(Math.ceil(Math.min(end, size) / chunkSize), chunkCount(size, chunkSize));
    for (let i = Math.floor(start / chunkSize); i < last; i++) out.add(i);
  }
  return [...out].sort((a, b) => a - b);
}

/** Chunk index sets travel as runs: [[first, end), ...], ascending and merged. */
export type Runs = Array<[number, number]>;

export function toRuns(indices: Iterable<number>): Runs {
  const sorted = [...new Set(indices)].sort((a, b) => a - b);
  const runs: Runs = [];
  for (const i of sorted) {
    const last = runs[runs.length - 1];
    if (last && last[1] === i) last[1] = i + 1;
    else runs.push([i, i + 1]);
  }
  return runs;
}

/** The indices of `runs`; refuses runs outside [0, limit) so a peer cannot make us allocate without bound. */
export function fromRuns(runs: Runs, limit: number): number[] {
  const out: number[] = [];
  for (const [a, b] of runs) {
    if (!Number.isSafeInteger(a) || !Number.isSafeInteger(b) || a < 0 || b > limit || a >= b) {
      throw new RangeError(`chunk run [${a}, ${b}) is outside 0..${limit}`);
    }
    for (let i = a; i < b; i++) out.push(i);
  }
  return out;
}
