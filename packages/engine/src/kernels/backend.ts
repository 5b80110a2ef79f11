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
export type DType = 'f32' | 'f16' | 'bf16' | 'q8_0' | 'q4_0' | 'q4_k' | 'q5_k' | 'q6_k' | 'mxfp4' | 'fp8_e4m3' | MlxDType;

/**
 * MLX affine quantization kept packed: `mlx<bits>_g<group>_<scale dtype>`, e.g. 'mlx4_g64_bf16'. Row
 * layout (src/quant/mlx.ts): the row's packed bits (element j at bit j·bits of the row's little-endian
 * bytes, as mlx-lm stores them), then per group its scale and bias in the scale dtype; w = scale·q + bias.
 */
/*
 * 'fp8_e4m3': FP8 E4M3 weights with a float32 scale per 128 columns of each row (DeepSeek V3's
 * 128×128 blocks, their scale repeated on each row of the block): per row ceil(cols/128) f32 scales,
 * then the row's cols code bytes; w = e4m3(code)·scale (src/quant/fp8.ts).
 */
export type MlxDType = `mlx${2 | 3 | 4 | 6 | 8}_g${32 | 64 | 128}_${'f16' | 'bf16' | 'f32'}`;

export interface Weight {
  dtype: DType;
  /** Output features. */
  rows: number;
  /** Input features. */
  cols: number;
  /** Raw storage in `dtype`'s layout, row-major, allocated with `Backend.allocBytes`. */
  bytes: Uint8Array;
  /**
   * Set by `Backend.packWeight`: the bytes are rearranged for that backend's kernels ('rows4': the
   * WASM backend's 4-row interleave, src/kernels/wasm/pack.ts) and only its matvec/matmul read them.
   */
  packed?: 'rows4';
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
  /**
   * Rearranges a loaded matrix that is only ever used through matvec/matmul (not an embedding read
   * row by row) into this backend's faster layout, in place — no second copy. Backends without one
   * leave it out; the loader calls it when present.
   */
  packWeight?(w: Weight): void;

  // Optional kernels. The forward pass uses them when a backend offers them and its own plain
  // TypeScript loops otherwise; an implementation must match those loops within f32 rounding.

  /** Causal attention of n new queries over a KV cache (see AttentionArgs). */
  attention?(args: AttentionArgs): void;
  /**
   * Several matmuls of one input (q/k/v, gate/up): for each job, out = W·x as `matmul` computes it (the
   * same bits), the input's preparation shared where the weights' formats agree.
   */
  matmulShared?(jobs: readonly { out: Float32Array; w: Weight }[], x: Float32Array, n: number): void;
  /** RMSNorm of n rows of dim values (x and out [n, dim]) as model/math.ts rmsnorm computes each row. */
  rmsnorm?(out: Float32Array, x: Float32Array, weight: Float32Array, n: number, dim: number, eps: number): void;
  /** x[i] += y[i] for i < n (the residual stream). */
  add?(x: Float32Array, y: Float32Array, n: number): void;
  /** a[i] = silu(a[i])·b[i] for i < n (the SwiGLU gate). */
  swiglu?(a: Float32Array, b: Float32Array, n: number): void;
  /** Hands a buffer from allocF32/allocBytes back for reuse (a finished sequence's KV cache). */
  release?(buf: Float32Array | Uint8Array): void;
}

/**
 * Causal attention of n new queries over a KV cache, in the forward pass's layout:
 * q and out are [n, heads, headDim]; k and v are [capacity, kvHeads, headDim] and already hold
 * positions 0 .. pos0+n−1. Query b sits at position pos0+b and attends to positions
 * max(0, pos − window + 1) .. pos (window 0 or absent: all). Query head h reads KV head
 * ⌊(h + headOffset)/group⌋ − kvOffset (the first global head / KV head of a tensor-parallel slice).
 * out = softmax(q·kᵀ·scale)·v per head.
 */
export interface AttentionArgs {
  out: Float32Array;
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  n: number;
  pos0: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  group: number;
  headOffset?: number;
  kvOffset?: number;
  scale: number;
  window?: number;
}

/** out = W·x for each job, through the backend's matmulShared where it has one (one input preparation). */
export function matmuls(be: Backend, jobs: readonly { out: Float32Array; w: Weight }[], x: Float32Array, n: number): void {
  if (be.matmulShared) be.matmulShared(jobs, x, n);
  else for (const { out, w } of jobs) be.matmul(out, w, x, n);
}
