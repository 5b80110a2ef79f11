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
 */
import { createHash } from 'node:crypto';
import type { KVCache } from './forward.js';

export interface PrefixCacheOptions {
  /** Most bytes of K/V kept. */
  maxBytes: number;
  /** Most blocks kept. @default no limit */
  maxBlocks?: number;
  /** Tokens per block: prefixes are reused in whole blocks. @default 16 */
  blockTokens?: number;
}

interface Block {
  /** Per layer: the block's K rows then its V rows. */
  kv: Float32Array[];
  bytes: number;
}

export class PrefixCache {
  readonly maxBytes: number;
  readonly maxBlocks: number;
  readonly blockTokens: number;
  /** Insertion order is recency order: the first entry is the least recently used. */
  readonly #blocks = new Map<string, Block>();
  #bytes = 0;

  constructor(options: PrefixCacheOptions) {
    const { maxBytes, maxBlocks = Infinity, blockTokens = 16 } = options;
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
  restore(cache: KVCache, tokens: ArrayLike<number>): number {
    if (cache.length !== 0) throw new Error(`prefix cache: restore needs an empty KV cache, this one holds ${cache.length} tokens`);
    const found: Block[] = [];
    for (const key of this.#keys(tokens, Math.floor((tokens.length - 1) / this.blockTokens))) {
      const block = this.#blocks.get(key);
      if (!block) break;
      found.push(block);
    }
    const used = Math.min(found.length, Math.floor((cache.capacity - 1) / this.blockTokens));
    const n = used * this.blockTokens;
    for (let i = 0; i < used; i++) this.#copyIn(found[i], cache, i);
    cache.length = n;
    this.#touch(tokens, used);
    return n;
  }

  /** Keeps every whole block of the first `cache.length` tokens of `tokens` that is not held yet. */
  store(cache: KVCache, tokens: ArrayLike<number>): void {
    const whole = Math.floor(Math.min(cache.length, tokens.length) / this.blockTokens);
    const keys = this.#keys(tokens, whole);
    keys.forEach((key, i) => {
      if (this.#blocks.has(key)) return;
      const block = this.#copyOut(cache, i);
      if (block.bytes > this.maxBytes) return;
      this.#blocks.set(key, block);
      this.#bytes += block.bytes;
    });
    this.#touch(tokens, whole);
    this.#evict();
  }

  /** Drops every block. */
  clear(): void {
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
    }
  }

  #copyOut(cache: KVCache, index: number): Block {
    const kv = cache.k.map((k, l) => {
      const v = cache.v[l];
      const kw = k.length / cache.capacity;
      const vw = v.length / cache.capacity;
      const rows = new Float32Array(this.blockTokens * (kw + vw));
      const from = index * this.blockTokens;
      rows.set(k.subarray(from * kw, (from + this.blockTokens) * kw));
      rows.set(v.subarray(from * vw, (from + this.blockTokens) * vw), this.blockTokens * kw);
      return rows;
    });
    return { kv, bytes: kv.reduce((a, r) => a + r.byteLength, 0) };
  }

  #copyIn(block: Block, cache: KVCache, index: number): void {
    if (block.kv.length !== cache.k.length) throw new Error(`prefix cache: a block of ${block.kv.length} layers does not fit a cache of ${cache.k.length}`);
    block.kv.forEach((rows, l) => {
      const kw = cache.k[l].length / cache.capacity;
      const vw = cache.v[l].length / cache.capacity;
      const at = index * this.blockTokens;
      cache.k[l].set(rows.subarray(0, this.blockTokens * kw), at * kw);
      cache.v[l].set(rows.subarray(this.blockTokens * kw), at * vw);
    });
  }
}
