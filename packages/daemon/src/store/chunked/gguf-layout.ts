/**
 * Where each tensor of a GGUF file lies, from a prefix of the file: what a node holding one pipeline
 * stage of a GGUF model must fetch. The metadata (a large vocabulary runs to tens of MiB) comes before
 * the tensor table, so the header's end is not known from a fixed prefix: the parser says how many
 * bytes it needs when the prefix ends inside the header. Pure: bytes in, extents out.
 */
import { GGML_TYPES } from '@orchard/engine/gguf';
import { StoreError } from '../errors.js';
import type { TensorExtent } from './safetensors-layout.js';

export interface GgufLayout {
  /** First byte of the data section (the header, the tensor table and the alignment padding before it). */
  headerEnd: number;
  /** Tensors by llama.cpp name, ascending by offset. */
  tensors: TensorExtent[];
}

/** The prefix ended inside the header: fetch at least this many bytes from 0 and parse again. */
export interface MoreBytes {
  more: number;
}

const MAGIC = 0x46554747;
/** Value types' fixed sizes (GGUF spec); 8 (string) and 9 (array) are variable. */
const FIXED: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

class Short extends Error {}

/**
 * Parses the header in `bytes` (the file's first bytes) of a `fileSize`-byte GGUF file. Returns
 * `{ more }` when `bytes` ends before the tensor table does; throws StoreError for a file that is
 * not a GGUF or whose tensors lie outside it.
 */
export function parseGgufLayout(bytes: Uint8Array, fileSize: number, label: string): GgufLayout | MoreBytes {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  const need = (n: number) => {
    if (pos + n > fileSize) throw new StoreError(`${label}: truncated GGUF header at byte ${pos} (the hub lists ${fileSize} bytes)`);
    if (pos + n > bytes.byteLength) throw new Short();
    const at = pos;
    pos += n;
    return at;
  };
  const u32 = () => view.getUint32(need(4), true);
  const u64 = (what: string) => {
    const v = view.getBigUint64(need(8), true);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new StoreError(`${label}: corrupt GGUF header, ${what} is ${v}`);
    return Number(v);
  };
  const skipString = () => need(u64('a string length'));
  const string = () => {
    const n = u64('a string length');
    const at = need(n);
    return new TextDecoder().decode(bytes.subarray(at, at + n));
  };
  const skipValue = (type: number): void => {
    if (type === 8) return void skipString();
    if (type === 9) {
      const item = u32();
      const n = u64('an array length');
      if (FIXED[item] !== undefined) return void need(n * FIXED[item]);
      for (let i = 0; i < n; i++) skipValue(item);
      return;
    }
    const size = FIXED[type];
    if (size === undefined) throw new StoreError(`${label}: GGUF metadata value type ${type} is unknown`);
    need(size);
  };
  try {
    if (u32() !== MAGIC) throw new StoreError(`${label}: not a GGUF file (no "GGUF" magic)`);
    const version = u32();
    if (version !== 2 && version !== 3) throw new StoreError(`${label}: GGUF version ${version} (2 or 3 are read)`);
    const nTensors = u64('the tensor count');
    const nKv = u64('the metadata count');
    let alignment = 32;
    for (let i = 0; i < nKv; i++) {
      const key = string();
      const type = u32();
      if (key === 'general.alignment' && type === 4) alignment = view.getUint32(need(4), true);
      else skipValue(type);
    }
    if (!alignment || alignment & (alignment - 1)) throw new StoreError(`${label}: general.alignment ${alignment} is not a power of two`);
    const raw: Array<{ name: string; elems: number; type: number; rel: number }> = [];
    for (let i = 0; i < nTensors; i++) {
      const name = string();
      const nd = u32();
      if (nd < 1 || nd > 4) throw new StoreError(`${label}: tensor ${name} has ${nd} dimensions`);
      let elems = 1;
      for (let d = 0; d < nd; d++) elems *= u64(`a dimension of ${name}`);
      raw.push({ name, elems, type: u32(), rel: u64(`the offset of ${name}`) });
    }
    const headerEnd = Math.ceil(pos / alignment) * alignment;
    const tensors = raw.map(({ name, elems, type, rel }) => {
      const t = GGML_TYPES[type as keyof typeof GGML_TYPES];
      if (!t) throw new StoreError(`${label}: tensor ${name} has ggml type ${type}, which Orchard does not load`);
      const start = headerEnd + rel;
      const end = start + Math.ceil(elems / t.blockElems) * t.blockBytes;
      if (end > fileSize) throw new StoreError(`${label}: tensor ${name} ends at byte ${end}, past the ${fileSize}-byte file`);
      return { name, start, end };
    });
    return { headerEnd, tensors: tensors.sort((a, b) => a.start - b.start) };
  } catch (err) {
    if (err instanceof Short) return { more: Math.min(fileSize, Math.max(bytes.byteLength * 4, pos + 1)) };
    throw err;
  }
}
