/**
 * One file from an HTTP server into the store: resumable (a `.partial` file and a Range request
 * pick up where a broken transfer stopped), bounded (an idle timeout turns a stalled server into an
 * error), and verified (SHA-256 for LFS files, git blob SHA-1 for small ones) before it is renamed
 * into place — a corrupt file never takes the place of a good one.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, rm, stat, truncate } from 'node:fs/promises';
import { dirname } from 'node:path';
import { ChecksumError, networkCause, StoreError } from './errors.js';

export interface DownloadOptions {
  url: string;
  dest: string;
  /** Expected size in bytes. */
  size: number;
  sha256?: string;
  gitSha1?: string;
  /** Names the file in errors, e.g. "org/model: model.safetensors". */
  label: string;
  headers?: Record<string, string>;
  fetch?: typeof fetch;
  signal?: AbortSignal;
  /** Abort a transfer that delivers no byte for this long. @default 30000 */
  idleTimeoutMs?: number;
  /** Attempts after a broken connection, each resuming where the last stopped. @default 4 */
  retries?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface DownloadResult {
  /** Bytes fetched over the network by this call (excludes bytes resumed from disk). */
  fetched: number;
  /** Offset the first request resumed from (0 for a fresh download). */
  resumedFrom: number;
}

async function sizeOf(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch {
    return 0;
  }
}

async function hashPrefix(hash: Hash, path: string, length: number): Promise<void> {
  if (length === 0) return;
  for await (const chunk of createReadStream(path, { start: 0, end: length - 1 })) hash.update(chunk as Buffer);
}

function newHash(opts: DownloadOptions): { hash: Hash; expected: string; kind: string } | undefined {
  if (opts.sha256) return { hash: createHash('sha256'), expected: opts.sha256.toLowerCase(), kind: 'sha256' };
  if (opts.gitSha1) {
    const hash = createHash('sha1');
    hash.update(`blob ${opts.size}\0`);
    return { hash, expected: opts.gitSha1.toLowerCase(), kind: 'git-sha1' };
  }
  return undefined;
}

export async function downloadFile(opts: DownloadOptions): Promise<DownloadResult> {
  const fetchFn = opts.fetch ?? fetch;
  const idleMs = opts.idleTimeoutMs ?? 30_000;
  const partial = `${opts.dest}.partial`;
  await mkdir(dirname(opts.dest), { recursive: true });

  let offset = await sizeOf(partial);
  if (offset > opts.size) {
    await truncate(partial, 0);
    offset = 0;
  }
  const resumedFrom = offset;
  let fetched = 0;
  let attemptsLeft = opts.retries ?? 4;

  while (offset < opts.size) {
    opts.signal?.throwIfAborted();
    const idle = new AbortController();
    let timer = setTimeout(() => idle.abort(new StoreError(`${opts.label}: no data for ${idleMs} ms`)), idleMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, idle.signal]) : idle.signal;
    try {
      const headers = { ...opts.headers, ...(offset > 0 ? { range: `bytes=${offset}-` } : {}) };
      const res = await fetchFn(opts.url, { headers, signal, redirect: 'follow' });
      if (res.status === 416 && offset > 0) {
        // The server says our partial already covers the file: let verification decide.
        await res.body?.cancel();
        break;
      }
      if (res.status !== 200 && res.status !== 206) {
        await res.body?.cancel();
        throw new StoreError(`${opts.label}: server answered HTTP ${res.status}${res.status === 401 || res.status === 403 ? (opts.headers?.authorization ? ' although HF_TOKEN is set (no access to this gated or private repo?)' : ': gated or private, set HF_TOKEN') : ''}`);
      }
      if (res.status === 200 && offset > 0) {
        // The server ignored the Range header: start over rather than append a second copy.
        await truncate(partial, 0);
        offset = 0;
      }
      const fh = await open(partial, offset > 0 ? 'a' : 'w');
      try {
        const reader = res.body!.getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          clearTimeout(timer);
          timer = setTimeout(() => idle.abort(new StoreError(`${opts.label}: no data for ${idleMs} ms`)), idleMs);
          if (offset + value.byteLength > opts.size) {
            throw new StoreError(`${opts.label}: server sent more than the expected ${opts.size} bytes`);
          }
          await fh.write(value);
          offset += value.byteLength;
          fetched += value.byteLength;
          opts.onProgress?.(offset, opts.size);
        }
      } finally {
        await fh.close();
      }
      if (offset < opts.size) throw new StoreError(`${opts.label}: connection closed at byte ${offset} of ${opts.size}`);
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? err;
      if (err instanceof StoreError && /more than the expected|HTTP 4\d\d/.test(err.message)) throw err;
      if (attemptsLeft-- <= 0) {
        const reason = signal.aborted ? (signal.reason as Error)?.message : err instanceof StoreError ? err.message : networkCause(err, opts.url);
        throw new StoreError(`${opts.label}: download failed after retries (${reason}); ${offset} bytes kept for resume`);
      }
      offset = await sizeOf(partial);
      await new Promise((r) => setTimeout(r, 200));
    } finally {
      clearTimeout(timer);
    }
  }

  const check = newHash(opts);
  const onDisk = await sizeOf(partial);
  if (onDisk !== opts.size) {
    await rm(partial, { force: true });
    throw new StoreError(`${opts.label}: expected ${opts.size} bytes, got ${onDisk}; the download was discarded`);
  }
  if (check) {
    await hashPrefix(check.hash, partial, onDisk);
    const actual = check.hash.digest('hex');
    if (actual !== check.expected) {
      await rm(partial, { force: true });
      throw new ChecksumError(opts.label, `${check.kind} ${check.expected}`, actual);
    }
  }
  await rename(partial, opts.dest);
  return { fetched, resumedFrom };
}
