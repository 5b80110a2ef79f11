import { writeFileSync } from 'node:fs';
import { SAFETENSORS_DTYPE_SIZES } from './format.js';

/** A tensor to write: raw little-endian bytes in `dtype`'s layout. */
export interface TensorToWrite {
  name: string;
  dtype: string;
  shape: number[];
  data: Uint8Array;
}

/**
 * Writes a safetensors file: u64 little-endian header length, JSON header (padded with spaces to a
 * multiple of 8 so tensor data is aligned), then the tensors back to back in the order given.
 */
export function writeSafetensors(path: string, tensors: TensorToWrite[], metadata: Record<string, string> = {}): void {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length) header.__metadata__ = metadata;
  let offset = 0;
  for (const t of tensors) {
    const size = SAFETENSORS_DTYPE_SIZES[t.dtype];
    if (size === undefined) throw new Error(`writeSafetensors: unknown dtype ${t.dtype} for ${t.name}`);
    const expected = t.shape.reduce((a, b) => a * b, 1) * size;
    if (expected !== t.data.byteLength) {
      throw new Error(`writeSafetensors: ${t.name} has ${t.data.byteLength} bytes, shape [${t.shape}] needs ${expected}`);
    }
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + expected] };
    offset += expected;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const headerBytes = Buffer.from(json, 'utf8');
  const out = Buffer.alloc(8 + headerBytes.length + offset);
  out.writeBigUInt64LE(BigInt(headerBytes.length), 0);
  headerBytes.copy(out, 8);
  let pos = 8 + headerBytes.length;
  for (const t of tensors) {
    out.set(t.data, pos);
    pos += t.data.byteLength;
  }
  writeFileSync(path, out);
}
