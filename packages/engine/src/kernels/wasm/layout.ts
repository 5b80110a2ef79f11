/**
 * Addresses and indices shared with wasm/kernels.wat (keep both in step: the .wat header lists them).
 */

/** Byte address of the job descriptor. */
export const CTL_ADDR = 64;
/** Job descriptor fields, as indices of an Int32Array over the descriptor. */
export const CTL = {
  gen: 0,
  kernel: 1,
  out: 2,
  w: 3,
  x: 4,
  rows: 5,
  cols: 6,
  n: 7,
  rowBytes: 8,
  xStride: 9,
  next: 10,
  chunkRows: 11,
  done: 12,
  stop: 13,
  ready: 14,
  error: 15,
} as const;
export const CTL_FIELDS = 16;

/** f16 → f32 table (65,536 f32) the kernels use for block scales and f16 tails. */
export const F16_TABLE_ADDR = 4096;
/** First heap byte: after the table. */
export const HEAP_BASE = F16_TABLE_ADDR + 65536 * 4;

/** Table index of each dtype's dot4 kernel (dot1 is the next index). */
export const KERNEL = { f32: 0, f16: 2, bf16: 4, q8_0: 6, q4_0: 8, q4_k: 28, q5_k: 30, q6_k: 32, mxfp4: 46, fp8_e4m3: 55 } as const;
/** Packed weights (pack.ts): group kernel at this index, the row-major 1-row kernel (rows%4 tail) next. */
export const PACKED_KERNEL = { f16: 22, q8_0: 24, q4_0: 26, q4_k: 34, mlx4: 48, q5_k: 57, q6_k: 59 } as const;
/** MLX affine weights by bits: dot4 at this index, dot1 next (wasm/affine.ts). */
export const MLX_KERNEL = { 2: 36, 3: 38, 4: 40, 6: 42, 8: 44 } as const;
/** The current MLX weight's group size and scale dtype (0 f16, 1 bf16, 2 f32), 2 × i32. */
export const AFFINE_ADDR = 212;
/** The memory-read probe (benchmark baseline). */
export const READ_KERNEL = 10;
/** Attention over a KV cache; its parameters live at ATTN_ADDR (16 fields, see kernels.wat). */
export const ATTN_KERNEL = 12;
export const ATTN_ADDR = 128;
/** swiglu over spans of one long batch, run on every thread (gate at CTL.w, up at CTL.x). */
export const SWIGLU_KERNEL = 13;
/** Per-thread weight scratch for f16 prompt batches: base address, bytes per thread (2 × i32). */
export const WIDE_ADDR = 192;
/** The current packed f16 weight's subnormal-term table: row starts address, entries address (0: none). */
export const CORR_ADDR = 200;
/**
 * The current prompt batch's activations in tile layout (wasm quant_tiles): address (i32). For one token of
 * packed q8_0/q4_0/4-bit MLX in the relaxed build: the int8 form its decode kernel reads (quant_q8_decode /
 * quant_q4_decode / quant_mlx4_decode).
 */
export const QTILES_ADDR = 208;

export const PAGE_BYTES = 65536;
/** wasm32 addresses 4 GiB at most. */
export const MAX_PAGES = 65536;
