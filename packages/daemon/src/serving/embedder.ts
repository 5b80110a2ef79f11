/**
 * Embeddings (POST /v1/embeddings, Ollama's /api/embed): a model is embedded whole on the node that
 * holds its files, in a process of its own (serving/embed-main.ts) started on the first request and
 * stopped after the keep-alive. Embedding models are small (Qwen3-Embedding-0.6B is 1.2 GB), so they
 * are not split over the pod; a node without the files says how to get them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { ModelCatalog } from '../models/catalog.js';
import { tsxLoader } from '../runner/runner-process.js';
import type { FromEmbedder, ToEmbedder } from './embed-protocol.js';
import { ServeError } from '../requests/errors.js';

const EMBED_MAIN = join(dirname(fileURLToPath(import.meta.url)), 'embed-main.ts');
/** Loading a model's weights for embedding; a bigger model than this allows is not an embedding model. */
const LOAD_TIMEOUT_MS = 120_000;
/** One request's inputs together; generous, since a CPU embeds a few thousand tokens a second. */
const EMBED_TIMEOUT_MS = 300_000;

export interface EmbedderOptions {
  catalog: ModelCatalog;
  backend: { kind: 'reference' | 'wasm' | 'gpu'; threads?: number };
  /** Longest input in tokens (the daemon's --context, else 8192; never past the model's own). */
  maxSeqLen: number;
  /** Stop a model's process after this long without a request (null: never). */
  keepAliveMs: number | null;
  log: Logger;
}

export interface Embedded {
  vectors: number[][];
  promptTokens: number;
}

interface Pending {
  resolve: (r: Embedded) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

class EmbedProcess {
  readonly child: ChildProcess;
  readonly ready: Promise<{ dims: number; pooling: string; maxSeqLen: number }>;
  #pending = new Map<number, Pending>();
  #next = 1;
  #dead: string | null = null;

  constructor(model: string, dir: string, o: EmbedderOptions, onExit: () => void) {
    this.child = spawn(process.execPath, ['--import', tsxLoader(), EMBED_MAIN], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.ready = new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new ServeError(503, 'model_load_timeout', `${model}: loading it for embeddings took over ${LOAD_TIMEOUT_MS / 1000} s`)), LOAD_TIMEOUT_MS);
      this.child.on('message', (m: FromEmbedder) => {
        if (m.type === 'loaded') {
          clearTimeout(timer);
          resolve(m);
        } else if (m.type === 'load-failed') {
          clearTimeout(timer);
          reject(new ServeError(422, 'model_unusable', `${model}: ${m.message}`));
        } else this.#answer(m);
      });
      this.child.on('exit', (code, signal) => {
        clearTimeout(timer);
        this.#dead = `the embedding process for ${model} exited (${signal ?? `code ${code}`})`;
        reject(new ServeError(503, 'model_failed', this.#dead));
        for (const p of this.#pending.values()) p.reject(new ServeError(503, 'model_failed', this.#dead));
        this.#pending.clear();
        onExit();
      });
    });
    this.ready.catch(() => this.child.kill());
    const threads = o.backend.threads ?? 1;
    this.#send({ type: 'load', dir, backend: o.backend.kind === 'reference' ? 'reference' : 'wasm', threads, maxSeqLen: o.maxSeqLen });
  }

  embed(inputs: (string | number[])[], truncate: boolean): Promise<Embedded> {
    if (this.#dead) return Promise.reject(new ServeError(503, 'model_failed', this.#dead));
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new ServeError(504, 'timeout', `embedding ${inputs.length} inputs took over ${EMBED_TIMEOUT_MS / 1000} s`));
      }, EMBED_TIMEOUT_MS);
      this.#pending.set(id, { resolve, reject, timer });
      this.#send({ type: 'embed', id, inputs, truncate });
    });
  }

  #answer(m: Extract<FromEmbedder, { id: number }>): void {
    const p = this.#pending.get(m.id);
    if (!p) return;
    this.#pending.delete(m.id);
    clearTimeout(p.timer);
    if (m.type === 'embedded') p.resolve({ vectors: m.vectors, promptTokens: m.tokens });
    else p.reject(new ServeError(m.status, m.status === 400 ? 'invalid_value' : 'internal_error', m.message));
  }

  #send(m: ToEmbedder): void {
    if (this.child.connected) this.child.send(m);
  }
}

export class Embedder {
  readonly #o: EmbedderOptions;
  readonly #procs = new Map<string, { proc: EmbedProcess; idle: NodeJS.Timeout | null }>();

  constructor(o: EmbedderOptions) {
    this.#o = o;
  }

  /** Embeds each input (text or token ids) with `model`; `truncate` cuts inputs longer than the limit instead of refusing them. */
  async embed(model: string, inputs: (string | number[])[], truncate: boolean): Promise<Embedded> {
    const entry = this.#entry(model);
    if (entry.idle) clearTimeout(entry.idle);
    entry.idle = null;
    try {
      await entry.proc.ready;
      return await entry.proc.embed(inputs, truncate);
    } finally {
      if (this.#procs.get(model) === entry && this.#o.keepAliveMs !== null) {
        entry.idle = setTimeout(() => this.#stop(model), this.#o.keepAliveMs);
        entry.idle.unref();
      }
    }
  }

  /** Models with an embedding process now. */
  loaded(): string[] {
    return [...this.#procs.keys()];
  }

  close(): void {
    for (const model of [...this.#procs.keys()]) this.#stop(model);
  }

  #entry(model: string) {
    const have = this.#procs.get(model);
    if (have) return have;
    const dir = this.#o.catalog.pathOf(model);
    if (!dir) throw new ServeError(404, 'model_not_found', `the model '${model}' has no files on this node; embeddings run where the files are (orchard pull ${model})`);
    this.#o.log.info({ model }, 'embedding model loading');
    const entry = { proc: new EmbedProcess(model, dir, this.#o, () => this.#procs.get(model) === entry && this.#procs.delete(model)), idle: null as NodeJS.Timeout | null };
    this.#procs.set(model, entry);
    return entry;
  }

  #stop(model: string): void {
    const entry = this.#procs.get(model);
    if (!entry) return;
    this.#procs.delete(model);
    if (entry.idle) clearTimeout(entry.idle);
    entry.proc.child.kill();
  }
}
