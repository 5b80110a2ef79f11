/**
 * Writing a GGUF as a split set, the way llama.cpp's gguf-split (and convert_hf_to_gguf.py's
 * `--split-max-tensors` / `--split-max-size` / `--no-tensor-first-split`) writes it: tensors go to the
 * parts in order, a new part starting when the tensor count or the (aligned) data size would pass the
 * limit; the first part carries all the metadata, every part `split.no`, `split.count` and
 * `split.tensors.count`; parts are named NAME-00001-of-0000N.gguf. The split reader is read-split.ts.
 */
import { basename, dirname, join } from 'node:path';
import { ggufSplitName } from './read-split.js';
import { GGUF_DEFAULT_ALIGNMENT, gguf, tensorDataBytes, writeGguf, type GgufMetadata, type GgufTensorSource, type WriteGgufOptions, type WrittenGguf } from './write.js';

export interface GgufSplitOptions {
  /** At most this many tensors per part (gguf-split's default mode: 128). */
  maxTensors?: number;
  /** At most this many data bytes per part (a soft limit: a bigger tensor gets a part of its own). */
  maxBytes?: number;
  /** The first part holds only the metadata (gguf-split --no-tensor-first-split). */
  noTensorFirst?: boolean;
}

/** Which tensors (by index) go to which part: gguf-split's rule. */
export function splitGroups(tensorBytes: readonly number[], o: GgufSplitOptions): number[][] {
  if (o.maxTensors === undefined && o.maxBytes === undefined) throw new Error('GGUF split: give maxTensors or maxBytes');
  const groups: number[][] = [[]];
  if (o.noTensorFirst) groups.push([]);
  let size = 0;
  tensorBytes.forEach((bytes, i) => {
    const padded = Math.ceil(bytes / GGUF_DEFAULT_ALIGNMENT) * GGUF_DEFAULT_ALIGNMENT;
    const cur = groups[groups.length - 1];
    const full =
      o.maxBytes !== undefined ? size + padded > o.maxBytes && cur.length > 0 : i > 0 && cur.length > 0 && cur.length >= o.maxTensors!;
    if (full) {
      groups.push([i]);
      size = padded;
    } else {
      cur.push(i);
      size += padded;
    }
  });
  return groups;
}

/** Writes `tensors` as a split set named after `path` ("X.gguf" → "X-00001-of-0000N.gguf" beside it). */
export function writeGgufSplit(path: string, metadata: GgufMetadata, tensors: readonly GgufTensorSource[], split: GgufSplitOptions, options: WriteGgufOptions = {}): WrittenGguf[] {
  const groups = splitGroups(
    tensors.map((t) => tensorDataBytes(t.type, t.shape)),
    split,
  );
  const prefix = join(dirname(path), basename(path).replace(/\.gguf$/i, ''));
  const count = groups.length;
  return groups.map((group, no) => {
    const splitKeys: GgufMetadata = {
      'split.no': gguf.u16(no),
      'split.count': gguf.u16(count),
      'split.tensors.count': gguf.i32(tensors.length),
    };
    const part = join(dirname(prefix), ggufSplitName(basename(prefix), no, count));
    // Only the first part carries the model's metadata (and so its alignment); the others use the default.
    return no === 0
      ? writeGguf(part, { ...metadata, ...splitKeys }, group.map((i) => tensors[i]), options)
      : writeGguf(part, splitKeys, group.map((i) => tensors[i]));
  });
}
