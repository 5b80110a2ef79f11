/**
 * Where each tensor of a safetensors file lies, from its header — what a node that needs some layers
 * must fetch — and the header a partly fetched file carries on disk: the same length as the original
 * (padded with spaces, which the format allows) and listing only the tensors present, so every byte
 * keeps its original offset and the engine reads the file as a smaller but valid checkpoint.
 */
import { StoreError } from '../errors.js';

/** The format's own limit on header size (Hugging Face's reader refuses more too). */
const MAX_HEADER = 100 * 1024 * 1024;

export interface TensorExtent {
  name: string;
  /** Absolute byte offsets in the file, [start, end). */
  start: number;
  end: number;
}

export interface SafetensorsLayout {
  /** Bytes before the tensor data: the 8-byte length plus the JSON header. */
  headerEnd: number;
  tensors: TensorExtent[];
  /** The parsed header, entries as the file has them. */
  header: Record<string, unknown>;
}

/** The header's end (8 + its length) from the file's first 8 bytes. */
export function headerEnd(first8: Uint8Array, fileSize: number, label: string): number {
  if (first8.byteLength < 8 || fileSize < 8) throw new StoreError(`${label}: too short for a safetensors file (${fileSize} bytes)`);
  const n = Number(new DataView(first8.buffer, first8.byteOffset, 8).getBigUint64(0, true));
  if (n < 2 || n > MAX_HEADER || 8 + n > fileSize) {
    throw new StoreError(`${label}: implausible safetensors header length ${n} for a ${fileSize}-byte file`);
  }
  return 8 + n;
}

/**
 * Parses and checks the header against the size the hub lists: every tensor inside the data area,
 * its bytes matching its shape's extent being the engine's business, and the data ending exactly at
 * the end of the file (the layout check a chunk fetched without a whole-file hash relies on).
 */
export function parseLayout(bytes: Uint8Array, fileSize: number, label: string): SafetensorsLayout {
  const end = headerEnd(bytes, fileSize, label);
  if (bytes.byteLength < end) throw new StoreError(`${label}: header needs ${end} bytes, got ${bytes.byteLength}`);
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, end)));
  } catch {
    throw new StoreError(`${label}: safetensors header is not valid JSON`);
  }
  if (!header || typeof header !== 'object' || Array.isArray(header)) throw new StoreError(`${label}: safetensors header is not a JSON object`);
  const tensors: TensorExtent[] = [];
  let dataEnd = 0;
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const off = (entry as { data_offsets?: unknown } | null)?.data_offsets;
    if (!Array.isArray(off) || off.length !== 2 || !off.every((v) => Number.isSafeInteger(v) && v >= 0) || off[0] > off[1]) {
      throw new StoreError(`${label}: tensor ${name} has bad data_offsets ${JSON.stringify(off)}`);
    }
    if (end + off[1] > fileSize) throw new StoreError(`${label}: tensor ${name} ends at byte ${end + off[1]}, past the ${fileSize}-byte file`);
    tensors.push({ name, start: end + off[0], end: end + off[1] });
    dataEnd = Math.max(dataEnd, off[1]);
  }
  if (end + dataEnd !== fileSize) {
    throw new StoreError(`${label}: the header's tensors end at byte ${end + dataEnd} but the hub lists ${fileSize} bytes`);
  }
  tensors.sort((a, b) => a.start - b.start);
  return { headerEnd: end, tensors, header };
}

/** Byte ranges a node needs: the header, then every tensor `keep` selects. */
export function neededRanges(layout: SafetensorsLayout, keep: (name: string) => boolean): Array<[number, number]> {
  return [[0, layout.headerEnd], ...layout.tensors.filter((t) => keep(t.name)).map((t) => [t.start, t.end] as [number, number])];
}

/** The on-disk header of a file holding only `present` tensors: exactly `layout.headerEnd` bytes. */
export function partialHeader(layout: SafetensorsLayout, present: ReadonlySet<string>): Uint8Array {
  const kept: Record<string, unknown> = {};
  for (const [name, entry] of Object.entries(layout.header)) if (name === '__metadata__' || present.has(name)) kept[name] = entry;
  const json = new TextEncoder().encode(JSON.stringify(kept));
  const room = layout.headerEnd - 8;
  // Dropping entries only shortens the JSON, unless the original was padded oddly; never truncate.
  if (json.byteLength > room) throw new StoreError(`partial header (${json.byteLength} bytes) does not fit the original ${room}`);
  const out = new Uint8Array(layout.headerEnd).fill(0x20);
  new DataView(out.buffer).setBigUint64(0, BigInt(room), true);
  out.set(json, 8);
  return out;
}
