/**
 * Data-plane framing, pure (no I/O). Every message is one frame:
 *
 *   offset 0  magic  u16  0x4F46 ("OF") — garbage is caught at the first header
 *          2  kind   u8   1 = DATA
 *          3  flags  u8   reserved, must be 0
 *          4  tag    u32  which receive the payload matches (user traffic or a collective step)
 *          8  seq    u32  frames sent on this connection before this one (detects loss/reordering,
 *                         and is the AEAD nonce when the connection is encrypted)
 *         12  length u32  payload bytes (plaintext)
 *   then `length` payload bytes, then `trailerBytes` (the AEAD tag when encrypted, else none).
 *
 * The decoder never copies a payload twice: it asks its sink for the destination (a posted
 * receive buffer) as soon as a header is complete and copies socket chunks straight into it.
 */
import { FrameError } from '../errors.js';

export const FRAME_MAGIC = 0x4f46;
export const FRAME_HEADER_BYTES = 16;
export const KIND_DATA = 1;

/** A decoded header. The decoder reuses one object: copy fields you keep past the callback. */
export interface FrameHeader {
  kind: number;
  flags: number;
  tag: number;
  seq: number;
  length: number;
}

export function encodeHeader(out: Uint8Array, offset: number, kind: number, tag: number, seq: number, length: number): void {
  if (!Number.isInteger(length) || length < 0 || length > 0xffffffff) {
    throw new FrameError(`frame length must be 0..4294967295, got ${length}`);
  }
  // Byte by byte (big-endian): no DataView allocated per frame.
  const o = offset;
  out[o] = FRAME_MAGIC >>> 8;
  out[o + 1] = FRAME_MAGIC & 0xff;
  out[o + 2] = kind;
  out[o + 3] = 0;
  writeU32(out, o + 4, tag >>> 0);
  writeU32(out, o + 8, seq >>> 0);
  writeU32(out, o + 12, length);
}

function writeU32(out: Uint8Array, o: number, v: number): void {
  out[o] = v >>> 24;
  out[o + 1] = (v >>> 16) & 0xff;
  out[o + 2] = (v >>> 8) & 0xff;
  out[o + 3] = v & 0xff;
}

export interface FrameSink {
  /**
   * Where the payload of `header` goes: exactly `header.length` bytes, or `null` to pause the
   * decoder (back-pressure: nothing can take the payload yet). Throw to reject the frame.
   */
  target(header: FrameHeader): Uint8Array | null;
  /** The whole payload (and trailer, if any) has arrived in `target`. */
  complete(header: FrameHeader, target: Uint8Array, trailer: Uint8Array): void;
  /**
   * Payload bytes `start..end` of `target` have just arrived (an encrypted connection decrypts
   * them here, while the rest of the frame is still on its way). Optional.
   */
  progress?(header: FrameHeader, target: Uint8Array, start: number, end: number): void;
}

export interface FrameDecoderOptions {
  /** Largest payload accepted; a longer header is garbage. @default 2^32-1 */
  maxLength?: number;
  /** Bytes after each payload (16 for an AES-GCM tag). @default 0 */
  trailerBytes?: number;
}

const EMPTY = new Uint8Array(0);

const enum State {
  Header,
  Payload,
  Trailer,
  Paused,
  Failed,
}

/** Incremental decoder: feed it socket chunks with `push`. */
export class FrameDecoder {
  readonly #sink: FrameSink;
  readonly #maxLength: number;
  readonly #trailer: Uint8Array;
  readonly #headerBytes = new Uint8Array(FRAME_HEADER_BYTES);
  readonly #headerView = new DataView(this.#headerBytes.buffer);
  readonly #header: FrameHeader = { kind: 0, flags: 0, tag: 0, seq: 0, length: 0 };
  #state = State.Header;
  #fill = 0;
  #target: Uint8Array = EMPTY;
  #expectedSeq = 0;

  constructor(sink: FrameSink, options: FrameDecoderOptions = {}) {
    this.#sink = sink;
    this.#maxLength = options.maxLength ?? 0xffffffff;
    this.#trailer = new Uint8Array(options.trailerBytes ?? 0);
  }

  /** True while waiting for the sink to provide a destination (see `resume`). */
  get paused(): boolean {
    return this.#state === State.Paused;
  }

  /**
   * Consumes bytes from the first `n` of `chunk` (a reused read buffer needs no view of its own)
   * and returns how many were consumed. Fewer than `n` only when the sink paused the decoder;
   * push the rest after `resume()` returns true.
   * Throws FrameError on garbage; the decoder then refuses further input.
   */
  push(chunk: Uint8Array, n = chunk.length): number {
    if (this.#state === State.Failed) throw new FrameError('decoder already failed');
    if (this.#state === State.Paused) return 0;
    let i = 0;
    try {
      while (i < n) {
        if (this.#state === State.Header) {
          // Byte by byte: 16 bytes do not repay a subarray view per frame.
          const take = Math.min(FRAME_HEADER_BYTES - this.#fill, n - i);
          const h = this.#headerBytes;
          for (let k = 0; k < take; k++) h[this.#fill + k] = chunk[i + k];
          this.#fill += take;
          i += take;
          if (this.#fill < FRAME_HEADER_BYTES) break;
          this.#parseHeader();
          if (!this.#begin()) return i;
        } else if (this.#state === State.Payload) {
          const take = Math.min(this.#target.length - this.#fill, n - i);
          this.#target.set(chunk.subarray(i, i + take), this.#fill);
          this.#arrived(take);
          i += take;
        } else {
          const take = Math.min(this.#trailer.length - this.#fill, n - i);
          this.#trailer.set(chunk.subarray(i, i + take), this.#fill);
          this.#fill += take;
          i += take;
          if (this.#fill === this.#trailer.length) this.#finish();
        }
      }
    } catch (err) {
      this.#state = State.Failed;
      throw err;
    }
    return i;
  }

  /** Tag of the frame whose payload is arriving now, or -1 between payloads. */
  get payloadTag(): number {
    return this.#state === State.Payload ? this.#header.tag : -1;
  }

  /**
   * Moves the payload arriving now to `target` (same length): what arrived so far is copied, the
   * rest goes straight there. Lets a receive posted mid-frame take over an early frame.
   */
  redirect(target: Uint8Array): void {
    if (this.#state !== State.Payload) throw new FrameError('no payload in progress to redirect');
    if (target.length !== this.#header.length) {
      throw new FrameError(`redirect target has ${target.length} bytes for a ${this.#header.length}-byte payload`);
    }
    target.set(this.#target.subarray(0, this.#fill));
    this.#target = target;
  }

  /**
   * Where the rest of the payload arriving now goes, when at least `min` bytes of it remain: a
   * socket can read straight into it (then call `advanceInPlace`). Null otherwise.
   */
  payloadWindow(min: number): Uint8Array | null {
    if (this.#state !== State.Payload) return null;
    const rest = this.#target.length - this.#fill;
    return rest >= min ? this.#target.subarray(this.#fill) : null;
  }

  /** True if `buf` starts exactly where the next payload byte belongs. */
  isWindow(buf: Uint8Array): boolean {
    return this.#state === State.Payload && buf.buffer === this.#target.buffer && buf.byteOffset === this.#target.byteOffset + this.#fill;
  }

  /** `n` payload bytes were written in place at the current window (see payloadWindow). */
  advanceInPlace(n: number): void {
    if (this.#state !== State.Payload || n > this.#target.length - this.#fill) throw new FrameError('in-place read outside the payload');
    try {
      this.#arrived(n);
    } catch (err) {
      this.#state = State.Failed;
      throw err;
    }
  }

  /** Asks the sink again for a destination; true when the decoder can take more bytes. */
  resume(): boolean {
    if (this.#state !== State.Paused) return this.#state !== State.Failed;
    try {
      return this.#begin();
    } catch (err) {
      this.#state = State.Failed;
      throw err;
    }
  }

  #parseHeader(): void {
    const v = this.#headerView;
    const magic = v.getUint16(0);
    if (magic !== FRAME_MAGIC) throw new FrameError(`bad frame magic 0x${magic.toString(16).padStart(4, '0')}`);
    const h = this.#header;
    h.kind = v.getUint8(2);
    h.flags = v.getUint8(3);
    h.tag = v.getUint32(4);
    h.seq = v.getUint32(8);
    h.length = v.getUint32(12);
    if (h.kind !== KIND_DATA) throw new FrameError(`unknown frame kind ${h.kind}`);
    if (h.flags !== 0) throw new FrameError(`unknown frame flags 0x${h.flags.toString(16)}`);
    if (h.seq !== this.#expectedSeq) throw new FrameError(`frame sequence ${h.seq}, expected ${this.#expectedSeq}`);
    if (h.length > this.#maxLength) throw new FrameError(`frame of ${h.length} bytes exceeds the ${this.#maxLength}-byte limit`);
  }

  /** Gets a destination for the parsed header; false if the sink paused us. */
  #begin(): boolean {
    const target = this.#sink.target(this.#header);
    if (target === null) {
      this.#state = State.Paused;
      return false;
    }
    if (target.length !== this.#header.length) {
      throw new FrameError(`sink gave ${target.length} bytes for a ${this.#header.length}-byte payload`);
    }
    this.#target = target;
    this.#fill = 0;
    this.#state = State.Payload;
    if (target.length === 0) this.#afterPayload();
    return true;
  }

  /** `n` more payload bytes are in the target. */
  #arrived(n: number): void {
    const start = this.#fill;
    this.#fill += n;
    if (n > 0) this.#sink.progress?.(this.#header, this.#target, start, this.#fill);
    if (this.#fill === this.#target.length) this.#afterPayload();
  }

  #afterPayload(): void {
    this.#fill = 0;
    if (this.#trailer.length === 0) this.#finish();
    else this.#state = State.Trailer;
  }

  #finish(): void {
    const target = this.#target;
    this.#target = EMPTY;
    this.#fill = 0;
    this.#state = State.Header;
    this.#expectedSeq = (this.#expectedSeq + 1) >>> 0;
    this.#sink.complete(this.#header, target, this.#trailer);
  }
}
