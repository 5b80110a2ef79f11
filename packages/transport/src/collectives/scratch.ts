/**
 * Grow-only scratch memory owned by one group, so collectives allocate only when a bigger
 * operation than any before comes along. Collectives on a group run one at a time, so one
 * arena per purpose is enough.
 */
export class ScratchArena {
  #buf = new ArrayBuffer(0);

  /** A byte region of at least `bytes`, 8-byte aligned at offset 0; contents are undefined. */
  get(bytes: number): ArrayBuffer {
    if (this.#buf.byteLength < bytes) {
      this.#buf = new ArrayBuffer(Math.max(bytes, Math.min(this.#buf.byteLength * 2, bytes * 2)));
    }
    return this.#buf;
  }

  /** Drops the memory. */
  release(): void {
    this.#buf = new ArrayBuffer(0);
  }
}
