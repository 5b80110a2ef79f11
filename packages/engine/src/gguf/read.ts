/**
 * GGUF v3 reader (the file format llama.cpp reads): header, metadata key/values, tensor infos and
 * the data offset, read through a file descriptor without loading the tensor data. Tensors are read
 * later by byte range (see read-model.ts), so a shard reads only what it holds.
 *
 * Layout: magic "GGUF", version (u32, 2 or 3), tensor count (u64), metadata count (u64), metadata
 * (key string, value type u32, value), tensor infos (name, n_dims u32, dims u64 innermost first,
 * ggml type u32, offset u64 relative to the data section), padding to `general.alignment` (default
 * 32), the data section. Strings are u64 length + UTF-8 bytes. Everything little-endian.
 */
import { closeSync, fstatSync, readSync } from 'node:fs';
import { basename } from 'node:path';
import { ModelFormatError } from '../errors.js';
import { openModelFile } from '../open-model-file.js';

/** ggml tensor types this reader knows the size of. */
export const GGML_TYPES = {
  0: { name: 'F32', blockElems: 1, blockBytes: 4 },
  1: { name: 'F16', blockElems: 1, blockBytes: 2 },
  2: { name: 'Q4_0', blockElems: 32, blockBytes: 18 },
  8: { name: 'Q8_0', blockElems: 32, blockBytes: 34 },
  12: { name: 'Q4_K', blockElems: 256, blockBytes: 144 },
  13: { name: 'Q5_K', blockElems: 256, blockBytes: 176 },
  14: { name: 'Q6_K', blockElems: 256, blockBytes: 210 },
  39: { name: 'MXFP4', blockElems: 32, blockBytes: 17 },
  30: { name: 'BF16', blockElems: 1, blockBytes: 2 },
} as const;
export type GgmlTypeName = (typeof GGML_TYPES)[keyof typeof GGML_TYPES]['name'];
/** Tensor types a GGUF model may use and still load (what `orchard pull ORG/NAME` picks among). */
export const GGUF_LOADABLE_TYPES: readonly GgmlTypeName[] = Object.values(GGML_TYPES).map((t) => t.name);

export type GgufValue = number | bigint | boolean | string | GgufValue[];

export interface GgufTensorInfo {
  name: string;
  /** Dimensions as GGUF lists them, innermost first ([in, out] for a linear weight). */
  dims: number[];
  /** Row-major shape, outermost first ([out, in]): `dims` reversed. */
  shape: number[];
  type: GgmlTypeName;
  /** Absolute byte offset of the tensor's data in the file. */
  offset: number;
  /** Data bytes. */
  bytes: number;
  /** The file holding the data: the GGUF itself, or one part of a split set. */
  file: string;
}

export interface GgufHeader {
  version: number;
  metadata: Map<string, GgufValue>;
  tensors: Map<string, GgufTensorInfo>;
  alignment: number;
  dataStart: number;
  /** Bytes of all the files together. */
  fileBytes: number;
  /** The files, first to last: one for a whole GGUF, each part of a split set (llama.cpp's gguf-split). */
  parts: { path: string; bytes: number }[];
}

const MAGIC = 0x46554747;
const MAX_STRING = 1 << 30;
const MAX_ARRAY = 1 << 28;

/** Buffered little-endian reads from a file descriptor, for the header part of the file. */
class Cursor {
  #buf = Buffer.alloc(1 << 20);
  #start = 0; // file position of #buf[0]
  #len = 0;
  pos = 0;
  constructor(
    readonly fd: number,
    readonly size: number,
    readonly file: string,
    readonly path: string,
  ) {}

  #need(n: number, what: string): number {
    if (this.pos + n > this.size) {
      throw new ModelFormatError(`${this.file}: truncated GGUF header while reading ${what} at byte ${this.pos} (file has ${this.size} bytes)`, this.path);
    }
    if (this.pos < this.#start || this.pos + n > this.#start + this.#len) {
      if (n > this.#buf.length) this.#buf = Buffer.alloc(n);
      this.#start = this.pos;
      this.#len = 0;
      const want = Math.min(this.#buf.length, this.size - this.pos);
      while (this.#len < want) {
        const got = readSync(this.fd, this.#buf, this.#len, want - this.#len, this.#start + this.#len);
        if (got === 0) break;
        this.#len += got;
      }
    }
    const at = this.pos - this.#start;
    this.pos += n;
    return at;
  }
  u8(what: string): number {
    return this.#buf.readUInt8(this.#need(1, what));
  }
  i8(what: string): number {
    return this.#buf.readInt8(this.#need(1, what));
  }
  u16(what: string): number {
    return this.#buf.readUInt16LE(this.#need(2, what));
  }
  i16(what: string): number {
    return this.#buf.readInt16LE(this.#need(2, what));
  }
  u32(what: string): number {
    return this.#buf.readUInt32LE(this.#need(4, what));
  }
  i32(what: string): number {
    return this.#buf.readInt32LE(this.#need(4, what));
  }
  f32(what: string): number {
    return this.#buf.readFloatLE(this.#need(4, what));
  }
  f64(what: string): number {
    return this.#buf.readDoubleLE(this.#need(8, what));
  }
  u64(what: string): bigint {
    return this.#buf.readBigUInt64LE(this.#need(8, what));
  }
  i64(what: string): bigint {
    return this.#buf.readBigInt64LE(this.#need(8, what));
  }
  /** A u64 that must fit a JS number. */
  count(what: string, max: number): number {
    const v = this.u64(what);
    if (v > BigInt(max)) throw new ModelFormatError(`${this.file}: corrupt GGUF header, ${what} is ${v} (more than ${max})`, this.path);
    return Number(v);
  }
  string(what: string): string {
    const n = this.count(`length of ${what}`, MAX_STRING);
    const at = this.#need(n, what);
    return this.#buf.toString('utf8', at, at + n);
  }
}

function readValue(c: Cursor, type: number, key: string): GgufValue {
  switch (type) {
    case 0:
      return c.u8(key);
    case 1:
      return c.i8(key);
    case 2:
      return c.u16(key);
    case 3:
      return c.i16(key);
    case 4:
      return c.u32(key);
    case 5:
      return c.i32(key);
    case 6:
      return c.f32(key);
    case 7:
      return c.u8(key) !== 0;
    case 8:
      return c.string(key);
    case 9: {
      const itemType = c.u32(`${key} item type`);
      const n = c.count(`${key} array length`, MAX_ARRAY);
      const out: GgufValue[] = new Array(n);
      for (let i = 0; i < n; i++) out[i] = readValue(c, itemType, key);
      return out;
    }
    case 10: {
      const v = c.u64(key);
      return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
    }
    case 11: {
      const v = c.i64(key);
      return v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(v) : v;
    }
    case 12:
      return c.f64(key);
    default:
      throw new ModelFormatError(`${c.file}: metadata ${key} has unknown GGUF value type ${type}`, c.path, key);
  }
}

/** Parses the header of the GGUF file open on `fd`; every defect is a ModelFormatError naming file and field. */
export function readGgufHeader(fd: number, path: string): GgufHeader {
  const file = basename(path);
  const size = fstatSync(fd).size;
  const c = new Cursor(fd, size, file, path);
  const magic = c.u32('magic');
  if (magic !== MAGIC) throw new ModelFormatError(`${file}: not a GGUF file (magic 0x${magic.toString(16)}, expected "GGUF")`, path);
  const version = c.u32('version');
  if (version !== 2 && version !== 3) throw new ModelFormatError(`${file}: GGUF version ${version} is not supported (2 or 3)`, path);
  const nTensors = c.count('tensor count', 1 << 20);
  const nKv = c.count('metadata count', 1 << 20);
  const metadata = new Map<string, GgufValue>();
  for (let i = 0; i < nKv; i++) {
    const key = c.string('metadata key');
    const type = c.u32(`type of ${key}`);
    metadata.set(key, readValue(c, type, key));
  }
  const alignment = metadata.get('general.alignment') ?? 32;
  if (typeof alignment !== 'number' || !Number.isInteger(alignment) || alignment <= 0 || alignment & (alignment - 1)) {
    throw new ModelFormatError(`${file}: general.alignment ${String(alignment)} is not a power of two`, path, 'general.alignment');
  }

  const raw: { name: string; dims: number[]; typeId: number; rel: number }[] = [];
  for (let i = 0; i < nTensors; i++) {
    const name = c.string('tensor name');
    const nd = c.u32(`dimension count of ${name}`);
    if (nd < 1 || nd > 4) throw new ModelFormatError(`${file}: tensor ${name} has ${nd} dimensions (1 to 4)`, path, name);
    const dims: number[] = [];
    for (let d = 0; d < nd; d++) dims.push(c.count(`dimension ${d} of ${name}`, Number.MAX_SAFE_INTEGER));
    const typeId = c.u32(`type of ${name}`);
    const rel = c.count(`offset of ${name}`, Number.MAX_SAFE_INTEGER);
    raw.push({ name, dims, typeId, rel });
  }
  const dataStart = Math.ceil(c.pos / alignment) * alignment;

  const tensors = new Map<string, GgufTensorInfo>();
  for (const { name, dims, typeId, rel } of raw) {
    const t = GGML_TYPES[typeId as keyof typeof GGML_TYPES];
    if (!t) throw new ModelFormatError(`${file}: tensor ${name} has ggml type ${typeId}, which Orchard does not load (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, MXFP4)`, path, name);
    if (tensors.has(name)) throw new ModelFormatError(`${file}: tensor ${name} is listed twice`, path, name);
    if (dims[0] % t.blockElems) {
      throw new ModelFormatError(`${file}: tensor ${name} is ${t.name} with ${dims[0]} columns, not a multiple of its ${t.blockElems}-element blocks`, path, name);
    }
    const elems = dims.reduce((a, b) => a * b, 1);
    const bytes = (elems / t.blockElems) * t.blockBytes;
    if (rel % alignment) throw new ModelFormatError(`${file}: tensor ${name} data offset ${rel} is not aligned to ${alignment}`, path, name);
    const offset = dataStart + rel;
    if (offset + bytes > size) {
      throw new ModelFormatError(`${file}: truncated, tensor ${name} needs bytes ${offset}..${offset + bytes} but the file has ${size}`, path, name);
    }
    tensors.set(name, { name, dims, shape: [...dims].reverse(), type: t.name, offset, bytes, file: path });
  }
  return { version, metadata, tensors, alignment, dataStart, fileBytes: size, parts: [{ path, bytes: size }] };
}

/** Opens and parses one file's GGUF header (closing the file again); a split set's part alone (see read-split.ts). */
export function readOneGgufFile(path: string): GgufHeader {
  const fd = openModelFile(path);
  try {
    return readGgufHeader(fd, path);
  } finally {
    closeSync(fd);
  }
}

/** Whether `path` names a GGUF file (by extension): the engine's loaders take it in place of a model directory. */
export function isGgufPath(path: string): boolean {
  return /\.gguf$/i.test(path);
}
