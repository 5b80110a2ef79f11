/**
 * Start-up micro-benchmark: memory bandwidth (large buffer copies) and dense f32 matmul throughput.
 * Matmul runs on the engine's reference Backend when '@orchard/engine' exports one
 * (`createReferenceBackend`); until then on a local loop of the same shape — `method` says which.
 * Each figure is the best of a few short rounds inside a fixed time budget.
 */
import { performance } from 'node:perf_hooks';
import type { Backend, Weight } from '@orchard/engine';
import type { Capability } from '../profile/types.js';

export interface MicrobenchOptions {
  /** Rough total time budget, ms. @default 600 */
  budgetMs?: number;
  /** Bytes per copy for the bandwidth test. @default 64 MiB — well past any cache */
  copyBytes?: number;
}

/**
 * The fastest CPU backend the engine offers (the one a runner would use): WASM SIMD + threads, else
 * the plain-TypeScript reference; null when neither loads.
 */
export async function loadEngineBackend(): Promise<Backend | null> {
  let engine: Record<string, unknown>;
  try {
    engine = (await import('@orchard/engine')) as Record<string, unknown>;
  } catch {
    return null;
  }
  for (const name of ['createWasmBackend', 'createReferenceBackend']) {
    const factory = engine[name];
    if (typeof factory !== 'function') continue;
    try {
      return (factory as () => Backend)();
    } catch {
      /* e.g. no WebAssembly SIMD on this CPU: try the next one */
    }
  }
  return null;
}

/** Copy bandwidth: each copy reads and writes `bytes`, counted as 2x bytes moved. */
export function measureMemoryBandwidth(bytes: number, budgetMs: number): number {
  const src = new Uint8Array(bytes).fill(1);
  const dst = new Uint8Array(bytes);
  let best = Infinity;
  const end = performance.now() + budgetMs;
  for (let i = 0; i < 3 || (performance.now() < end && i < 50); i++) {
    const t0 = performance.now();
    dst.set(src);
    best = Math.min(best, performance.now() - t0);
  }
  return (2 * bytes) / (best / 1000) / 1e9;
}

/** Local stand-in with the Backend's matmul contract (f32 only). */
function localMatmul(out: Float32Array, w: Weight, x: Float32Array, n: number): void {
  const { rows, cols } = w;
  const wf = new Float32Array(w.bytes.buffer, w.bytes.byteOffset, rows * cols);
  for (let b = 0; b < n; b++) {
    for (let r = 0; r < rows; r++) {
      let s = 0;
      const wo = r * cols;
      const xo = b * cols;
      for (let c = 0; c < cols; c++) s += wf[wo + c] * x[xo + c];
      out[b * rows + r] = s;
    }
  }
}

export function measureMatmulGflops(backend: Backend | null, budgetMs: number): number {
  // Big enough that a threaded backend parallelises it, small enough for a few rounds in the budget.
  const rows = 512;
  const cols = 512;
  const n = 16;
  const bytes = backend ? backend.allocBytes(rows * cols * 4) : new Uint8Array(rows * cols * 4);
  const wf = new Float32Array(bytes.buffer, bytes.byteOffset, rows * cols);
  for (let i = 0; i < wf.length; i++) wf[i] = ((i * 2654435761) % 1000) / 1000 - 0.5;
  const w: Weight = { dtype: 'f32', rows, cols, bytes };
  const x = backend ? backend.allocF32(cols * n) : new Float32Array(cols * n);
  x.fill(0.25);
  const out = backend ? backend.allocF32(rows * n) : new Float32Array(rows * n);
  const mm = backend ? (o: Float32Array, xx: Float32Array) => backend.matmul(o, w, xx, n) : (o: Float32Array, xx: Float32Array) => localMatmul(o, w, xx, n);
  mm(out, x); // warm-up (JIT)
  let best = Infinity;
  const end = performance.now() + budgetMs;
  for (let i = 0; i < 3 || (performance.now() < end && i < 200); i++) {
    const t0 = performance.now();
    mm(out, x);
    best = Math.min(best, performance.now() - t0);
  }
  if (!Number.isFinite(out[0])) throw new Error('matmul benchmark produced a non-finite result');
  return (2 * rows * cols * n) / (best / 1000) / 1e9;
}

export async function runMicrobench(options: MicrobenchOptions = {}): Promise<Capability> {
  const budget = options.budgetMs ?? 600;
  const backend = await loadEngineBackend();
  const memoryBandwidthGBps = measureMemoryBandwidth(options.copyBytes ?? 64 * 2 ** 20, budget / 2);
  const matmulGflops = measureMatmulGflops(backend, budget / 2);
  backend?.dispose?.();
  return {
    memoryBandwidthGBps,
    matmulGflops,
    method: backend ? `copy 64MiB; f32 matmul 512x512x16 on engine backend "${backend.name}"` : 'copy 64MiB; f32 matmul 512x512x16 on a local loop (no engine backend loaded)',
    measuredAt: Date.now(),
  };
}
