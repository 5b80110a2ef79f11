/**
 * The compute contract the forward pass is written against. The plain-TypeScript reference backend
 * is the readable oracle; faster backends (WASM SIMD + threads, WebGPU) implement the same methods and
 * must match it within a stated tolerance.
 *
 * Conventions (llama2.c-style):
 * - Matrices are row-major `[rows, cols]` = `[out, in]`, exactly as Hugging Face stores `nn.Linear`
 *   weights; `matvec` computes `out[r] = Σ_c W[r, c] · x[c]`.
 * - Weights stay in their storage dtype (f16/bf16/quantized) and are widened inside the kernel, so
 *   quantized formats fit without a second copy.
 * - Kernels are synchronous and allocate nothing. Buffers the kernels touch come from the backend's
 *   own allocators, so a WASM backend can address them without copying (its memory is shared with
 *   its worker threads).
 */
export type DType = 'f32' | 'f16' | 'bf16' | 'q8_0' | 'q4_0';

export interface Weight {
  dtype: DType;
  /** Output features. */
  rows: number;
  /** Input features. */
  cols: number;
  /** Raw storage in `dtype`'s layout, row-major, allocated with `Backend.allocBytes`. */
  bytes: Uint8Array;
}

export interface Backend {
  readonly name: string;
  /** A zeroed f32 buffer the kernels can address without copies. */
  allocF32(length: number): Float32Array;
  /** A zeroed byte buffer (weight storage) the kernels can address without copies. */
  allocBytes(length: number): Uint8Array;

  /** out[r] = Σ_c W[r,c]·x[c], r < w.rows. `out.length >= w.rows`, `x.length >= w.cols`. */
  matvec(out: Float32Array, w: Weight, x: Float32Array): void;
  /** Batched: for b < n, out[b·rows + r] = Σ_c W[r,c]·x[b·cols + c]. Prompt processing. */
  matmul(out: Float32Array, w: Weight, x: Float32Array, n: number): void;

  /** Release threads and memory. */
  dispose?(): void;
}
