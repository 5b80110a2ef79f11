/**
 * An encrypted byte stream over an authenticated socket, for protocols that are not frame-based
 * (the daemon's weights plane). The caller's bytes travel in records
 *
 *   length u32 BE | ciphertext (length bytes) | tag (16 bytes)
 *
 * sealed with the direction's key from the handshake, the record number as nonce and the length
 * field as associated data. A record that was cut, reordered, replayed or altered fails its tag and
 * fails the stream: the reader sees an error, never the bytes.
 *
 * Records are at most RECORD_MAX_BYTES: big enough that the per-record cost (a cipher context, a
 * writev) is small against the cipher's work, small enough that a record's plaintext and ciphertext
 * stay in the CPU's cache between sealing and the kernel's copy.
 */
import type { Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { FrameError } from '../errors.js';
import { AEAD_TAG_BYTES, FrameOpener, FrameSealer } from '../wire/aead.js';
import type { ConnectionKeys } from './connection.js';

export const RECORD_MAX_BYTES = 256 * 1024;
const LENGTH_BYTES = 4;
/** The nonce holds 32 bits of record number; a stream never reuses one (~1 PB at full records). */
const MAX_RECORDS = 2 ** 32;

export class SealedStream extends Duplex {
  readonly #socket: Socket;
  readonly #sealer: FrameSealer;
  readonly #opener: FrameOpener;
  #txSeq = 0;
  #rxSeq = 0;
  /** The record being received: its length field, then its ciphertext and tag. */
  readonly #lengthField = Buffer.alloc(LENGTH_BYTES);
  #lengthHave = 0;
  #record: Buffer | null = null;
  #recordHave = 0;

  /** `leftover`: bytes that arrived with the handshake; they are the first of the stream. */
  constructor(socket: Socket, leftover: Buffer, keys: ConnectionKeys) {
    super({ allowHalfOpen: false });
    this.#socket = socket;
    this.#sealer = new FrameSealer(keys.cipher, keys.sendKey);
    this.#opener = new FrameOpener(keys.cipher, keys.recvKey);
    socket.on('data', (d: Buffer) => this.#receive(d));
    socket.on('end', () => {
      if (this.#lengthHave || this.#record) this.destroy(new FrameError('the stream ended in the middle of a record'));
      else this.push(null);
    });
    socket.on('error', (err) => this.destroy(err));
    socket.on('close', () => this.destroy());
    if (leftover.length) this.#receive(leftover);
  }

  override _read(): void {
    if (this.#socket.isPaused()) this.#socket.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    let more = true;
    for (let at = 0; at < chunk.length; at += RECORD_MAX_BYTES) {
      if (this.#txSeq >= MAX_RECORDS) return callback(new FrameError('the stream ran out of record numbers; reconnect'));
      const piece = chunk.subarray(at, Math.min(chunk.length, at + RECORD_MAX_BYTES));
      const head = Buffer.allocUnsafe(LENGTH_BYTES);
      head.writeUInt32BE(piece.length, 0);
      const [ct, tag] = this.#sealer.seal(this.#txSeq++, head, piece);
      // One writev per record, each handed to the kernel as soon as it is sealed: corked over a whole
      // write, a 16 MiB weights chunk left nothing on the wire until all of it was sealed.
      this.#socket.cork();
      this.#socket.write(head);
      this.#socket.write(ct);
      more = this.#socket.write(tag);
      this.#socket.uncork();
    }
    if (more) callback();
    else this.#socket.once('drain', () => callback());
  }

  override _final(callback: (err?: Error | null) => void): void {
    this.#socket.end(() => callback());
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.#socket.destroy();
    callback(err);
  }

  #receive(d: Buffer): void {
    let at = 0;
    while (at < d.length && !this.destroyed) {
      if (!this.#record) {
        const take = Math.min(LENGTH_BYTES - this.#lengthHave, d.length - at);
        d.copy(this.#lengthField, this.#lengthHave, at, at + take);
        this.#lengthHave += take;
        at += take;
        if (this.#lengthHave < LENGTH_BYTES) return;
        const length = this.#lengthField.readUInt32BE(0);
        if (length > RECORD_MAX_BYTES) return void this.destroy(new FrameError(`record of ${length} bytes is over the ${RECORD_MAX_BYTES}-byte limit (not a sealed stream, or a different version)`));
        // A whole record inside this read is opened where it lies; one split over reads is gathered.
        if (d.length - at >= length + AEAD_TAG_BYTES) {
          const ct = d.subarray(at, at + length);
          at += length + AEAD_TAG_BYTES;
          this.#lengthHave = 0;
          if (!this.#open(ct, d.subarray(at - AEAD_TAG_BYTES, at))) return;
          continue;
        }
        this.#record = Buffer.allocUnsafe(length + AEAD_TAG_BYTES);
        this.#recordHave = 0;
      }
      const record = this.#record;
      const take = Math.min(record.length - this.#recordHave, d.length - at);
      d.copy(record, this.#recordHave, at, at + take);
      this.#recordHave += take;
      at += take;
      if (this.#recordHave < record.length) return;
      this.#record = null;
      this.#lengthHave = 0;
      if (!this.#open(record.subarray(0, record.length - AEAD_TAG_BYTES), record.subarray(record.length - AEAD_TAG_BYTES))) return;
    }
  }

  /** Opens one record in place and hands its bytes on; false when the stream failed. */
  #open(ct: Buffer, tag: Buffer): boolean {
    if (this.#rxSeq >= MAX_RECORDS) {
      this.destroy(new FrameError('the stream ran out of record numbers'));
      return false;
    }
    try {
      this.#opener.open(this.#rxSeq++, this.#lengthField, ct, tag);
    } catch (err) {
      this.destroy(err as Error);
      return false;
    }
    if (ct.length && !this.push(ct)) this.#socket.pause();
    return true;
  }
}
