/**
 * How a message of N bytes is cut into SEND/RECV work requests. Both ends call `planChunks` with the same
 * N (a `recv` names its length, and collectives know their sizes), so every SEND and its RECV cover the same
 * number of 4 KiB frames — Apple fails the transfer otherwise. Buffers come in fixed classes so the slab is
 * carved once into equal slots; a message uses the smallest class that holds it, and messages above the
 * largest class stream through it chunk by chunk.
 */
import { FRAME_BYTES, framesOf } from './verbs.js';

/** 4 KiB .. 512 KiB, like MLX's JACCL (26.2 supports 4 KiB only: pass `[4096]`). */
export const DEFAULT_SIZE_CLASSES: readonly number[] = [4096, 16_384, 65_536, 131_072, 524_288];

export interface ChunkPlan {
  /** Bytes per chunk (the chosen size class). */
  chunkBytes: number;
  /** Number of chunks (0 for an empty message: nothing goes on the wire). */
  count: number;
  /** Bytes in the last chunk. */
  lastBytes: number;
}

export function validateSizeClasses(classes: readonly number[]): void {
  if (classes.length === 0) throw new Error('size classes: need at least one');
  let prev = 0;
  for (const c of classes) {
    if (!Number.isInteger(c) || c <= 0 || c % FRAME_BYTES !== 0) {
      throw new Error(`size class ${c} is not a positive multiple of ${FRAME_BYTES} bytes`);
    }
    if (c <= prev) throw new Error('size classes must be strictly increasing');
    prev = c;
  }
}

export function planChunks(byteLength: number, classes: readonly number[] = DEFAULT_SIZE_CLASSES): ChunkPlan {
  if (byteLength === 0) return { chunkBytes: classes[0]!, count: 0, lastBytes: 0 };
  const chunkBytes = classes.find((c) => c >= byteLength) ?? classes[classes.length - 1]!;
  const count = Math.ceil(byteLength / chunkBytes);
  return { chunkBytes, count, lastBytes: byteLength - (count - 1) * chunkBytes };
}

/** Byte length of chunk `i` of a plan. */
export function chunkLength(plan: ChunkPlan, i: number): number {
  return i === plan.count - 1 ? plan.lastBytes : plan.chunkBytes;
}

/** The RECV length for a chunk: whole frames, so the RECV covers exactly the frames its SEND does. */
export function recvLength(chunkBytes: number): number {
  return framesOf(chunkBytes) * FRAME_BYTES;
}
