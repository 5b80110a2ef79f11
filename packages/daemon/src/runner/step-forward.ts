/**
 * One step's forward over several sequences (segments), as both drivers and the followers run it: a
 * CPU shard runs them in one forwardBatch (the weights are read once for the whole step); a shard
 * without it (the GPU rank) runs one forward per segment, each output copied because the next forward
 * reuses the shard's buffer.
 */
import type { BatchSegment, ModelShard } from '@orchard/engine';

export function batches(shard: ModelShard): boolean {
  return typeof shard.forwardBatch === 'function';
}

export async function forwardSegments(shard: ModelShard, segments: BatchSegment[]): Promise<Float32Array[]> {
  if (batches(shard)) return shard.forwardBatch(segments);
  const outs: Float32Array[] = [];
  for (const s of segments) outs.push(Float32Array.from(await shard.forward(s.input, s.cache)));
  return outs;
}
