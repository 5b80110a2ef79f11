/**
 * This node's chunked files by content key: one open ChunkedFile per path (the download writing it
 * and the server reading it share it), which chunks are being fetched right now, and a wait for a
 * chunk in flight — so a peer asking for a chunk this node is still fetching is answered as soon as
 * it is verified instead of going to the hub for it.
 */
import { fromRuns, toRuns, type Runs } from './layout.js';
import { ChunkedFile, type ChunkedFileInfo } from './chunk-file.js';

/** What a node has of one file, as peers see it. */
export interface Availability {
  key: string;
  size: number;
  chunkSize: number;
  /** Chunks verified here. */
  verified: Runs;
  /** SHA-256 (hex) of each verified chunk, in the order of `verified`. */
  digests: string[];
  /** Chunks being fetched here now (asked for them, this node's server answers once they arrive). */
  fetching: Runs;
  /** The whole file matched the hub's hash here. */
  complete: boolean;
}

/** Where a file with a given key lies on this node, if anywhere (the store's manifests know). */
export type Locate = (key: string) => Promise<{ path: string; info: ChunkedFileInfo } | undefined>;

export class ChunkRegistry {
  readonly #locate: Locate;
  readonly #byPath = new Map<string, Promise<ChunkedFile>>();
  readonly #byKey = new Map<string, ChunkedFile>();
  /** key → chunk → callbacks waiting for it. */
  readonly #fetching = new Map<string, Map<number, Array<(ok: boolean) => void>>>();

  constructor(locate: Locate = async () => undefined) {
    this.#locate = locate;
  }

  /** The one open instance for `path`. */
  open(path: string, info: ChunkedFileInfo): Promise<ChunkedFile> {
    let p = this.#byPath.get(path);
    if (!p) {
      p = ChunkedFile.open(path, info).then((f) => {
        this.#byKey.set(f.key, f);
        return f;
      });
      p.catch(() => this.#byPath.delete(path));
      this.#byPath.set(path, p);
    }
    return p.then((f) => {
      if (f.closed) {
        this.#byPath.delete(path);
        if (this.#byKey.get(f.key) === f) this.#byKey.delete(f.key);
        return this.open(path, info);
      }
      if (f.key !== info.key || f.info.size !== info.size) {
        // Another revision under the same name: the old instance is closed and replaced.
        this.#byPath.delete(path);
        this.#byKey.delete(f.key);
        return f.close().then(() => this.open(path, info));
      }
      return f;
    });
  }

  /** The file with `key`, opened from the store if it is there and not open yet. */
  async lookup(key: string): Promise<ChunkedFile | undefined> {
    const open = this.#byKey.get(key);
    if (open && !open.closed) return open;
    const where = await this.#locate(key).catch(() => undefined);
    return where ? this.open(where.path, where.info) : undefined;
  }

  /** This node starts fetching `chunks` of `key`. */
  fetching(key: string, chunks: Iterable<number>): void {
    let m = this.#fetching.get(key);
    if (!m) this.#fetching.set(key, (m = new Map()));
    for (const c of chunks) if (!m.has(c)) m.set(c, []);
  }

  /** Chunk `chunk` of `key` arrived (ok) or will not come from this node after all. */
  settle(key: string, chunk: number, ok: boolean): void {
    const m = this.#fetching.get(key);
    const waiters = m?.get(chunk);
    if (!waiters) return;
    m!.delete(chunk);
    if (m!.size === 0) this.#fetching.delete(key);
    for (const w of waiters) w(ok);
  }

  isFetching(key: string, chunk: number): boolean {
    return this.#fetching.get(key)?.has(chunk) ?? false;
  }

  /** Resolves true once `chunk` is verified here, false if it will not be (or after `timeoutMs`). */
  whenReady(key: string, chunk: number, timeoutMs: number): Promise<boolean> {
    const f = this.#byKey.get(key);
    if (f?.has(chunk)) return Promise.resolve(true);
    const waiters = this.#fetching.get(key)?.get(chunk);
    if (!waiters) return Promise.resolve(false);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        const k = waiters.indexOf(done);
        if (k >= 0) waiters.splice(k, 1);
        resolve(false);
      }, timeoutMs);
      const done = (ok: boolean) => {
        clearTimeout(timer);
        resolve(ok);
      };
      waiters.push(done);
    });
  }

  availability(f: ChunkedFile): Availability {
    const verified = toRuns(f.verified());
    const digests = fromRuns(verified, f.count).map((i) => f.digest(i)!.toString('hex'));
    const inFlight = [...(this.#fetching.get(f.key)?.keys() ?? [])].filter((c) => !f.has(c));
    return { key: f.key, size: f.info.size, chunkSize: f.chunkSize, verified, digests, fetching: toRuns(inFlight), complete: f.wholeVerified };
  }

  async closeAll(): Promise<void> {
    const files = await Promise.allSettled([...this.#byPath.values()]);
    this.#byPath.clear();
    this.#byKey.clear();
    for (const m of this.#fetching.values()) for (const ws of m.values()) for (const w of ws) w(false);
    this.#fetching.clear();
    await Promise.all(files.map((r) => (r.status === 'fulfilled' ? r.value.close() : undefined)));
  }
}
