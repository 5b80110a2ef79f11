/**
 * One step's forward over several sequences (segments), as both drivers and the followers run it: a
 * shard with forwardBatch (a CPU shard, a GPU rank) runs them in one call (the weights are read once
 * for the whole step); a shard without it runs one forward per segment, each output copied because
 * the next forward reuses the shard's buffer.
 */
import { cpuKvBlocks, type BatchSegment, type KvBlocks, type ModelShard, type PrefixCacheable } from '@orchard/engine';

/** Whether the shard runs a step's sequences in one forward. */
export function batches(shard: ModelShard): boolean {
  return typeof shard.forwardBatch === 'function';
}

/** Whether the shard's KV caches are CPU memory: a CPU shard's. A GPU rank (`cachesOnDevice`) keeps its K/V on the device. */
export function keepsCpuCaches(shard: ModelShard): boolean {
  return batches(shard) && !(shard as { cachesOnDevice?: boolean }).cachesOnDevice;
}

/**
 * How the shard's prefix cache copies K/V blocks: CPU arrays for a CPU shard, device buffers for a GPU
 * rank (its `kvBlocks`); null for a shard that offers neither (then prefix reuse stays off wherever it
 * takes part).
 */
export function kvBlocksOf(shard: ModelShard): KvBlocks<PrefixCacheable, unknown> | null {
  if (keepsCpuCaches(shard)) return cpuKvBlocks as unknown as KvBlocks<PrefixCacheable, unknown>;
  return (shard as { kvBlocks?: KvBlocks<PrefixCacheable, unknown> }).kvBlocks ?? null;
}

/**
 * Whether the shard can check a draft: every row of a segment with allLogits gets the bits of its own
 * 1-token decode, and a cache cut back to an earlier length continues from there. A CPU shard can; a GPU
 * rank says so (`verifiesDrafts`: its check rows run as decode rows, engine EXACT_ROWS_MAX).
 */
export function verifiesDrafts(shard: ModelShard): boolean {
  return keepsCpuCaches(shard) || (shard as { verifiesDrafts?: boolean }).verifiesDrafts === true;
}

export async function forwardSegments(shard: ModelShard, segments: BatchSegment[]): Promise<Float32Array[]> {
  if (batches(shard)) return shard.forwardBatch(segments);
  const outs: Float32Array[] = [];
  for (const s of segments) outs.push(Float32Array.from(await shard.forward(s.input, s.cache)));
  return outs;
}
