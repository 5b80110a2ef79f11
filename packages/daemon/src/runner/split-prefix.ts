/**
 * The prefix cache of a split instance, one per rank. Every rank keeps its own K/V blocks (its layers,
 * its heads) under the same token keys, bounded by the same number of blocks, and applies the same
 * stores and restores in the same order (the driver's headers: a begin restores, an end stores), so
 * the ranks' caches hold the same prefixes: the length the driver finds is there on every rank. A rank
 * whose cache disagrees is a bug, and fails loudly instead of computing from a half-filled cache.
 * A rank's blocks live where its caches do (kvBlocksOf: CPU arrays, or a GPU rank's device buffers).
 */
import { cpuKvBlocks, PrefixCache, type KvBlocks, type PrefixCacheable } from '@orchard/engine';

type Blocks = KvBlocks<PrefixCacheable, unknown>;

export class SplitPrefix {
  readonly blockTokens: number;
  readonly #blocks: Blocks;
  #cache: PrefixCache<PrefixCacheable, unknown> | null = null;
  /** Per slot: every token whose K/V the slot's cache holds, in order (the blocks' keys). */
  readonly #history = new Map<number, number[]>();

  constructor(blocks: Blocks = cpuKvBlocks as unknown as Blocks, blockTokens = 16) {
    this.#blocks = blocks;
    this.blockTokens = blockTokens;
  }

  /** The cache bounded by `maxBlocks` (the driver's number, the same on every rank); null for none. */
  #sized(maxBlocks: number): PrefixCache<PrefixCacheable, unknown> | null {
    if (maxBlocks <= 0) return null;
    if (this.#cache?.maxBlocks !== maxBlocks) {
      this.#cache?.clear();
      this.#cache = new PrefixCache({ maxBytes: Infinity, maxBlocks, blockTokens: this.blockTokens, blocks: this.#blocks });
    }
    return this.#cache;
  }

  /** The blocks `bytes` of K/V hold for a shard whose caches look like `cache`. */
  blocksFor(bytes: number, cache: PrefixCacheable): number {
    const perToken = this.#blocks.bytesPerToken(cache);
    return perToken > 0 ? Math.floor(bytes / (perToken * this.blockTokens)) : 0;
  }

  /** Driver: copies the longest cached prefix of `prompt` into the empty `cache`; returns its length. */
  restore(slot: number, cache: PrefixCacheable, prompt: readonly number[], maxBlocks: number): number {
    const n = this.#sized(maxBlocks)?.restore(cache, prompt) ?? 0;
    this.#history.set(slot, prompt.slice(0, n));
    return n;
  }

  /** Follower: copies exactly the driver's reused `prefix` into the empty `cache`. */
  restoreExactly(slot: number, cache: PrefixCacheable, prefix: ArrayLike<number>, maxBlocks: number, rank: number): void {
    const kept = this.#sized(maxBlocks);
    const n = prefix.length && kept ? kept.restore(cache, [...Array.from(prefix), 0]) : 0; // restore always leaves one token to compute
    if (n !== prefix.length) throw new Error(`prefix cache of rank ${rank} holds ${n} of the ${prefix.length} prompt tokens the driver reused: the ranks' caches are out of step`);
    this.#history.set(slot, Array.from(prefix));
  }

  /** Tokens a step fed into the slot's cache. */
  fed(slot: number, ids: ArrayLike<number>): void {
    const h = this.#history.get(slot);
    if (h) for (let i = 0; i < ids.length; i++) h.push(ids[i]);
  }

  /** The slot's cache dropped its rows from `length` on (a rejected draft). */
  rewind(slot: number, length: number): void {
    const h = this.#history.get(slot);
    if (h && h.length > length) h.length = length;
  }

  /** The slot's sequence is over: its whole blocks go into the cache. */
  end(slot: number, cache: PrefixCacheable): void {
    const h = this.#history.get(slot);
    this.#history.delete(slot);
    if (h) this.#cache?.store(cache, h);
  }
}
