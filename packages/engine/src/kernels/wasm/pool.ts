/**
 * Worker threads that share the kernel memory. A job is published in the shared descriptor and every
 * participant (the calling thread included) takes chunks of output rows from an atomic counter in
 * wasm ($run_job), so kernels stay synchronous to their callers.
 *
 * Joining is opt-in per job: a worker that wakes up joins only while the job is open (a CAS on the
 * `state` word: CLOSED bit | number of workers inside). When the caller has run out of chunks it closes
 * the job and waits only for the workers inside it. A worker the OS has not scheduled yet (a busy
 * machine) therefore never delays a kernel; it just skips that job. Jobs too small to share are never
 * opened, so no worker can wander into them.
 *
 * Waiting is spin-then-sleep: a forward pass issues kernels back to back, and a futex wake costs tens
 * of microseconds, so both sides poll briefly before blocking in Atomics.wait.
 */
import { Worker } from 'node:worker_threads';
import { CTL, CTL_ADDR, CTL_FIELDS } from './layout.js';
import type { KernelExports, WasmMemory, WasmModule } from './module.js';

/** Polls before a worker sleeps between jobs, and before the caller sleeps waiting for workers. */
const WORKER_SPINS = 20_000;
const CALLER_SPINS = 50_000;
/** A kernel that does not finish in this long means a worker died: fail instead of hanging. */
const JOB_TIMEOUT_MS = 60_000;
const START_TIMEOUT_MS = 20_000;
/** In the state word (CTL.done): the job takes no more workers. The low bits count workers inside. */
const CLOSED = 1 << 30;

// Runs inside each worker (CommonJS, eval'd): instantiate the shared module, then serve jobs.
const WORKER_SOURCE = `
const { workerData } = require('node:worker_threads');
const { module, memory, ctlAddr, f, spins, CLOSED, index } = workerData;
const ctl = new Int32Array(memory.buffer, ctlAddr, ${CTL_FIELDS});
let exports;
try {
  exports = new WebAssembly.Instance(module, { env: { memory } }).exports;
} catch (err) {
  Atomics.store(ctl, f.error, 1);
}
// Read the generation before announcing readiness: the caller may publish a job right after.
let seen = Atomics.load(ctl, f.gen);
Atomics.add(ctl, f.ready, 1);
Atomics.notify(ctl, f.ready);
while (exports) {
  let i = 0;
  while (Atomics.load(ctl, f.gen) === seen && i < spins) i++;
  if (Atomics.load(ctl, f.gen) === seen) Atomics.wait(ctl, f.gen, seen);
  seen = Atomics.load(ctl, f.gen);
  if (Atomics.load(ctl, f.stop)) break;
  let s = Atomics.load(ctl, f.done);
  let joined = false;
  while (!(s & CLOSED)) {
    const prev = Atomics.compareExchange(ctl, f.done, s, s + 1);
    if (prev === s) { joined = true; break; }
    s = prev;
  }
  if (!joined) continue;
  try {
    exports.run_job(index);
  } catch (err) {
    Atomics.store(ctl, f.error, 2);
  }
  Atomics.sub(ctl, f.done, 1);
  Atomics.notify(ctl, f.done);
}
`;
export class ThreadPool {
  readonly #ctl: Int32Array;
  readonly #workers: Worker[] = [];
  readonly #exports: KernelExports;
  #disposed = false;
  /** Jobs offered to the workers, and row chunks the workers (not the caller) computed. */
  readonly stats = { sharedJobs: 0, workerChunks: 0 };

  /** `helpers` worker threads besides the calling thread. Blocks until they are ready. */
  constructor(module: WasmModule, memory: WasmMemory, exports: KernelExports, helpers: number) {
    this.#exports = exports;
    this.#ctl = new Int32Array(memory.buffer, CTL_ADDR, CTL_FIELDS);
    if (helpers <= 0) return;
    Atomics.store(this.#ctl, CTL.ready, 0);
    Atomics.store(this.#ctl, CTL.error, 0);
    Atomics.store(this.#ctl, CTL.done, CLOSED);
    for (let i = 0; i < helpers; i++) {
      const worker = new Worker(WORKER_SOURCE, {
        eval: true,
        workerData: { module, memory, ctlAddr: CTL_ADDR, f: CTL, spins: WORKER_SPINS, CLOSED, index: i + 1 },
      });
      worker.unref();
      this.#workers.push(worker);
    }
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      const ready = Atomics.load(this.#ctl, CTL.ready);
      if (ready >= helpers) break;
      if (Date.now() > deadline) {
        this.dispose();
        throw new Error(`wasm backend: only ${ready} of ${helpers} worker threads started within ${START_TIMEOUT_MS} ms`);
      }
      Atomics.wait(this.#ctl, CTL.ready, ready, 100);
    }
    if (Atomics.load(this.#ctl, CTL.error)) {
      this.dispose();
      throw new Error('wasm backend: a worker thread could not instantiate the kernel module');
    }
  }

  get helpers(): number {
    return this.#workers.length;
  }

  /**
   * Runs the job already written to the descriptor (all fields but next/done). `parallel` false keeps
   * it on the calling thread (small kernels: waking a worker costs more than it saves).
   */
  run(parallel: boolean): void {
    if (this.#disposed) throw new Error('wasm backend: used after dispose()');
    const ctl = this.#ctl;
    const share = parallel && this.#workers.length > 0;
    Atomics.store(ctl, CTL.next, 0);
    if (share) {
      Atomics.store(ctl, CTL.done, 0); // open, nobody inside yet
      Atomics.add(ctl, CTL.gen, 1);
      Atomics.notify(ctl, CTL.gen);
    }
    let mine = 0;
    try {
      mine = this.#exports.run_job(0);
    } finally {
      if (share) this.#close();
    }
    if (share) {
      const total = Math.ceil(ctl[CTL.rows] / ctl[CTL.chunkRows]);
      this.stats.sharedJobs++;
      this.stats.workerChunks += total - mine;
    }
    if (Atomics.load(ctl, CTL.error)) {
      Atomics.store(ctl, CTL.error, 0);
      throw new Error('wasm backend: a kernel trapped in a worker thread (out-of-bounds buffer?)');
    }
  }

  /** Stops workers from joining, then waits for those inside to finish their chunks. */
  #close(): void {
    const ctl = this.#ctl;
    Atomics.or(ctl, CTL.done, CLOSED);
    let i = 0;
    while (Atomics.load(ctl, CTL.done) !== CLOSED && i < CALLER_SPINS) i++;
    const deadline = Date.now() + JOB_TIMEOUT_MS;
    for (;;) {
      const state = Atomics.load(ctl, CTL.done);
      if (state === CLOSED) return;
      if (Date.now() > deadline) throw new Error(`wasm backend: worker threads did not finish a kernel within ${JOB_TIMEOUT_MS} ms`);
      Atomics.wait(ctl, CTL.done, state, 50);
    }
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    Atomics.store(this.#ctl, CTL.stop, 1);
    Atomics.add(this.#ctl, CTL.gen, 1);
    Atomics.notify(this.#ctl, CTL.gen);
    for (const w of this.#workers) void w.terminate();
  }
}
