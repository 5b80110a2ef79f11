/**
 * A shard's store of KV-cache blocks keyed by the tokens before and in them, so a new sequence that
 * starts like an earlier one (a chat re-sending its history) copies that prefix's K/V instead of
 * computing it again. Blocks hold `blockTokens` tokens; a block's key hashes its parent's key and its
 * own tokens (a hash chain), so it names the whole prefix, and every shard of a split — whatever
 * layers or heads it holds — derives the same keys from the same tokens. Bounded by bytes and/or by
 * blocks; the least recently used block goes first, and a lookup touches a chain's blocks leaf-first so
 * that leaves are evicted before the blocks they extend. The ranks of a split bound their caches by the
 * same number of blocks (their blocks differ in bytes): given the same stores and restores in the same
 * order they then hold the same prefixes, so what the driver finds every rank finds.
 * Where a block's rows live is the KvBlocks' business: CPU arrays here (cpuKvBlocks), device buffers
 * for a GPU rank (daemon runner/gpu-shard.ts), whose copies run in its queue's order.
 */
import { createHash } from 'node:crypto';
import type { KVCache } from './forward.js';

/** The KV cache surface the prefix cache needs: how many tokens it holds and can hold. */
export interface PrefixCacheable {
  length: number;
  readonly capacity: number;
}

/** Copies of a KV cache's token rows (every layer's K and V) and back: what a prefix-cache block holds. */
export interface KvBlocks<C extends PrefixCacheable = KVCache, B = unknown> {
  /** A copy of token rows [from, from + tokens) of `cache` (bytesPerToken(cache)·tokens bytes). */
  copyOut(cache: C, from: number, tokens: number): B;
  /** Writes a block from copyOut into token rows [at, at + tokens) of `cache`. */
  copyIn(block: B, cache: C, at: number, tokens: number): void;
  /** Bytes one token's rows take in `cache`: a block's size (a split's ranks size their caches in blocks from it). */
  bytesPerToken(cache: C): number;
  /** The block is dropped (evicted or cleared): where it holds memory that is not collected, free it. */
  free?(block: B): void;
}

/** Blocks as CPU arrays: per layer the block's K rows, then its V rows. */
export const cpuKvBlocks: KvBlocks<KVCache, Float32Array[]> = {
  copyOut(cache, from, tokens) {
    return cache.k.map((k, l) => {
      const v = cache.v[l];
      const kw = k.length / cache.capacity;
      const vw = v.length / cache.capacity;
      const rows = new Float32Array(tokens * (kw + vw));
      rows.set(k.subarray(from * kw, (from + tokens) * kw));
      rows.set(v.subarray(from * vw, (from + tokens) * vw), tokens * kw);
      return rows;
    });
  },
  copyIn(kv, cache, at, tokens) {
    if (kv.length !== cache.k.length) throw new Error(`prefix cache: a block of ${kv.length} layers does not fit a cache of ${cache.k.length}`);
    kv.forEach((rows, l) => {
      const kw = cache.k[l].length / cache.capacity;
      const vw = cache.v[l].length / cache.capacity;
      cache.k[l].set(rows.subarray(0, tokens * kw), at * kw);
      cache.v[l].set(rows.subarray(tokens * kw), at * vw);
    });
  },
  bytesPerToken: (cache) => (4 * cache.k.reduce((a, k, l) => a + k.length + cache.v[l].length, 0)) / cache.capacity,
};

export interface PrefixCacheOptions<C extends PrefixCacheable = KVCache, B = unknown> {
  /** Most bytes of K/V kept. */
  maxBytes: number;
  /** Most blocks kept. @default no limit */
  maxBlocks?: number;
  /** Tokens per block: prefixes are reused in whole blocks. @default 16 */
  blockTokens?: number;
  /** Where blocks live. @default cpuKvBlocks */
  blocks?: KvBlocks<C, B>;
}

interface Block<B> {
  data: B;
  bytes: number;
}

export class PrefixCache<C extends PrefixCacheable = KVCache, B = unknown> {
  readonly maxBytes: number;
  readonly maxBlocks: number;
  readonly blockTokens: number;
  readonly kvBlocks: KvBlocks<C, B>;
  /** Insertion order is recency order: the first entry is the least recently used. */
  readonly #blocks = new Map<string, Block<B>>();
  #bytes = 0;

  constructor(options: PrefixCacheOptions<C, B>) {
    const { maxBytes, maxBlocks = Infinity, blockTokens = 16 } = options;
    this.kvBlocks = options.blocks ?? (cpuKvBlocks as unknown as KvBlocks<C, B>);
    if (!(maxBytes >= 0)) throw new RangeError(`prefix cache: maxBytes must be >= 0, got ${maxBytes}`);
    if (!(maxBlocks >= 0)) throw new RangeError(`prefix cache: maxBlocks must be >= 0, got ${maxBlocks}`);
    this.maxBlocks = maxBlocks;
    if (!Number.isInteger(blockTokens) || blockTokens < 1) throw new RangeError(`prefix cache: blockTokens must be a positive integer, got ${blockTokens}`);
    this.maxBytes = maxBytes;
    this.blockTokens = blockTokens;
  }

  /** Bytes of K/V held now. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Blocks held now. */
  get size(): number {
    return this.#blocks.size;
  }

  /**
   * Copies the longest cached prefix of `tokens` into the empty `cache` and returns its length. At
   * least one token is always left over: the caller needs a forward to get the next logits.
   */
  restore(cache: C, tokens: ArrayLike<number>): number {
    if (cache.length !== 0) throw new Error(`prefix cache: restore needs an empty KV cache, this one holds ${cache.length} tokens`);
    const found: Block<B>[] = [];
    for (const key of this.#keys(tokens, Math.floor((tokens.length - 1) / this.blockTokens))) {
      const block = this.#blocks.get(key);
      if (!block) break;
      found.push(block);
    }
    const used = Math.min(found.length, Math.floor((cache.capacity - 1) / this.blockTokens));
    const n = used * this.blockTokens;
    for (let i = 0; i < used; i++) this.kvBlocks.copyIn(found[i].data, cache, i * this.blockTokens, this.blockTokens);
    cache.length = n;
    this.#touch(tokens, used);
    return n;
  }

  /** Keeps every whole block of the first `cache.length` tokens of `tokens` that is not held yet. */
  store(cache: C, tokens: ArrayLike<number>): void {
    const whole = Math.floor(Math.min(cache.length, tokens.length) / this.blockTokens);
    // A block larger than the whole budget is never kept: not even copied.
    const bytes = this.kvBlocks.bytesPerToken(cache) * this.blockTokens;
    const keys = bytes > this.maxBytes ? [] : this.#keys(tokens, whole);
    keys.forEach((key, i) => {
      if (this.#blocks.has(key)) return;
      this.#blocks.set(key, { data: this.kvBlocks.copyOut(cache, i * this.blockTokens, this.blockTokens), bytes });
      this.#bytes += bytes;
    });
    this.#touch(tokens, whole);
    this.#evict();
  }

  /** Drops every block. */
  clear(): void {
    for (const block of this.#blocks.values()) this.kvBlocks.free?.(block.data);
    this.#blocks.clear();
    this.#bytes = 0;
  }

  /** The chain keys of the first `blocks` blocks of `tokens`. */
  #keys(tokens: ArrayLike<number>, blocks: number): string[] {
    const keys: string[] = [];
    let parent = '';
    for (let i = 0; i < blocks; i++) {
      const ids = Int32Array.from(Array.prototype.slice.call(tokens, i * this.blockTokens, (i + 1) * this.blockTokens) as number[]);
      parent = createHash('sha256').update(parent).update(new Uint8Array(ids.buffer)).digest('hex');
      keys.push(parent);
    }
    return keys;
  }

  /** Marks the chain's first `blocks` blocks most recently used, the root last (so it outlives its leaves). */
  #touch(tokens: ArrayLike<number>, blocks: number): void {
    for (const key of this.#keys(tokens, blocks).reverse()) {
      const block = this.#blocks.get(key);
      if (!block) continue;
      this.#blocks.delete(key);
      this.#blocks.set(key, block);
    }
  }

  #evict(): void {
    for (const [key, block] of this.#blocks) {
      if (this.#bytes <= this.maxBytes && this.#blocks.size <= this.maxBlocks) return;
      this.#blocks.delete(key);
      this.#bytes -= block.bytes;
      this.kvBlocks.free?.(block.data);
    }
  }
}
