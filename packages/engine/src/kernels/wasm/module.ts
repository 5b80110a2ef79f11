/**
 * The compiled kernel module, loaded once per process from the committed wasm/kernels.wasm (built from
 * kernels.wat by wasm/build.ts). Compilation is synchronous so a backend can be created without await.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const WASM_URL = new URL('../../../wasm/kernels.wasm', import.meta.url);

/**
 * The slice of the WebAssembly JS API used here. The project's TypeScript lib (ES2023, no DOM) does not
 * declare the WebAssembly global, and an ambient declaration would clash with packages that add DOM.
 */
export interface WasmMemory {
  readonly buffer: ArrayBuffer | SharedArrayBuffer;
  grow(pages: number): number;
}
export interface WasmModule {
  readonly __brand?: 'WebAssembly.Module';
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => WasmModule;
  Instance: new (module: WasmModule, imports: object) => { exports: unknown };
  Memory: new (descriptor: { initial: number; maximum: number; shared: boolean }) => WasmMemory;
}
export const WA = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

let cached: WasmModule | undefined;

export function kernelModule(): WasmModule {
  if (cached) return cached;
  let bytes: Buffer;
  try {
    bytes = readFileSync(WASM_URL);
  } catch (err) {
    throw new Error(
      `wasm backend: cannot read ${fileURLToPath(WASM_URL)} (${(err as Error).message}); ` +
        'build it with `pnpm --filter @orchard/engine build:wasm`',
    );
  }
  try {
    cached = new WA.Module(bytes);
  } catch (err) {
    throw new Error(
      `wasm backend: ${fileURLToPath(WASM_URL)} does not compile on Node ${process.version} ` +
        `(WASM SIMD and threads are required): ${(err as Error).message}`,
    );
  }
  return cached;
}

/** What the module exports (see kernels.wat). */
export interface KernelExports {
  /** Computes chunks of the published job; `tid` picks the thread's scratch (0: caller). */
  run_job(tid: number): number;
  prep_pairs(x: number, dst: number, cols: number, n: number, scale: number): void;
  /** q4: 1 for q4_0 weights (second half of each block stored as x[j+16] − 16·x[j]), 0 for q8_0. */
  quant_q8(x: number, dst: number, cols: number, n: number, q4: number): void;
  /** quant_q8's output of n tokens (q8_0 or q4_0 form) into tiles of 4 tokens for the prompt-batch kernels. */
  quant_tiles(src: number, dst: number, cols: number, n: number): void;
  /** n tokens into the K-quant activation format (ggml's Q8_K plus per-32 sums; kernels.wat's kquant section). */
  quant_q8k(x: number, dst: number, cols: number, n: number): void;
  /** n tokens into the MLX affine activation order (e elements per lane) plus per-group sums (kernels.wat's affine section). */
  prep_affine(x: number, dst: number, cols: number, n: number, e: number, g: number): void;
  /** n tokens into the 15-bit integer form of packed 4-bit MLX weights, with per-group f32 sums (group size g). */
  quant_mlx4(x: number, dst: number, cols: number, n: number, g: number): void;
  round_f16(v: number): number;
  exp_neg(x: number): number;
  swiglu(a: number, b: number, n: number): void;
}
