/**
 * Content-addressed chunks: how nodes of a pod share model bytes so that the hub is downloaded from
 * once per pod. A file is cut into fixed 4 MiB chunks, each named by a CIDv1 (raw codec, SHA-256),
 * so a chunk fetched from any peer is verified by its name alone; the whole file is then checked
 * against the hub's SHA-256 as well.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { CID } from 'multiformats/cid';
import * as raw from 'multiformats/codecs/raw';
import { create as createDigest } from 'multiformats/hashes/digest';
import { ChecksumError, StoreError } from './errors.js';

export const CHUNK_SIZE = 4 * 1024 * 1024;
const SHA256_CODE = 0x12;

export interface ChunkRef {
  offset: number;
  length: number;
  /** CIDv1 string (base32). */
  cid: string;
}

export interface FileManifest {
  size: number;
  sha256: string;
  chunks: ChunkRef[];
}

export function chunkCid(bytes: Uint8Array): string {
  const digest = createHash('sha256').update(bytes).digest();
  return CID.createV1(raw.code, createDigest(SHA256_CODE, digest)).toString();
}

/** Reads a file once, producing its whole-file SHA-256 and the CID of every chunk. */
export async function manifestForFile(path: string, chunkSize = CHUNK_SIZE): Promise<FileManifest> {
  const whole = createHash('sha256');
  const chunks: ChunkRef[] = [];
  const fh = await open(path, 'r');
  try {
    const { size } = await fh.stat();
    const buf = Buffer.alloc(Math.min(chunkSize, Math.max(size, 1)));
    for (let offset = 0; offset < size; offset += chunkSize) {
      const length = Math.min(chunkSize, size - offset);
      const view = buf.subarray(0, length);
      await fh.read(view, 0, length, offset);
      whole.update(view);
      chunks.push({ offset, length, cid: chunkCid(view) });
    }
    return { size, sha256: whole.digest('hex'), chunks };
  } finally {
    await fh.close();
  }
}

/** Something that can hand out chunks: a peer in the pod, or this node's own store. */
export interface ChunkSource {
  readonly name: string;
  /** The manifest of a file this source holds, looked up by the file's SHA-256, or undefined. */
  manifest(sha256: string, signal?: AbortSignal): Promise<FileManifest | undefined>;
  chunk(cid: string, signal?: AbortSignal): Promise<Uint8Array>;
}

export interface PeerDownloadResult {
  /** Bytes received from each source, by name. */
  bytesBySource: Record<string, number>;
}

/**
 * Assemble a file from peers. Chunks are spread over the sources that hold the file; a chunk that
 * fails verification or transfer is retried from the next source. Throws if no source can complete
 * the file, so the caller can fall back to the hub.
 */
export async function downloadFromPeers(
  sha256: string,
  size: number,
  sources: ChunkSource[],
  dest: string,
  label: string,
  options: { signal?: AbortSignal; onProgress?: (done: number, total: number) => void } = {},
): Promise<PeerDownloadResult> {
  const holders: Array<{ source: ChunkSource; manifest: FileManifest }> = [];
  for (const source of sources) {
    const m = await source.manifest(sha256, options.signal).catch(() => undefined);
    if (m && m.size === size && m.sha256 === sha256) holders.push({ source, manifest: m });
  }
  if (holders.length === 0) throw new StoreError(`${label}: no peer holds this file`);
  const chunks = holders[0].manifest.chunks;
  await mkdir(dirname(dest), { recursive: true });
  const tmp = `${dest}.peer-partial`;
  const fh = await open(tmp, 'w');
  const bytesBySource: Record<string, number> = {};
  let done = 0;
  try {
    for (let i = 0; i < chunks.length; i++) {
      const ref = chunks[i];
      let ok = false;
      for (let k = 0; k < holders.length && !ok; k++) {
        const { source } = holders[(i + k) % holders.length];
        try {
          const bytes = await source.chunk(ref.cid, options.signal);
          if (bytes.byteLength !== ref.length || chunkCid(bytes) !== ref.cid) continue;
          await fh.write(bytes, 0, bytes.byteLength, ref.offset);
          bytesBySource[source.name] = (bytesBySource[source.name] ?? 0) + bytes.byteLength;
          done += bytes.byteLength;
          options.onProgress?.(done, size);
          ok = true;
        } catch {
          /* try the next holder */
        }
      }
      if (!ok) throw new StoreError(`${label}: no peer delivered chunk ${i} (${ref.cid}) intact`);
    }
  } catch (err) {
    await fh.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await fh.close();
  const whole = createHash('sha256');
  for await (const piece of createReadStream(tmp)) whole.update(piece as Buffer);
  const actual = whole.digest('hex');
  if (actual !== sha256) {
    await rm(tmp, { force: true });
    throw new ChecksumError(label, `sha256 ${sha256}`, actual);
  }
  await rename(tmp, dest);
  return { bytesBySource };
}
