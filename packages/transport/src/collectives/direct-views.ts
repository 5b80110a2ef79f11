/**
 * The typed-array views the direct all-reduce works through (the caller's bytes, each rank's
 * contribution, each peer's receive slot in the staging, the f32 accumulator), kept while the
 * caller passes the same buffer and the arenas have not grown. A serving loop all-reduces the same
 * hidden-state buffer every layer; on the latency path these views were most of what an
 * operation allocated.
 */
import type { ReducibleBuffer } from '../group.js';

export class DirectViews {
  #buf: ReducibleBuffer | null = null;
  #offset = -1;
  #length = -1;
  #rank = -1;
  #size = -1;
  #stage: ArrayBuffer | null = null;
  #accBuffer: ArrayBuffer | null = null;
  /** The caller's buffer as bytes. */
  bytes: Uint8Array = new Uint8Array(0);
  /** sources[r] is rank r's contribution, indexed like the buffer (ours is the buffer itself). */
  sources: ReducibleBuffer[] = [];
  /** slots[r]: where rank r's contribution is received (empty for our own rank). */
  slots: Uint8Array[] = [];
  /** f32 accumulator over the whole accumulator arena. */
  acc: Float32Array = new Float32Array(0);

  /** Points the views at `buf`, `stage` (size-1 contributions) and `accBuffer`; cheap when nothing changed. */
  update(buf: ReducibleBuffer, rank: number, size: number, stage: ArrayBuffer, accBuffer: ArrayBuffer): this {
    if (accBuffer !== this.#accBuffer) {
      this.#accBuffer = accBuffer;
      this.acc = new Float32Array(accBuffer, 0, accBuffer.byteLength >> 2);
    }
    if (buf === this.#buf && buf.byteOffset === this.#offset && buf.length === this.#length && stage === this.#stage && rank === this.#rank && size === this.#size) {
      return this;
    }
    const count = buf.length;
    const f32 = buf instanceof Float32Array;
    this.bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
    this.sources = [];
    this.slots = [];
    for (let r = 0, slot = 0; r < size; r++) {
      if (r === rank) {
        this.sources.push(buf);
        this.slots.push(new Uint8Array(0));
        continue;
      }
      const s = f32 ? new Float32Array(stage, count * slot * 4, count) : new Uint16Array(stage, count * slot * 2, count);
      slot++;
      this.sources.push(s);
      this.slots.push(new Uint8Array(s.buffer, s.byteOffset, s.byteLength));
    }
    this.#buf = buf;
    this.#offset = buf.byteOffset;
    this.#length = buf.length;
    this.#stage = stage;
    this.#rank = rank;
    this.#size = size;
    return this;
  }

  /** Forgets the buffer and arenas (so they can be collected). */
  release(): void {
    this.#buf = null;
    this.#stage = null;
    this.#accBuffer = null;
    this.bytes = new Uint8Array(0);
    this.sources = [];
    this.slots = [];
    this.acc = new Float32Array(0);
  }
}
