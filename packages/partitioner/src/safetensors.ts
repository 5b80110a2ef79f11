import { InputError } from './errors.js';

/**
 * safetensors header parsing, pure: the loader hands in the bytes. A file starts with a
 * little-endian u64 header length, then that many bytes of JSON mapping tensor names to
 * {dtype, shape, data_offsets: [begin, end]}.
 */

/** Headers larger than this are not safetensors files (the format caps them at 100 MB). */
export const MAX_HEADER_BYTES = 100 * 1024 * 1024;

export function headerLength(first8: Uint8Array, file: string): number {
  if (first8.length < 8) throw new InputError('safetensors', file, 'is shorter than 8 bytes');
  const n = new DataView(first8.buffer, first8.byteOffset, 8).getBigUint64(0, true);
  if (n === 0n || n > BigInt(MAX_HEADER_BYTES)) throw new InputError('safetensors', file, `has an implausible header length ${n}`);
  return Number(n);
}

export interface TensorSize {
  name: string;
  bytes: number;
}

/** Tensor names and byte sizes from a header's JSON bytes. */
export function parseSafetensorsHeader(json: Uint8Array, file: string): TensorSize[] {
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder().decode(json));
  } catch (err) {
    throw new InputError('safetensors', file, `header is not valid JSON (${(err as Error).message})`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) throw new InputError('safetensors', file, 'header is not a JSON object');
  const out: TensorSize[] = [];
  for (const [name, info] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') continue;
    const offsets = (info as { data_offsets?: unknown })?.data_offsets;
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((x) => Number.isInteger(x) && x >= 0) || offsets[1] < offsets[0]) {
      throw new InputError('safetensors', `${file}: ${name}.data_offsets`, 'must be [begin, end] byte offsets');
    }
    out.push({ name, bytes: offsets[1] - offsets[0] });
  }
  return out;
}

/** Sums sizes per tensor name over several files (shards). */
export function tensorSizes(files: { file: string; header: Uint8Array }[]): TensorSize[] {
  return files.flatMap((f) => parseSafetensorsHeader(f.header, f.file)).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
