/**
 * A bump allocator over one shared, growable WebAssembly memory. Weights and activation buffers are
 * allocated once and live as long as the backend. Memory is only reused through an explicit
 * `release` (KV caches of finished sequences, for example): released blocks go to a free list by
 * size and the next allocation of the same rounded size takes one back, zeroed. Views created before
 * a grow stay valid because shared memory never detaches its buffers.
 */
import type { WasmMemory } from './module.js';
import { HEAP_BASE, MAX_PAGES, PAGE_BYTES } from './layout.js';

const ALIGN = 64;
/** Grow in steps of at least this many bytes so many small allocations do not each grow the memory. */
const GROW_STEP = 16 * 1024 * 1024;

export class Arena {
  readonly memory: WasmMemory;
  #top = HEAP_BASE;
  /** Every SharedArrayBuffer object this memory has handed out (one per size after each grow). */
  readonly #buffers = new WeakSet<ArrayBufferLike>();
  /** Live blocks: address → rounded size. */
  readonly #live = new Map<number, number>();
  /** Released blocks by rounded size. */
  readonly #free = new Map<number, number[]>();
  #freeBytes = 0;

  /** The memory's maximum size in pages (4 GiB unless the reservation had to be smaller). */
  readonly maxPages: number;

  constructor(memory: WasmMemory, maxPages = MAX_PAGES) {
    this.memory = memory;
    this.maxPages = maxPages;
    this.#buffers.add(memory.buffer);
  }

  /** Bytes in use: the heap's high-water mark (including the fixed low area) minus released blocks. */
  get used(): number {
    return this.#top - this.#freeBytes;
  }

  /** Reserves `bytes` (64-byte aligned) and returns its address; the bytes are zero. */
  alloc(bytes: number, what: string): number {
    if (!Number.isInteger(bytes) || bytes < 0) throw new Error(`wasm backend: bad allocation size ${bytes} for ${what}`);
    const size = Math.ceil(bytes / ALIGN) * ALIGN;
    const reuse = this.#free.get(size)?.pop();
    if (reuse !== undefined) {
      this.#freeBytes -= size;
      new Uint8Array(this.buffer(), reuse, size).fill(0);
      this.#live.set(reuse, size);
      return reuse;
    }
    const start = Math.ceil(this.#top / ALIGN) * ALIGN;
    const end = start + size;
    if (end > this.maxPages * PAGE_BYTES) {
      const limit = this.maxPages === MAX_PAGES ? 'the 4 GiB wasm32 memory limit' : `this backend's ${fmt(this.maxPages * PAGE_BYTES)} memory reservation`;
      throw new Error(
        `wasm backend: allocating ${fmt(bytes)} for ${what} would exceed ${limit} ` +
          `(${fmt(this.#top)} already in use); use a smaller shard or a quantized model`,
      );
    }
    const have = this.memory.buffer.byteLength;
    if (end > have) {
      const wantBytes = Math.min(this.maxPages * PAGE_BYTES, Math.max(end, have + GROW_STEP));
      const pages = Math.ceil((wantBytes - have) / PAGE_BYTES);
      try {
        this.memory.grow(pages);
      } catch (err) {
        throw new Error(
          `wasm backend: could not grow memory to ${fmt(have + pages * PAGE_BYTES)} for ${what}: ${(err as Error).message}`,
        );
      }
      this.#buffers.add(this.memory.buffer);
    }
    this.#top = end;
    if (size > 0) this.#live.set(start, size);
    return start;
  }

  /**
   * Returns a whole allocation (the view alloc's caller received, not a part of it) for reuse. The
   * caller must not touch it afterwards. Anything else is an error rather than a silent leak.
   */
  release(view: ArrayBufferView, what: string): void {
    const addr = this.addressOf(view, what);
    const size = this.#live.get(addr);
    if (size === undefined || Math.ceil(view.byteLength / ALIGN) * ALIGN !== size) {
      if (view.byteLength === 0) return;
      throw new Error(`wasm backend: ${what} is not a whole live allocation of this backend (already released, or a subarray?)`);
    }
    this.free(addr);
  }

  /** Returns the live block at `addr` (an address alloc returned) to the free list. */
  free(addr: number): void {
    const size = this.#live.get(addr);
    if (size === undefined) throw new Error(`wasm backend: no live block at ${addr}`);
    this.#live.delete(addr);
    let list = this.#free.get(size);
    if (!list) this.#free.set(size, (list = []));
    list.push(addr);
    this.#freeBytes += size;
  }

  /** The current buffer, registered as ours. */
  buffer(): SharedArrayBuffer {
    const b = this.memory.buffer as unknown as SharedArrayBuffer;
    this.#buffers.add(b);
    return b;
  }

  /** Address of a view's first byte, or an error when the view does not live in this memory. */
  addressOf(view: ArrayBufferView, what: string): number {
    if (!this.#buffers.has(view.buffer)) {
      throw new Error(`wasm backend: ${what} was not allocated by this backend (use its allocF32/allocBytes)`);
    }
    return view.byteOffset;
  }
}

function fmt(bytes: number): string {
  return bytes >= 2 ** 30 ? `${(bytes / 2 ** 30).toFixed(2)} GiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}
