/**
 * Reads safetensors files by byte range: the header is parsed and validated once, then only the
 * bytes of the tensors (or the row/column blocks of tensors) a shard needs are read with positioned
 * reads. `bytesRead` counts tensor data actually read, so tests can check what a shard costs.
 */
import { closeSync, fstatSync, read, readSync } from 'node:fs';
import { promisify } from 'node:util';
import { basename } from 'node:path';
import { ModelFormatError } from '../errors.js';
import { openModelFile } from '../open-model-file.js';
import { SAFETENSORS_DTYPE_SIZES, type TensorInfo } from './format.js';

/** Headers larger than this are not plausible (HF caps them at 100 MB too). */
const MAX_HEADER_BYTES = 100 * 1024 * 1024;

export class SafetensorsFile {
  readonly path: string;
  readonly tensors: ReadonlyMap<string, TensorInfo>;
  readonly metadata: Record<string, string>;
  /** Tensor data bytes read so far (headers not counted). */
  bytesRead = 0;
  #fd: number;
  #dataStart: number;

  private constructor(path: string, fd: number, tensors: Map<string, TensorInfo>, metadata: Record<string, string>, dataStart: number) {
    this.path = path;
    this.#fd = fd;
    this.tensors = tensors;
    this.metadata = metadata;
    this.#dataStart = dataStart;
  }

  /** Opens and validates `path`; throws ModelFormatError naming the file (and tensor) on any defect. */
  static open(path: string): SafetensorsFile {
    const name = basename(path);
    const fd = openModelFile(path);
    try {
      const size = fstatSync(fd).size;
      if (size < 8) throw new ModelFormatError(`${name}: truncated, ${size} bytes is shorter than the 8-byte header length`, path);
      const lenBuf = Buffer.alloc(8);
      readSync(fd, lenBuf, 0, 8, 0);
      const headerLen = lenBuf.readBigUInt64LE(0);
      if (headerLen > BigInt(MAX_HEADER_BYTES)) throw new ModelFormatError(`${name}: corrupt header, claims ${headerLen} bytes`, path);
      const hl = Number(headerLen);
      if (8 + hl > size) throw new ModelFormatError(`${name}: truncated, header needs ${hl} bytes but the file has ${size - 8} after the length`, path);
      const headerBuf = Buffer.alloc(hl);
      readSync(fd, headerBuf, 0, hl, 8);
      const { tensors, metadata } = parseHeader(name, path, headerBuf, size - 8 - hl);
      return new SafetensorsFile(path, fd, tensors, metadata, 8 + hl);
    } catch (err) {
      closeSync(fd);
      throw err;
    }
  }

  /**
   * A file known by its header alone (the JSON after the 8-byte length, e.g. fetched by a range
   * request before the download): checked exactly as `open` checks it, against the file's size;
   * its tensors can be described and planned, not read.
   */
  static fromHeader(path: string, header: Uint8Array, fileSize: number): SafetensorsFile {
    const { tensors, metadata } = parseHeader(basename(path), path, header, fileSize - 8 - header.byteLength);
    return new SafetensorsFile(path, -1, tensors, metadata, 8 + header.byteLength);
  }

  /** Where a tensor's bytes lie in the file: [offset, offset + bytes). */
  tensorRange(tensor: string): { dtype: string; shape: number[]; offset: number; bytes: number } {
    const t = this.info(tensor);
    return { dtype: t.dtype, shape: t.shape, offset: this.#dataStart + t.dataOffsets[0], bytes: t.dataOffsets[1] - t.dataOffsets[0] };
  }

  /** The tensor's header entry, or a ModelFormatError naming file and tensor. */
  info(tensor: string): TensorInfo {
    const t = this.tensors.get(tensor);
    if (!t) throw new ModelFormatError(`${basename(this.path)}: missing tensor ${tensor}`, this.path, tensor);
    return t;
  }

  /**
   * Reads rows [rowStart, rowEnd) and columns [colStart, colEnd) of a 1-D or 2-D tensor into `dest`
   * (row-major, dense). Whole rows are one read; a column block costs one read per row.
   * A 1-D tensor is treated as a single row.
   */
  readBlock(tensor: string, dest: Uint8Array, rowStart: number, rowEnd: number, colStart: number, colEnd: number): void {
    for (const [offset, length, position] of this.#ranges(tensor, dest, rowStart, rowEnd, colStart, colEnd)) {
      this.#read(dest, offset, length, position, tensor);
    }
  }

  /** `readBlock` without blocking the event loop (reads run on libuv's thread pool). */
  async readBlockAsync(tensor: string, dest: Uint8Array, rowStart: number, rowEnd: number, colStart: number, colEnd: number, signal?: AbortSignal): Promise<void> {
    for (const [offset, length, position] of this.#ranges(tensor, dest, rowStart, rowEnd, colStart, colEnd)) {
      signal?.throwIfAborted();
      let done = 0;
      while (done < length) {
        const { bytesRead } = await readAsync(this.#fd, dest, offset + done, length - done, position + done);
        if (bytesRead === 0) throw new ModelFormatError(`${basename(this.path)}: truncated while reading tensor ${tensor}`, this.path, tensor);
        done += bytesRead;
      }
      this.bytesRead += length;
    }
  }

  /** [destination offset, length, file position] of each contiguous piece of a block. */
  #ranges(tensor: string, dest: Uint8Array, rowStart: number, rowEnd: number, colStart: number, colEnd: number): [number, number, number][] {
    const t = this.info(tensor);
    const el = SAFETENSORS_DTYPE_SIZES[t.dtype];
    const [rows, cols] = t.shape.length === 1 ? [1, t.shape[0]] : [t.shape[0], t.shape.slice(1).reduce((a, b) => a * b, 1)];
    if (rowStart < 0 || rowEnd > rows || rowStart > rowEnd || colStart < 0 || colEnd > cols || colStart > colEnd) {
      throw new Error(`${basename(this.path)}: block rows [${rowStart},${rowEnd}) cols [${colStart},${colEnd}) outside ${tensor} [${rows},${cols}]`);
    }
    const rowBytes = (colEnd - colStart) * el;
    const need = (rowEnd - rowStart) * rowBytes;
    if (dest.byteLength < need) throw new Error(`readBlock: destination has ${dest.byteLength} bytes, ${tensor} block needs ${need}`);
    const base = this.#dataStart + t.dataOffsets[0];
    if (colStart === 0 && colEnd === cols) return [[0, need, base + rowStart * cols * el]];
    const ranges: [number, number, number][] = [];
    for (let r = rowStart; r < rowEnd; r++) ranges.push([(r - rowStart) * rowBytes, rowBytes, base + (r * cols + colStart) * el]);
    return ranges;
  }

  #read(dest: Uint8Array, offset: number, length: number, position: number, tensor: string): void {
    let done = 0;
    while (done < length) {
      const n = readSync(this.#fd, dest, offset + done, length - done, position + done);
      if (n === 0) throw new ModelFormatError(`${basename(this.path)}: truncated while reading tensor ${tensor}`, this.path, tensor);
      done += n;
    }
    this.bytesRead += length;
  }

  close(): void {
    if (this.#fd >= 0) closeSync(this.#fd);
    this.#fd = -1;
  }
}

const readAsync = promisify(read);

/** A header's JSON: every entry validated against the `dataLen` bytes that follow it. */
function parseHeader(name: string, path: string, headerBuf: Uint8Array, dataLen: number): { tensors: Map<string, TensorInfo>; metadata: Record<string, string> } {
  if (dataLen < 0) throw new ModelFormatError(`${name}: truncated, header needs ${headerBuf.byteLength} bytes but the file is shorter`, path);
  let header: unknown;
  try {
    header = JSON.parse(Buffer.from(headerBuf.buffer, headerBuf.byteOffset, headerBuf.byteLength).toString('utf8'));
  } catch (err) {
    throw new ModelFormatError(`${name}: corrupt header, not valid JSON (${(err as Error).message})`, path);
  }
  if (!header || typeof header !== 'object' || Array.isArray(header)) {
    throw new ModelFormatError(`${name}: corrupt header, expected a JSON object`, path);
  }
  const tensors = new Map<string, TensorInfo>();
  let metadata: Record<string, string> = {};
  for (const [tname, entry] of Object.entries(header as Record<string, unknown>)) {
    if (tname === '__metadata__') {
      metadata = (entry ?? {}) as Record<string, string>;
      continue;
    }
    tensors.set(tname, validateEntry(name, path, tname, entry, dataLen));
  }
  return { tensors, metadata };
}

function validateEntry(file: string, path: string, tensor: string, entry: unknown, dataLen: number): TensorInfo {
  const bad = (why: string) => new ModelFormatError(`${file}: tensor ${tensor}: ${why}`, path, tensor);
  if (!entry || typeof entry !== 'object') throw bad('corrupt header entry');
  const e = entry as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
  if (typeof e.dtype !== 'string' || !(e.dtype in SAFETENSORS_DTYPE_SIZES)) throw bad(`unknown dtype ${JSON.stringify(e.dtype)}`);
  if (!Array.isArray(e.shape) || !e.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) throw bad(`corrupt shape ${JSON.stringify(e.shape)}`);
  const off = e.data_offsets;
  if (!Array.isArray(off) || off.length !== 2 || !off.every((d) => Number.isSafeInteger(d) && d >= 0) || off[0] > off[1]) {
    throw bad(`corrupt data_offsets ${JSON.stringify(off)}`);
  }
  const shape = e.shape as number[];
  const expected = shape.reduce((a, b) => a * b, 1) * SAFETENSORS_DTYPE_SIZES[e.dtype];
  if (expected !== off[1] - off[0]) {
    throw bad(`shape [${shape}] × ${e.dtype} is ${expected} bytes but data_offsets span ${off[1] - off[0]}`);
  }
  if (off[1] > dataLen) throw bad(`truncated: data ends at byte ${off[1]} but the file holds ${dataLen} bytes of data`);
  return { dtype: e.dtype, shape, dataOffsets: [off[0], off[1]] };
}
