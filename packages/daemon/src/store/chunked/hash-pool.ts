/**
 * SHA-256 of chunks on worker threads, so checking what arrives keeps up with a cable faster than
 * one core hashes (a Thunderbolt 5 link moves 5-8 GB/s; one core hashes 1-2 GB/s). A chunk's buffer
 * is moved to a worker and back, not copied. Small chunks are hashed where they are (a round trip to
 * a worker costs more than they do).
 */
import { createHash } from 'node:crypto';
import os from 'node:os';
import { Worker } from 'node:worker_threads';

/** Below this a chunk is hashed on the calling thread. */
const INLINE_BYTES = 256 * 1024;

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
parentPort.on('message', ({ id, buffer, offset, length }) => {
  const digest = createHash('sha256').update(new Uint8Array(buffer, offset, length)).digest();
  parentPort.postMessage({ id, buffer, digest }, [buffer]);
});
`;

interface Job {
  worker: Worker;
  resolve: (r: { digest: Buffer; bytes: Buffer }) => void;
  reject: (err: Error) => void;
  offset: number;
  length: number;
}

export class HashPool {
  readonly #size: number;
  readonly #workers: Worker[] = [];
  readonly #jobs = new Map<number, Job>();
  /** Jobs outstanding per worker: each new chunk goes to the least busy one. */
  readonly #load = new Map<Worker, number>();
  #next = 1;

  constructor(size = Math.max(1, Math.min(4, os.availableParallelism() - 1))) {
    this.#size = size;
  }

  /**
   * The chunk's SHA-256, and its bytes back (the same memory: the buffer passed in may be detached
   * while a worker has it, so use the returned one).
   */
  digest(bytes: Buffer): Promise<{ digest: Buffer; bytes: Buffer }> {
    // A buffer that shares its memory (Node's small-buffer pool, a slice) cannot be moved.
    const movable = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer;
    if (bytes.byteLength < INLINE_BYTES || !movable) return Promise.resolve({ digest: createHash('sha256').update(bytes).digest(), bytes });
    const worker = this.#pick();
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#jobs.set(id, { worker, resolve, reject, offset: bytes.byteOffset, length: bytes.byteLength });
      this.#setLoad(worker, (this.#load.get(worker) ?? 0) + 1);
      worker.postMessage({ id, buffer: bytes.buffer, offset: bytes.byteOffset, length: bytes.byteLength }, [bytes.buffer as ArrayBuffer]);
    });
  }

  async close(): Promise<void> {
    const workers = this.#workers.splice(0);
    await Promise.all(workers.map((w) => w.terminate()));
  }

  /**
   * A worker keeps the process alive exactly while it holds a chunk: an idle pool must not stop a
   * finished command from exiting, and a busy one must not let the process exit under a pending digest.
   */
  #setLoad(worker: Worker, load: number): void {
    const before = this.#load.get(worker) ?? 0;
    this.#load.set(worker, load);
    if (before === 0 && load > 0) worker.ref();
    else if (before > 0 && load === 0) worker.unref();
  }

  #pick(): Worker {
    if (this.#workers.length < this.#size) {
      const w = new Worker(WORKER_SOURCE, { eval: true });
      // Listen first, then unref: adding a 'message' listener refs the worker's port again (Node does
      // that itself), and that port left refed kept `orchard pull` running after its last line.
      w.on('message', ({ id, buffer, digest }: { id: number; buffer: ArrayBuffer; digest: Uint8Array }) => {
        const job = this.#jobs.get(id);
        this.#jobs.delete(id);
        this.#setLoad(w, Math.max(0, (this.#load.get(w) ?? 1) - 1));
        job?.resolve({ digest: Buffer.from(digest.buffer, digest.byteOffset, digest.byteLength), bytes: Buffer.from(buffer, job.offset, job.length) });
      });
      w.on('error', (err) => {
        // A worker that died fails what it held; the pool starts another on the next chunk.
        this.#workers.splice(this.#workers.indexOf(w), 1);
        this.#load.delete(w);
        for (const [id, job] of this.#jobs) {
          if (job.worker !== w) continue;
          this.#jobs.delete(id);
          job.reject(err);
        }
      });
      w.unref();
      this.#workers.push(w);
      this.#load.set(w, 0);
      return w;
    }
    return this.#workers.reduce((a, b) => ((this.#load.get(a) ?? 0) <= (this.#load.get(b) ?? 0) ? a : b));
  }
}

/** The process's pool, started on first use. */
let shared: HashPool | undefined;
export function hashPool(): HashPool {
  shared ??= new HashPool();
  return shared;
}
