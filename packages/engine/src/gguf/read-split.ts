/**
 * Split GGUF sets: the `NAME-00001-of-00003.gguf` parts that llama.cpp's gguf-split and
 * convert_hf_to_gguf.py (`--split-max-size`, `--split-max-tensors`) write, and that every large model on
 * the hub comes as (the hub caps a file at 50 GB). Each part is a whole GGUF file: the first holds all the
 * metadata, every part holds `split.no` (u16, from 0), `split.count` (u16) and `split.tensors.count`
 * (i32, the set's total) and its own tensors with offsets into its own data section. The first part may
 * hold no tensors at all (`--no-tensor-first-split`).
 *
 * Joined here into one header whose tensors each say which file they lie in, so the loader and the
 * planner see one model (readGgufFile; joinGgufSplits is the join alone, given the reader of one file).
 */
import { basename, dirname, join } from 'node:path';
import { ModelFormatError } from '../errors.js';
import { readOneGgufFile, type GgufHeader, type GgufTensorInfo } from './read.js';

const PART_NAME = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;

/** The file name of part `no` (from 0) of `count`, as llama.cpp's llama_split_path writes it. */
export function ggufSplitName(prefix: string, no: number, count: number): string {
  return `${prefix}-${String(no + 1).padStart(5, '0')}-of-${String(count).padStart(5, '0')}.gguf`;
}

/** A split part's name read back: its prefix, part number (from 0) and count; null for any other name. */
export function parseGgufSplitName(file: string): { prefix: string; no: number; count: number } | null {
  const m = PART_NAME.exec(file);
  if (!m) return null;
  const no = Number(m[2]) - 1;
  const count = Number(m[3]);
  return no >= 0 && no < count ? { prefix: m[1], no, count } : null;
}

/** The names of every part of the set `file` belongs to (in order), or null when it is not named as a part. */
export function ggufSplitNames(file: string): string[] | null {
  const p = parseGgufSplitName(file);
  return p && Array.from({ length: p.count }, (_, i) => ggufSplitName(p.prefix, i, p.count));
}

function u16Meta(h: GgufHeader, key: string, file: string, path: string): number | undefined {
  const v = h.metadata.get(key);
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new ModelFormatError(`${file}: metadata ${key} must be a non-negative integer, got ${String(v)}`, path, key);
  return v;
}

/**
 * `first`, the header of the file at `path`, joined with the other parts of its set when its metadata
 * says it is one (`split.count` > 1); a whole file comes back as it is. Parts are found by llama.cpp's
 * naming next to `path`, whichever part `path` is; each must say the same count and its own number.
 */
export function joinGgufSplits(path: string, first: GgufHeader, readPart: (path: string) => GgufHeader): GgufHeader {
  const file = basename(path);
  const count = u16Meta(first, 'split.count', file, path) ?? 0;
  if (count <= 1) return first;
  const no = u16Meta(first, 'split.no', file, path) ?? 0;
  const named = parseGgufSplitName(file);
  if (!named || named.count !== count || named.no !== no) {
    throw new ModelFormatError(
      `${file}: is part ${no + 1} of a ${count}-part split GGUF, but its name does not end in -${String(no + 1).padStart(5, '0')}-of-${String(count).padStart(5, '0')}.gguf, so the other parts cannot be found (keep the names gguf-split gave them)`,
      path,
      'split.no',
    );
  }
  const dir = dirname(path);
  const headers: GgufHeader[] = [];
  for (let i = 0; i < count; i++) {
    const partFile = ggufSplitName(named.prefix, i, count);
    const partPath = join(dir, partFile);
    let h: GgufHeader;
    if (i === no) h = first;
    else {
      try {
        h = readPart(partPath);
      } catch (err) {
        const missing = err instanceof ModelFormatError && /^cannot open .*: ENOENT$/.test(err.message);
        if (!missing) throw err;
        throw new ModelFormatError(`${file}: part ${i + 1} of this ${count}-part split GGUF is missing (${partFile}); every part must be in ${dir}`, partPath);
      }
    }
    const hCount = u16Meta(h, 'split.count', partFile, partPath);
    const hNo = u16Meta(h, 'split.no', partFile, partPath);
    if (hCount !== count || hNo !== i) {
      throw new ModelFormatError(`${partFile}: says it is part ${hNo === undefined ? '?' : hNo + 1} of ${hCount ?? '?'}, expected part ${i + 1} of ${count} (a part of another set?)`, partPath, 'split.no');
    }
    headers.push(h);
  }

  const head = headers[0];
  const headPath = join(dir, ggufSplitName(named.prefix, 0, count));
  const tensors = new Map<string, GgufTensorInfo>();
  for (const h of headers) {
    for (const [name, t] of h.tensors) {
      if (tensors.has(name)) throw new ModelFormatError(`${basename(t.file)}: tensor ${name} is also in ${basename(tensors.get(name)!.file)}`, t.file, name);
      tensors.set(name, t);
    }
  }
  const total = head.metadata.get('split.tensors.count');
  if (typeof total === 'number' && total !== tensors.size) {
    throw new ModelFormatError(`${basename(headPath)}: split.tensors.count says ${total} tensors, the ${count} parts hold ${tensors.size}`, headPath, 'split.tensors.count');
  }
  return {
    version: head.version,
    metadata: head.metadata,
    tensors,
    alignment: head.alignment,
    dataStart: head.dataStart,
    fileBytes: headers.reduce((a, h) => a + h.fileBytes, 0),
    parts: headers.map((h) => h.parts[0]),
  };
}

/**
 * The GGUF model at `path`: one file's header, or, when the file is a part of a split set, the set's
 * headers joined into one.
 */
export function readGgufFile(path: string): GgufHeader {
  return joinGgufSplits(path, readOneGgufFile(path), readOneGgufFile);
}
