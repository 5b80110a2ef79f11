/**
 * One store file as chunks: the bytes at their original offsets in a sparse file of the full size,
 * and beside it (in `.orchard-chunks/`) a log of the chunks verified so far with their SHA-256, so
 * a node serves any verified chunk of a file it holds only partly, and a restarted download fetches
 * nothing it already verified.
 *
 * Durability: chunk bytes are written first; their log lines are appended only after a datasync of
 * the data file, in batches. A crash loses at most the last batch's records (those chunks are
 * fetched again), never records a chunk whose bytes did not reach the disk.
 *
 * A partly fetched safetensors file carries a header listing only the tensors present (see
 * safetensors-layout.ts); the original header is kept in `<name>.header` so peers are served the
 * hub's bytes and the file is byte-identical to the hub's once complete.
 */
import { createHash } from 'node:crypto';
import { mkdir, open, readFile, rm, writeFile, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { ChecksumError, diskError, StoreError } from '../errors.js';
import { chunkCount, chunkSizeFor, chunkSpan } from './layout.js';

export const CHUNK_DIR = '.orchard-chunks';
const LOG_MAGIC = 'orchard-chunks 1';
export const DIGEST_BYTES = 32;
/** Log records are flushed at least this often while chunks arrive. */
const FLUSH_MS = 250;

/** Identifies a file pod-wide by content: `sha256:<hex>` (LFS) or `git:<sha1>` (small files). */
export function contentKey(f: { sha256?: string; gitSha1?: string }): string | undefined {
  if (f.sha256) return `sha256:${f.sha256.toLowerCase()}`;
  if (f.gitSha1) return `git:${f.gitSha1.toLowerCase()}`;
  return undefined;
}

export function chunkDigest(bytes: Uint8Array): Buffer {
  return createHash('sha256').update(bytes).digest();
}

export interface ChunkedFileInfo {
  /** Content key (contentKey()). */
  key: string;
  size: number;
  sha256?: string;
  gitSha1?: string;
  /** Names the file in errors, e.g. "org/model: model.safetensors". */
  label: string;
}

export class ChunkedFile {
  readonly path: string;
  readonly info: ChunkedFileInfo;
  readonly chunkSize: number;
  readonly count: number;
  readonly #logPath: string;
  readonly #headerPath: string;
  /** digests[i]: SHA-256 of chunk i once it is verified and on disk. */
  readonly #digests: Array<Buffer | undefined>;
  #verifiedCount = 0;
  #wholeVerified = false;
  /** The hub's header bytes while the file on disk carries a partial one. */
  #originalHeader: Buffer | undefined;
  #fh: FileHandle;
  #pending: string[] = [];
  #flushing: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  private constructor(path: string, info: ChunkedFileInfo, fh: FileHandle) {
    this.path = path;
    this.info = info;
    this.chunkSize = chunkSizeFor(info.size);
    this.count = chunkCount(info.size, this.chunkSize);
    this.#digests = new Array(this.count);
    this.#logPath = join(dirname(path), CHUNK_DIR, `${basename(path)}.log`);
    this.#headerPath = join(dirname(path), CHUNK_DIR, `${basename(path)}.header`);
    this.#fh = fh;
  }

  /** Opens (creating a sparse file of the full size if needed) and reads back what was verified. */
  static async open(path: string, info: ChunkedFileInfo): Promise<ChunkedFile> {
    await mkdir(join(dirname(path), CHUNK_DIR), { recursive: true }).catch((err: unknown) => {
      throw diskError(err, join(dirname(path), CHUNK_DIR), 'creating') ?? err;
    });
    const fh = await open(path, 'r+')
      .catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return open(path, 'w+');
        throw err;
      })
      .catch((err: NodeJS.ErrnoException) => {
        throw diskError(err, path) ?? new StoreError(`${info.label}: cannot open ${path} (${err.code ?? err.message})`);
      });
    const f = new ChunkedFile(path, info, fh);
    try {
      if ((await fh.stat()).size !== info.size) await fh.truncate(info.size).catch((err: unknown) => Promise.reject(diskError(err, path) ?? err));
      await f.#readLog().catch((err: unknown) => Promise.reject(diskError(err, f.#logPath) ?? err));
      f.#originalHeader = await readFile(f.#headerPath).catch(() => undefined);
    } catch (err) {
      await fh.close();
      throw err;
    }
    return f;
  }

  get key(): string {
    return this.info.key;
  }

  /** Closed (or discarded after a failed check): open it again through the registry. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Chunks verified and on disk. */
  get verifiedCount(): number {
    return this.#verifiedCount;
  }

  /** Every chunk present. */
  get complete(): boolean {
    return this.#verifiedCount === this.count;
  }

  /** The whole file matched the hub's hash (so every digest here derives from the hub's bytes). */
  get wholeVerified(): boolean {
    return this.#wholeVerified;
  }

  has(i: number): boolean {
    return this.#digests[i] !== undefined;
  }

  digest(i: number): Buffer | undefined {
    return this.#digests[i];
  }

  verified(): number[] {
    const out: number[] = [];
    for (let i = 0; i < this.count; i++) if (this.#digests[i]) out.push(i);
    return out;
  }

  span(i: number): [number, number] {
    return chunkSpan(i, this.info.size, this.chunkSize);
  }

  /** Stores chunk `i`, whose bytes the caller has checked against `digest`. */
  async writeChunk(i: number, bytes: Uint8Array, digest: Uint8Array): Promise<void> {
    this.#assertOpen();
    const [start, end] = this.span(i);
    if (bytes.byteLength !== end - start) throw new StoreError(`${this.info.label}: chunk ${i} has ${bytes.byteLength} bytes, expected ${end - start}`);
    if (this.#digests[i]) return;
    let done = 0;
    while (done < bytes.byteLength) {
      // A sparse file takes its blocks as chunks land: a full disk shows here, named with the path.
      const { bytesWritten } = await this.#fh.write(bytes, done, bytes.byteLength - done, start + done).catch((err: unknown) => Promise.reject(diskError(err, this.path) ?? err));
      done += bytesWritten;
    }
    this.#digests[i] = Buffer.from(digest);
    this.#verifiedCount++;
    this.#pending.push(`${i} ${Buffer.from(digest).toString('hex')}`);
    this.#timer ??= setTimeout(() => void this.flush().catch(() => undefined), FLUSH_MS);
  }

  /** The hub's bytes of chunk `i` (the original header, even while the file carries a partial one). */
  async readChunk(i: number): Promise<Buffer> {
    this.#assertOpen();
    if (!this.#digests[i]) throw new StoreError(`${this.info.label}: chunk ${i} is not here`);
    const [start, end] = this.span(i);
    const out = Buffer.allocUnsafe(end - start);
    let done = 0;
    while (done < out.byteLength) {
      const { bytesRead } = await this.#fh.read(out, done, out.byteLength - done, start + done);
      if (bytesRead === 0) throw new StoreError(`${this.info.label}: file ends inside chunk ${i}`);
      done += bytesRead;
    }
    const h = this.#originalHeader;
    if (h && start < h.byteLength) h.copy(out, 0, start, Math.min(end, h.byteLength));
    return out;
  }

  /** Reads the hub's bytes [start, end) from verified chunks (the header for a layout). */
  async readRange(start: number, end: number): Promise<Buffer> {
    const parts: Buffer[] = [];
    for (let i = Math.floor(start / this.chunkSize); i * this.chunkSize < end; i++) {
      const [s] = this.span(i);
      const chunk = await this.readChunk(i);
      parts.push(chunk.subarray(Math.max(0, start - s), Math.min(chunk.byteLength, end - s)));
    }
    return Buffer.concat(parts);
  }

  /** Puts `header` (a partial header, same length as the original) on disk, keeping the original aside. */
  async writeHeader(header: Uint8Array): Promise<void> {
    this.#assertOpen();
    if (!this.#originalHeader) {
      const original = await this.readRange(0, header.byteLength);
      await writeFile(this.#headerPath, original);
      this.#originalHeader = original;
    }
    await this.#fh.write(header, 0, header.byteLength, 0);
  }

  /** Puts the hub's header back (the file is about to be complete). */
  async restoreHeader(): Promise<void> {
    this.#assertOpen();
    const h = this.#originalHeader;
    if (!h) return;
    await this.#fh.write(h, 0, h.byteLength, 0);
    await this.#fh.datasync();
    this.#originalHeader = undefined;
    await rm(this.#headerPath, { force: true });
  }

  /**
   * Checks the complete file against the hub's hash. On a mismatch every record is dropped (which
   * chunk is wrong cannot be told) and a ChecksumError names the file.
   */
  async verifyWhole(o: { trusted?: boolean } = {}): Promise<void> {
    this.#assertOpen();
    if (this.#wholeVerified) return;
    if (!this.complete) throw new StoreError(`${this.info.label}: cannot verify an incomplete file`);
    await this.restoreHeader();
    // `trusted`: every chunk matched a digest from a node that verified the whole file itself.
    if (!o.trusted) await this.#hashWhole();
    await this.flush();
    this.#pending.push('verified');
    await this.flush();
    this.#wholeVerified = true;
  }

  /**
   * A complete file that predates the chunk log (an older store): one read computes every chunk's
   * digest and the whole-file hash; if that matches the hub's, all chunks count as verified.
   * Returns whether it did.
   */
  async adopt(): Promise<boolean> {
    this.#assertOpen();
    if (this.#verifiedCount > 0) return false;
    const { sha256, gitSha1, size } = this.info;
    const expected = (sha256 ?? gitSha1)?.toLowerCase();
    if (!expected) return false;
    const whole = createHash(sha256 ? 'sha256' : 'sha1');
    if (!sha256) whole.update(`blob ${size}\0`);
    const digests: Buffer[] = [];
    for (let i = 0; i < this.count; i++) {
      const [start, end] = this.span(i);
      const buf = Buffer.allocUnsafe(end - start);
      const { bytesRead } = await this.#fh.read(buf, 0, buf.byteLength, start);
      if (bytesRead !== buf.byteLength) return false;
      whole.update(buf);
      digests.push(chunkDigest(buf));
    }
    if (whole.digest('hex') !== expected) return false;
    digests.forEach((d, i) => {
      this.#digests[i] = d;
      this.#pending.push(`${i} ${d.toString('hex')}`);
    });
    this.#verifiedCount = this.count;
    this.#pending.push('verified');
    await this.flush();
    this.#wholeVerified = true;
    return true;
  }

  async #hashWhole(): Promise<void> {
    const { sha256, gitSha1, size } = this.info;
    const hash = createHash(sha256 ? 'sha256' : 'sha1');
    if (!sha256) hash.update(`blob ${size}\0`);
    const buf = Buffer.allocUnsafe(Math.min(this.chunkSize * 4, Math.max(size, 1)));
    for (let pos = 0; pos < size; ) {
      const { bytesRead } = await this.#fh.read(buf, 0, Math.min(buf.byteLength, size - pos), pos);
      if (bytesRead === 0) break;
      hash.update(buf.subarray(0, bytesRead));
      pos += bytesRead;
    }
    const actual = hash.digest('hex');
    const expected = (sha256 ?? gitSha1)?.toLowerCase();
    if (expected && actual !== expected) {
      await this.#discard();
      throw new ChecksumError(this.info.label, `${sha256 ? 'sha256' : 'git-sha1'} ${expected}`, actual);
    }
  }

  /**
   * Removes the file and its records and closes it: a file that failed its whole-file check must not
   * stay where the engine would load it.
   */
  async #discard(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#pending = [];
    await this.#flushing.catch(() => undefined);
    this.#digests.fill(undefined);
    this.#verifiedCount = 0;
    this.#closed = true;
    await this.#fh.close();
    await Promise.all([this.path, this.#logPath, this.#headerPath].map((p) => rm(p, { force: true })));
  }

  /** Makes every chunk written so far durable and recorded. */
  flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const lines = this.#pending;
    this.#pending = [];
    this.#flushing = this.#flushing.then(async () => {
      if (lines.length === 0) return;
      try {
        await this.#fh.datasync();
        const log = await open(this.#logPath, 'a');
        try {
          await log.write(`${lines.join('\n')}\n`);
        } finally {
          await log.close();
        }
      } catch (err) {
        throw diskError(err, this.#logPath) ?? err;
      }
    });
    return this.#flushing;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    await this.flush().catch(() => undefined);
    this.#closed = true;
    await this.#fh.close();
  }

  #assertOpen(): void {
    if (this.#closed) throw new StoreError(`${this.info.label}: chunk file is closed`);
  }

  #logHead(): string {
    return `${LOG_MAGIC} ${this.info.key} ${this.info.size} ${this.chunkSize}`;
  }

  async #readLog(): Promise<void> {
    const text = await readFile(this.#logPath, 'utf8').catch(() => '');
    const lines = text.split('\n');
    if (lines[0] !== this.#logHead()) {
      // A different file (or revision) under this name, or no log yet: nothing here is verified.
      await writeFile(this.#logPath, `${this.#logHead()}\n`);
      await rm(this.#headerPath, { force: true });
      return;
    }
    // The last line may be torn by a crash: it is dropped (its chunk is fetched again), and the log
    // rewritten so the next record starts on a line of its own.
    const records = lines.slice(1, -1);
    if (!text.endsWith('\n')) await writeFile(this.#logPath, `${[lines[0], ...records].join('\n')}\n`);
    for (const line of records) {
      if (line === 'verified') {
        this.#wholeVerified = this.complete;
        continue;
      }
      const m = /^(\d+) ([0-9a-f]{64})$/.exec(line);
      if (!m) continue;
      const i = Number(m[1]);
      if (i >= this.count || this.#digests[i]) continue;
      this.#digests[i] = Buffer.from(m[2], 'hex');
      this.#verifiedCount++;
    }
  }
}
