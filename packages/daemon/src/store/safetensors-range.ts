/**
 * Fetch only some tensors of a remote safetensors file with HTTP range requests, and write them as a
 * smaller, valid safetensors file. This is how a node that holds layers 20-39 of a model downloads
 * about half of it instead of all of it.
 */
import { mkdir, open, rename } from 'node:fs/promises';
import { dirname } from 'node:path';
import { StoreError } from './errors.js';

const MAX_HEADER = 100 * 1024 * 1024;
/** Ranges closer than this are fetched in one request: fewer round trips beat a few wasted bytes. */
const MERGE_GAP = 1 << 20;

interface TensorEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

export interface TensorSelection {
  /** Which layers' tensors to keep, plus the embedding and/or head. */
  layers: [number, number];
  embed: boolean;
  head: boolean;
  /** Tied embeddings: the head stage needs the embedding matrix as its LM head. */
  tiedEmbeddings?: boolean;
}

/** Tensor-name predicate for a pipeline stage, following Hugging Face's Llama-family names. */
export function stageTensorFilter(sel: TensorSelection): (name: string) => boolean {
  return (name) => {
    const m = /^model\.layers\.(\d+)\./.exec(name);
    if (m) {
      const i = Number(m[1]);
      return i >= sel.layers[0] && i < sel.layers[1];
    }
    if (name.startsWith('model.embed_tokens.')) return sel.embed || (sel.head && !!sel.tiedEmbeddings);
    if (name.startsWith('lm_head.') || name.startsWith('model.norm.')) return sel.head;
    // Anything else (rotary caches, vision towers...) is not needed by a text decoder stage.
    return false;
  };
}

async function rangeGet(
  url: string,
  start: number,
  endInclusive: number,
  headers: Record<string, string>,
  fetchFn: typeof fetch,
  label: string,
  timeoutMs: number,
): Promise<Uint8Array> {
  const res = await fetchFn(url, {
    headers: { ...headers, range: `bytes=${start}-${endInclusive}` },
    signal: AbortSignal.timeout(timeoutMs),
  }).catch((err: Error) => {
    throw new StoreError(`${label}: range request failed (${err.message})`);
  });
  if (res.status !== 206) {
    await res.body?.cancel();
    throw new StoreError(`${label}: server does not support range requests (HTTP ${res.status}); cannot fetch part of the file`);
  }
  const buf = new Uint8Array(await res.arrayBuffer());
  if (buf.byteLength !== endInclusive - start + 1) {
    throw new StoreError(`${label}: range ${start}-${endInclusive} returned ${buf.byteLength} bytes`);
  }
  return buf;
}

export interface PartialFetchOptions {
  url: string;
  dest: string;
  label: string;
  keep: (tensorName: string) => boolean;
  headers?: Record<string, string>;
  fetch?: typeof fetch;
  timeoutMs?: number;
}

export interface PartialFetchResult {
  tensors: string[];
  /** Bytes of tensor data fetched (plus the header). */
  fetchedBytes: number;
  /** Size of the remote file. */
  remoteBytes: number;
}

export async function fetchSafetensorsSubset(opts: PartialFetchOptions): Promise<PartialFetchResult> {
  const fetchFn = opts.fetch ?? fetch;
  const headers = opts.headers ?? {};
  const timeoutMs = opts.timeoutMs ?? 120_000;
  const lenBytes = await rangeGet(opts.url, 0, 7, headers, fetchFn, opts.label, timeoutMs);
  const headerLen = Number(new DataView(lenBytes.buffer, lenBytes.byteOffset, 8).getBigUint64(0, true));
  if (headerLen <= 1 || headerLen > MAX_HEADER) throw new StoreError(`${opts.label}: implausible safetensors header length ${headerLen}`);
  const headerBytes = await rangeGet(opts.url, 8, 8 + headerLen - 1, headers, fetchFn, opts.label, timeoutMs);
  let header: Record<string, TensorEntry | Record<string, string>>;
  try {
    header = JSON.parse(new TextDecoder().decode(headerBytes));
  } catch {
    throw new StoreError(`${opts.label}: safetensors header is not valid JSON`);
  }
  const dataStart = 8 + headerLen;
  const metadata = (header.__metadata__ as Record<string, string> | undefined) ?? {};
  const chosen = Object.entries(header)
    .filter(([name]) => name !== '__metadata__' && opts.keep(name))
    .map(([name, e]) => [name, e as TensorEntry] as const)
    .sort((a, b) => a[1].data_offsets[0] - b[1].data_offsets[0]);

  // New header: the chosen tensors packed contiguously, in their original order.
  const newHeader: Record<string, unknown> = { __metadata__: { ...metadata, orchard_partial: 'true' } };
  let cursor = 0;
  const placements: Array<{ src: [number, number]; dst: number }> = [];
  for (const [name, e] of chosen) {
    const [b, en] = e.data_offsets;
    if (!Array.isArray(e.data_offsets) || !(en >= b)) throw new StoreError(`${opts.label}: tensor ${name} has bad data_offsets`);
    newHeader[name] = { dtype: e.dtype, shape: e.shape, data_offsets: [cursor, cursor + (en - b)] };
    placements.push({ src: [b, en], dst: cursor });
    cursor += en - b;
  }
  let headerText = JSON.stringify(newHeader);
  headerText += ' '.repeat((8 - (headerText.length % 8)) % 8);
  const newHeaderBytes = new TextEncoder().encode(headerText);
  const outDataStart = 8 + newHeaderBytes.byteLength;

  // Merge nearby source ranges into few requests.
  const groups: Array<{ start: number; end: number; parts: typeof placements }> = [];
  for (const p of placements) {
    const last = groups[groups.length - 1];
    if (last && p.src[0] - last.end <= MERGE_GAP) {
      last.end = Math.max(last.end, p.src[1]);
      last.parts.push(p);
    } else groups.push({ start: p.src[0], end: p.src[1], parts: [p] });
  }

  await mkdir(dirname(opts.dest), { recursive: true });
  const tmp = `${opts.dest}.partial`;
  const fh = await open(tmp, 'w');
  let fetchedBytes = 8 + headerLen;
  try {
    const lenOut = Buffer.alloc(8);
    lenOut.writeBigUInt64LE(BigInt(newHeaderBytes.byteLength));
    await fh.write(lenOut, 0, 8, 0);
    await fh.write(newHeaderBytes, 0, newHeaderBytes.byteLength, 8);
    for (const g of groups) {
      if (g.end === g.start) continue;
      const bytes = await rangeGet(opts.url, dataStart + g.start, dataStart + g.end - 1, headers, fetchFn, opts.label, timeoutMs);
      fetchedBytes += bytes.byteLength;
      for (const p of g.parts) {
        const slice = bytes.subarray(p.src[0] - g.start, p.src[1] - g.start);
        await fh.write(slice, 0, slice.byteLength, outDataStart + p.dst);
      }
    }
  } finally {
    await fh.close();
  }
  await rename(tmp, opts.dest);
  const remote = await fetchFn(opts.url, { method: 'HEAD', headers, signal: AbortSignal.timeout(timeoutMs) }).catch(() => undefined);
  const remoteBytes = Number(remote?.headers.get('content-length') ?? NaN);
  return { tensors: chosen.map(([n]) => n), fetchedBytes, remoteBytes };
}
