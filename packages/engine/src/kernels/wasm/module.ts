/**
 * The compiled kernel module, loaded once per process from the committed wasm/kernels.wasm (built from
 * kernels.wat by wasm/build.ts). Compilation is synchronous so a backend can be created without await.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const WASM_URL = new URL('../../../wasm/kernels.wasm', import.meta.url);

let cached: WebAssembly.Module | undefined;

export function kernelModule(): WebAssembly.Module {
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
    cached = new WebAssembly.Module(bytes);
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
  run_job(): number;
  prep_pairs(x: number, dst: number, cols: number, n: number, scale: number): void;
  quant_q8(x: number, dst: number, cols: number, n: number): void;
  round_f16(v: number): number;
}
