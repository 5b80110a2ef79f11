/**
 * The weights data plane's messages, pure (no I/O). After the authenticated handshake a client sends
 * requests and the server answers each, in any order (a chunk the server is still fetching does not
 * hold up the others):
 *
 *   request   0 magic u16 0x4F57 ("OW") | 2 kind u8 = GET | 3 keyLen u8 | 4 id u32 | 8 chunk u32 |
 *             12 chunkSize u32 | 16 fileSize u64 | 24 key (utf8, keyLen bytes)
 *   answer    0 magic u16 | 2 kind u8 (CHUNK, MISSING) | 3 reserved u8 = 0 | 4 id u32 |
 *             8 length u32 | 12 reserved u32 = 0 | 16 digest[32] (SHA-256 of the chunk as the server
 *             recorded it; zero for MISSING) | 48 body: the chunk's bytes, or for MISSING the reason
 *
 * chunkSize and fileSize let the server refuse a request that means other bytes than it holds.
 */
import { StoreError } from '../errors.js';

export const WEIGHTS_PROTOCOL = 'orchard-weights/1';
export const WIRE_MAGIC = 0x4f57;
export const Kind = { Get: 1, Chunk: 2, Missing: 3 } as const;
export const REQUEST_FIXED_BYTES = 24;
export const ANSWER_HEADER_BYTES = 48;
export const MAX_KEY_BYTES = 255;
/** No answer body is larger: the largest chunk (layout.ts MAX_CHUNK) with room to spare. */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;

export class WireError extends StoreError {
  constructor(message: string) {
    super(message);
    this.name = 'WireError';
  }
}

export interface ChunkRequest {
  id: number;
  key: string;
  chunk: number;
  chunkSize: number;
  fileSize: number;
}

export interface AnswerHeader {
  kind: (typeof Kind)['Chunk' | 'Missing'];
  id: number;
  length: number;
  digest: Buffer;
}

export function encodeRequest(r: ChunkRequest): Buffer {
  const key = Buffer.from(r.key, 'utf8');
  if (key.length > MAX_KEY_BYTES) throw new WireError(`file key is ${key.length} bytes; at most ${MAX_KEY_BYTES}`);
  const out = Buffer.alloc(REQUEST_FIXED_BYTES + key.length);
  out.writeUInt16BE(WIRE_MAGIC, 0);
  out.writeUInt8(Kind.Get, 2);
  out.writeUInt8(key.length, 3);
  out.writeUInt32BE(r.id >>> 0, 4);
  out.writeUInt32BE(r.chunk, 8);
  out.writeUInt32BE(r.chunkSize, 12);
  out.writeBigUInt64BE(BigInt(r.fileSize), 16);
  key.copy(out, REQUEST_FIXED_BYTES);
  return out;
}

export function encodeAnswer(h: { kind: AnswerHeader['kind']; id: number; length: number; digest?: Uint8Array }): Buffer {
  if (h.length > MAX_BODY_BYTES) throw new WireError(`answer body of ${h.length} bytes is too large`);
  const out = Buffer.alloc(ANSWER_HEADER_BYTES);
  out.writeUInt16BE(WIRE_MAGIC, 0);
  out.writeUInt8(h.kind, 2);
  out.writeUInt32BE(h.id >>> 0, 4);
  out.writeUInt32BE(h.length, 8);
  if (h.digest) out.set(h.digest.subarray(0, 32), 16);
  return out;
}

/** Requests from a client's byte stream; `take` is called with each complete one. */
export class RequestDecoder {
  #buf: Buffer = Buffer.alloc(0);

  constructor(private readonly take: (r: ChunkRequest) => void) {}

  push(chunk: Buffer): void {
    this.#buf = this.#buf.length ? Buffer.concat([this.#buf, chunk]) : chunk;
    for (let used = this.#parse(this.#buf); used > 0; used = this.#parse(this.#buf)) this.#buf = this.#buf.subarray(used);
  }

  /** Consumes one request from the front of `buf` and returns its length, or 0 if incomplete. */
  #parse(buf: Buffer): number {
    if (buf.length < REQUEST_FIXED_BYTES) return 0;
    if (buf.readUInt16BE(0) !== WIRE_MAGIC || buf.readUInt8(2) !== Kind.Get) throw new WireError('bad request header (not an Orchard weights client)');
    const keyLen = buf.readUInt8(3);
    if (buf.length < REQUEST_FIXED_BYTES + keyLen) return 0;
    const fileSize = buf.readBigUInt64BE(16);
    if (fileSize > BigInt(Number.MAX_SAFE_INTEGER)) throw new WireError('file size out of range');
    this.take({
      id: buf.readUInt32BE(4),
      chunk: buf.readUInt32BE(8),
      chunkSize: buf.readUInt32BE(12),
      fileSize: Number(fileSize),
      key: buf.toString('utf8', REQUEST_FIXED_BYTES, REQUEST_FIXED_BYTES + keyLen),
    });
    return REQUEST_FIXED_BYTES + keyLen;
  }
}

/**
 * Answers from a server. A chunk body is copied once, from socket reads into its own buffer, which
 * is handed over whole (no concatenation of large buffers).
 */
export class AnswerDecoder {
  #head = Buffer.alloc(ANSWER_HEADER_BYTES);
  #headFill = 0;
  #header: AnswerHeader | undefined;
  #body: Buffer | undefined;
  #bodyFill = 0;

  constructor(private readonly take: (h: AnswerHeader, body: Buffer) => void) {}

  push(chunk: Buffer): void {
    let i = 0;
    while (i < chunk.length) {
      if (!this.#header) {
        const n = Math.min(ANSWER_HEADER_BYTES - this.#headFill, chunk.length - i);
        chunk.copy(this.#head, this.#headFill, i, i + n);
        this.#headFill += n;
        i += n;
        if (this.#headFill < ANSWER_HEADER_BYTES) return;
        this.#headFill = 0;
        const h = this.#head;
        const kind = h.readUInt8(2);
        if (h.readUInt16BE(0) !== WIRE_MAGIC || (kind !== Kind.Chunk && kind !== Kind.Missing)) throw new WireError('bad answer header (not an Orchard weights server)');
        const length = h.readUInt32BE(8);
        if (length > MAX_BODY_BYTES) throw new WireError(`answer body of ${length} bytes is too large`);
        this.#header = { kind: kind as AnswerHeader['kind'], id: h.readUInt32BE(4), length, digest: Buffer.from(h.subarray(16, 48)) };
        this.#body = Buffer.allocUnsafe(length);
        this.#bodyFill = 0;
      }
      const n = Math.min(this.#header.length - this.#bodyFill, chunk.length - i);
      chunk.copy(this.#body!, this.#bodyFill, i, i + n);
      this.#bodyFill += n;
      i += n;
      if (this.#bodyFill === this.#header.length) {
        const [header, body] = [this.#header, this.#body!];
        this.#header = undefined;
        this.#body = undefined;
        this.take(header, body);
      }
    }
  }
}
