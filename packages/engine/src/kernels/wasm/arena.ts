/**
 * A bump allocator over one shared, growable WasmMemory. Model weights and activations are
 * allocated once and live as long as the backend, so nothing is ever freed; that keeps every pointer
 * stable. Views created before a grow stay valid because shared memory never detaches its buffers.
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

  constructor(memory: WasmMemory) {
    this.memory = memory;
    this.#buffers.add(memory.buffer);
  }

  /** Bytes handed out so far (including the fixed low area). */
  get used(): number {
    return this.#top;
  }

  /** Reserves `bytes` (64-byte aligned) and returns its address; the bytes are zero (never reused). */
  alloc(bytes: number, what: string): number {
    if (!Number.isInteger(bytes) || bytes < 0) throw new Error(`wasm backend: bad allocation size ${bytes} for ${what}`);
    const start = Math.ceil(this.#top / ALIGN) * ALIGN;
    const end = start + bytes;
    if (end > MAX_PAGES * PAGE_BYTES) {
      throw new Error(
        `wasm backend: allocating ${fmt(bytes)} for ${what} would exceed the 4 GiB wasm32 memory limit ` +
          `(${fmt(this.#top)} already in use); use a smaller shard or a quantized model`,
      );
    }
    const have = this.memory.buffer.byteLength;
    if (end > have) {
      const wantBytes = Math.min(MAX_PAGES * PAGE_BYTES, Math.max(end, have + GROW_STEP));
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
    return start;
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
