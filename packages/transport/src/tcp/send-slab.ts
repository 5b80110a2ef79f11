/**
 * A ring of send memory for small frames: header and payload are copied into one contiguous slot
 * so the frame goes out in a single write (one syscall, no writev bookkeeping), and nothing is
 * allocated per message. Slots are released in the order they were reserved, which is the order
 * the socket completes writes.
 */
export class SendSlab {
  readonly #buf: Uint8Array;
  #head = 0;
  /** Start offsets of in-flight slots, oldest first. */
  readonly #starts: number[] = [];
  #first = 0;

  constructor(bytes: number) {
    this.#buf = new Uint8Array(bytes);
  }

  get capacity(): number {
    return this.#buf.length;
  }

  /** A slot of `n` bytes, or null when the ring is too full (the caller then writes directly). */
  reserve(n: number): Uint8Array | null {
    const size = this.#buf.length;
    if (n > size) return null;
    let start: number;
    if (this.#starts.length === this.#first) {
      this.#starts.length = 0;
      this.#first = 0;
      start = 0;
    } else {
      const tail = this.#starts[this.#first];
      if (this.#head > tail) {
        // In use: [tail, head).
        if (size - this.#head >= n) start = this.#head;
        else if (tail >= n) start = 0; // wrap; the unused end is freed with the slots before it
        else return null;
      } else {
        // Wrapped. In use: [tail, size) and [0, head); free: [head, tail).
        if (tail - this.#head >= n) start = this.#head;
        else return null;
      }
    }
    this.#starts.push(start);
    this.#head = start + n;
    return this.#buf.subarray(start, start + n);
  }

  /** Releases the oldest slot. */
  release(): void {
    this.#first++;
    if (this.#first > 1024 && this.#first * 2 > this.#starts.length) {
      this.#starts.splice(0, this.#first);
      this.#first = 0;
    }
  }
}
