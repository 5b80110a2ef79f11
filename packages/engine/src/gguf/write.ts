/**
 * GGUF v3 writer (the file format llama.cpp reads), for F32, F16 and the block types in GgmlType.
 *
 * Layout: magic "GGUF", version 3, tensor count (u64), metadata count (u64), the metadata key/values,
 * the tensor infos (name, dims, type, offset), padding to `general.alignment`, then the tensor data,
 * each tensor starting at a multiple of the alignment. Everything little-endian.
 *
 * Callers give shapes in row-major order, outermost first (as safetensors and PyTorch do: a linear
 * weight is [out, in]); GGUF lists dimensions innermost first, so the writer reverses them. Tensor data
 * is pulled one tensor at a time through `data()`, so a large model never sits in memory whole.
 */
import { closeSync, openSync, writeSync } from 'node:fs';

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT = 32;

/** GGUF metadata value type ids. */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;
export type GgufScalarType = Exclude<keyof typeof GgufValueType, 'ARRAY'>;

/** ggml tensor type ids this writer produces (block types: blocks along the innermost dimension). */
export const GgmlType = { F32: 0, F16: 1, Q4_0: 2, Q8_0: 8, Q4_K: 12, Q5_K: 13, Q6_K: 14, MXFP4: 39 } as const;
export type GgufTensorType = keyof typeof GgmlType;
/** [elements, bytes] per block. */
const GGML_BLOCK: Record<GgufTensorType, [number, number]> = {
  F32: [1, 4],
  F16: [1, 2],
  Q4_0: [32, 18],
  Q8_0: [32, 34],
  Q4_K: [256, 144],
  Q5_K: [256, 176],
  Q6_K: [256, 210],
  MXFP4: [32, 17],
};

export type GgufMetadataValue =
  | { type: GgufScalarType; value: number | bigint | boolean | string }
  | { type: 'ARRAY'; itemType: GgufScalarType; value: ReadonlyArray<number | bigint | boolean | string> };

export type GgufMetadata = Record<string, GgufMetadataValue>;

export interface GgufTensorSource {
  name: string;
  type: GgufTensorType;
  /** Row-major shape, outermost first (e.g. [out, in] for a linear weight). */
  shape: readonly number[];
  /** Raw little-endian element bytes (F32: 4 bytes, F16: IEEE half bits), produced when written. */
  data: () => Uint8Array;
}

/** Shorthands for metadata values. */
export const gguf = {
  u16: (value: number): GgufMetadataValue => ({ type: 'UINT16', value }),
  u32: (value: number): GgufMetadataValue => ({ type: 'UINT32', value }),
  i32: (value: number): GgufMetadataValue => ({ type: 'INT32', value }),
  f32: (value: number): GgufMetadataValue => ({ type: 'FLOAT32', value }),
  bool: (value: boolean): GgufMetadataValue => ({ type: 'BOOL', value }),
  str: (value: string): GgufMetadataValue => ({ type: 'STRING', value }),
  u64: (value: number | bigint): GgufMetadataValue => ({ type: 'UINT64', value }),
  arr: (itemType: GgufScalarType, value: ReadonlyArray<number | bigint | boolean | string>): GgufMetadataValue => ({
    type: 'ARRAY',
    itemType,
    value,
  }),
};

/** A growable little-endian byte buffer for the header part of the file. */
class ByteWriter {
  #buf = Buffer.alloc(1 << 16);
  length = 0;

  #ensure(n: number): void {
    if (this.length + n <= this.#buf.length) return;
    let size = this.#buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = Buffer.alloc(size);
    this.#buf.copy(next, 0, 0, this.length);
    this.#buf = next;
  }
  u8(v: number): void {
    this.#ensure(1);
    this.#buf.writeUInt8(v, this.length);
    this.length += 1;
  }
  u32(v: number): void {
    this.#ensure(4);
    this.#buf.writeUInt32LE(v, this.length);
    this.length += 4;
  }
  u64(v: number | bigint): void {
    this.#ensure(8);
    this.#buf.writeBigUInt64LE(BigInt(v), this.length);
    this.length += 8;
  }
  bytes(b: Uint8Array): void {
    this.#ensure(b.length);
    this.#buf.set(b, this.length);
    this.length += b.length;
  }
  string(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.bytes(b);
  }
  scalar(type: GgufScalarType, v: number | bigint | boolean | string, key: string): void {
    const need = (kind: string, ok: boolean) => {
      if (!ok) throw new Error(`GGUF metadata ${key}: ${JSON.stringify(typeof v === 'bigint' ? String(v) : v)} is not a valid ${kind}`);
    };
    this.#ensure(8);
    const b = this.#buf;
    const o = this.length;
    switch (type) {
      case 'UINT8':
      case 'INT8':
      case 'UINT16':
      case 'INT16':
      case 'UINT32':
      case 'INT32': {
        need(type, typeof v === 'number' && Number.isInteger(v));
        const n = v as number;
        if (type === 'UINT8') (need(type, n >= 0 && n <= 0xff), b.writeUInt8(n, o), (this.length += 1));
        else if (type === 'INT8') (need(type, n >= -128 && n <= 127), b.writeInt8(n, o), (this.length += 1));
        else if (type === 'UINT16') (need(type, n >= 0 && n <= 0xffff), b.writeUInt16LE(n, o), (this.length += 2));
        else if (type === 'INT16') (need(type, n >= -32768 && n <= 32767), b.writeInt16LE(n, o), (this.length += 2));
        else if (type === 'UINT32') (need(type, n >= 0 && n <= 0xffffffff), b.writeUInt32LE(n, o), (this.length += 4));
        else (need(type, n >= -(2 ** 31) && n < 2 ** 31), b.writeInt32LE(n, o), (this.length += 4));
        return;
      }
      case 'FLOAT32':
        need(type, typeof v === 'number');
        b.writeFloatLE(v as number, o);
        this.length += 4;
        return;
      case 'FLOAT64':
        need(type, typeof v === 'number');
        b.writeDoubleLE(v as number, o);
        this.length += 8;
        return;
      case 'BOOL':
        need(type, typeof v === 'boolean');
        b.writeUInt8(v ? 1 : 0, o);
        this.length += 1;
        return;
      case 'UINT64':
      case 'INT64':
        need(type, typeof v === 'bigint' || (typeof v === 'number' && Number.isSafeInteger(v)));
        if (type === 'UINT64') b.writeBigUInt64LE(BigInt(v as number), o);
        else b.writeBigInt64LE(BigInt(v as number), o);
        this.length += 8;
        return;
      case 'STRING':
        need(type, typeof v === 'string');
        this.string(v as string);
        return;
    }
  }
  padTo(alignment: number): void {
    while (this.length % alignment) this.u8(0);
  }
  get view(): Buffer {
    return this.#buf.subarray(0, this.length);
  }
}

export interface WriteGgufOptions {
  /** Data alignment in bytes; written as `general.alignment` when not the default 32. */
  alignment?: number;
}

/** Describes what was written: the byte offset of each tensor's data from the start of the file. */
export interface WrittenGguf {
  path: string;
  bytes: number;
  dataStart: number;
  tensors: { name: string; type: GgufTensorType; dims: number[]; offset: number; bytes: number }[];
}

/** Data bytes of a tensor of `type` and row-major `shape` (whole blocks along the innermost dimension). */
export function tensorDataBytes(type: GgufTensorType, shape: readonly number[]): number {
  const [blockElems, blockBytes] = GGML_BLOCK[type];
  return (shape.reduce((a, b) => a * b, 1) / blockElems) * blockBytes;
}

/** Writes a GGUF v3 file. Throws naming the tensor when its data does not match its shape and type. */
export function writeGguf(path: string, metadata: GgufMetadata, tensors: readonly GgufTensorSource[], options: WriteGgufOptions = {}): WrittenGguf {
  const alignment = options.alignment ?? GGUF_DEFAULT_ALIGNMENT;
  if (!Number.isInteger(alignment) || alignment <= 0 || alignment % 8) throw new Error(`GGUF alignment ${alignment} must be a positive multiple of 8`);
  const meta: GgufMetadata = { ...metadata };
  if (alignment !== GGUF_DEFAULT_ALIGNMENT) meta['general.alignment'] = gguf.u32(alignment);
  const names = new Set<string>();
  for (const t of tensors) {
    if (names.has(t.name)) throw new Error(`GGUF: tensor ${t.name} given twice`);
    names.add(t.name);
    if (!(t.type in GgmlType)) throw new Error(`GGUF: tensor ${t.name} has unsupported type ${t.type} (${Object.keys(GgmlType).join(', ')})`);
    if (t.shape.length < 1 || t.shape.length > 4 || !t.shape.every((d) => Number.isSafeInteger(d) && d > 0)) {
      throw new Error(`GGUF: tensor ${t.name} has invalid shape [${t.shape}] (1 to 4 positive dimensions)`);
    }
    const inner = t.shape[t.shape.length - 1];
    if (inner % GGML_BLOCK[t.type][0]) throw new Error(`GGUF: tensor ${t.name} is ${t.type} but its innermost dimension ${inner} is not a multiple of ${GGML_BLOCK[t.type][0]}`);
  }

  const h = new ByteWriter();
  h.u32(GGUF_MAGIC);
  h.u32(GGUF_VERSION);
  h.u64(tensors.length);
  h.u64(Object.keys(meta).length);
  for (const [key, v] of Object.entries(meta)) {
    h.string(key);
    if (v.type === 'ARRAY') {
      h.u32(GgufValueType.ARRAY);
      h.u32(GgufValueType[v.itemType]);
      h.u64(v.value.length);
      for (const item of v.value) h.scalar(v.itemType, item, key);
    } else {
      h.u32(GgufValueType[v.type]);
      h.scalar(v.type, v.value, key);
    }
  }
  const infos: WrittenGguf['tensors'] = [];
  let offset = 0;
  for (const t of tensors) {
    const dims = [...t.shape].reverse();
    const bytes = tensorDataBytes(t.type, t.shape);
    h.string(t.name);
    h.u32(dims.length);
    for (const d of dims) h.u64(d);
    h.u32(GgmlType[t.type]);
    h.u64(offset);
    infos.push({ name: t.name, type: t.type, dims, offset, bytes });
    offset += bytes;
    offset += (alignment - (offset % alignment)) % alignment;
  }
  h.padTo(alignment);
  const dataStart = h.length;

  const fd = openSync(path, 'w');
  try {
    writeAll(fd, h.view);
    let pos = 0;
    const zeros = new Uint8Array(alignment);
    for (let i = 0; i < tensors.length; i++) {
      const t = tensors[i];
      const data = t.data();
      if (data.byteLength !== infos[i].bytes) {
        throw new Error(`GGUF: tensor ${t.name} has ${data.byteLength} bytes of data, ${t.type} [${t.shape}] needs ${infos[i].bytes}`);
      }
      writeAll(fd, data);
      pos += data.byteLength;
      const pad = (alignment - (pos % alignment)) % alignment;
      if (pad && i < tensors.length - 1) {
        writeAll(fd, zeros.subarray(0, pad));
        pos += pad;
      }
    }
    return { path, bytes: dataStart + pos, dataStart, tensors: infos.map((t) => ({ ...t, offset: dataStart + t.offset })) };
  } finally {
    closeSync(fd);
  }
}

function writeAll(fd: number, data: Uint8Array): void {
  let done = 0;
  while (done < data.byteLength) done += writeSync(fd, data, done, data.byteLength - done);
}
