/**
 * The compiled kernel module, loaded once per process from the committed wasm/kernels.wasm or
 * wasm/kernels-relaxed.wasm (both built from kernels.wat by wasm/build.ts). Compilation is synchronous
 * so a backend can be created without await.
 *
 * The relaxed build uses relaxed SIMD (i32x4.relaxed_dot_i8x16_i7x16_add_s, f32x4.relaxed_madd), which
 * Node 20's V8 ships behind --experimental-wasm-relaxed-simd. The flag can be set by the process itself
 * before compiling (v8.setFlagsFromString; worker threads share the process's flags), so 'auto' turns
 * it on and takes the relaxed build when it then validates, the baseline build otherwise.
 *
 * Node 20's baseline wasm compiler (Liftoff) miscompiles i32x4.relaxed_dot_i8x16_i7x16_add_s when its
 * accumulator is a constant or a fresh value (it returns twice the dot product and drops the
 * accumulator; TurboFan, the tier a hot function moves to, is right). A kernel would give wrong results
 * until it tiers up. The kernels now use i16x8.relaxed_dot_i8x16_i7x16_s and f32x4.relaxed_madd, which
 * Liftoff got right when probed, but relaxed SIMD is experimental in this V8, so the relaxed build is
 * compiled with --no-liftoff all the same (straight to TurboFan; process-wide, it only makes wasm
 * compiled afterwards slower to compile). test/wasm/relaxed.test.ts compares the two builds bit for bit
 * from the first call on.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';

/** Which build of the kernels: 'auto' picks relaxed where this runtime accepts it. */
export type SimdChoice = 'auto' | 'relaxed' | 'baseline';
export type SimdBuild = Exclude<SimdChoice, 'auto'>;

const WASM_URLS: Record<SimdBuild, URL> = {
  baseline: new URL('../../../wasm/kernels.wasm', import.meta.url),
  relaxed: new URL('../../../wasm/kernels-relaxed.wasm', import.meta.url),
};

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
  validate(bytes: Uint8Array): boolean;
}
export const WA = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

const cached: Partial<Record<SimdBuild, WasmModule>> = {};
let relaxedOk: boolean | undefined;

function readBuild(build: SimdBuild): Buffer {
  try {
    return readFileSync(WASM_URLS[build]);
  } catch (err) {
    throw new Error(
      `wasm backend: cannot read ${fileURLToPath(WASM_URLS[build])} (${(err as Error).message}); ` +
        'build it with `pnpm --filter @orchard/engine build:wasm`',
    );
  }
}

/** Whether this runtime runs the relaxed build (turning V8's relaxed-SIMD flag on if it needs it). */
export function relaxedSimdAvailable(): boolean {
  if (relaxedOk !== undefined) return relaxedOk;
  const bytes = readBuild('relaxed');
  if (!WA.validate(bytes)) setFlagsFromString('--experimental-wasm-relaxed-simd');
  relaxedOk = WA.validate(bytes);
  return relaxedOk;
}

/** The build a choice resolves to; 'relaxed' on a runtime without relaxed SIMD is an error. */
export function resolveSimd(choice: SimdChoice): SimdBuild {
  if (choice !== 'auto' && choice !== 'relaxed' && choice !== 'baseline') {
    throw new Error(`wasm backend: simd must be 'auto', 'relaxed' or 'baseline', got ${JSON.stringify(choice)}`);
  }
  if (choice === 'baseline') return 'baseline';
  if (relaxedSimdAvailable()) return 'relaxed';
  if (choice === 'relaxed') {
    throw new Error(
      `wasm backend: simd 'relaxed' was asked for, but Node ${process.version} does not run relaxed SIMD ` +
        "even with --experimental-wasm-relaxed-simd; use simd 'auto' or 'baseline'",
    );
  }
  return 'baseline';
}

export function kernelModule(build: SimdBuild = 'baseline'): WasmModule {
  const hit = cached[build];
  if (hit) return hit;
  if (build === 'relaxed' && !relaxedSimdAvailable()) throw new Error(`wasm backend: relaxed SIMD is not available on Node ${process.version}`);
  const bytes = readBuild(build);
  if (build === 'relaxed') setFlagsFromString('--no-liftoff');
  try {
    return (cached[build] = new WA.Module(bytes));
  } catch (err) {
    throw new Error(
      `wasm backend: ${fileURLToPath(WASM_URLS[build])} does not compile on Node ${process.version} ` +
        `(WASM SIMD${build === 'relaxed' ? ', relaxed SIMD' : ''} and threads are required): ${(err as Error).message}`,
    );
  }
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
  /** The relaxed build only: quant_q8's q4_0 output into the relaxed q4_0 tile layout (int8 quads, 40 bytes per token and block). */
  quant_tiles_q4r?(src: number, dst: number, cols: number, n: number): void;
  /** The relaxed build only: one token of quant_q8's q4_0 output as plain int8 for packed q4_0 decode ($g4_q4_0), cols + cols/4 bytes. */
  quant_q4_decode?(src: number, dst: number, cols: number): void;
  /** The relaxed build only: one token of quant_q8's q8_0 output as int8 x+ and x- for packed q8_0 decode ($g4_q8_0), as many bytes. */
  quant_q8_decode?(src: number, dst: number, cols: number): void;
  /** n tokens into the K-quant activation format (ggml's Q8_K plus per-32 sums; kernels.wat's kquant section). */
  quant_q8k(x: number, dst: number, cols: number, n: number): void;
  /** n tokens into the MLX affine activation order (e elements per lane) plus per-group sums (kernels.wat's affine section). */
  prep_affine(x: number, dst: number, cols: number, n: number, e: number, g: number): void;
  /** n tokens into the 15-bit integer form of packed 4-bit MLX weights, with per-group f32 sums (group size g). */
  quant_mlx4(x: number, dst: number, cols: number, n: number, g: number): void;
  /** The relaxed build only: one token of quant_mlx4's output as int8 x >> 7 and x & 127 for packed 4-bit MLX decode ($g4_mlx4), as many bytes. */
  quant_mlx4_decode?(src: number, dst: number, cols: number, g: number): void;
  round_f16(v: number): number;
  exp_neg(x: number): number;
  swiglu(a: number, b: number, n: number): void;
  rmsnorm_rows(out: number, x: number, w: number, n: number, dim: number, eps: number): void;
  add_f32(x: number, y: number, n: number): void;
  fp8_prep_x(x: number, dst: number, cols: number, n: number, k: number): void;
}
