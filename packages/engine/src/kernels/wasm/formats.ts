/**
 * Storage layouts of the weight dtypes, as GGUF defines the block formats (rows stored back to back,
 * each a whole number of blocks):
 * - q8_0: blocks of 32 weights = f16 scale d + 32 int8 q (34 bytes); w = q·d.
 * - q4_0: blocks of 32 weights = f16 scale d + 16 bytes; byte j holds weight j in its low nibble and
 *   weight j+16 in its high nibble; w = (q − 8)·d.
 * - q4_k, q5_k, q6_k: super-blocks of 256 weights (144, 176, 210 bytes) with 6- or 8-bit sub-block
 *   scales; layouts and formulas in src/quant/kquants.ts.
 * - mxfp4: blocks of 32 weights = an E8M0 exponent byte + 16 bytes of FP4 (E2M1) nibbles (17 bytes);
 *   src/quant/mxfp4.ts.
 * - mlx<bits>_g<group>_<scale>: MLX affine groups (see MlxDType); per row the packed bits, then
 *   (scale, bias) per group.
 * - fp8_e4m3: per row ceil(cols/128) f32 block scales, then one E4M3 code byte per weight
 *   (src/quant/fp8.ts); any column count (the last block may be short).
 */
import type { DType, MlxDType } from '../backend.js';

export const QK = 32;
export const QK_K = 256;
export const Q8_0_BLOCK_BYTES = 34;
export const Q4_0_BLOCK_BYTES = 18;
export const Q4_K_BLOCK_BYTES = 144;
export const Q5_K_BLOCK_BYTES = 176;
export const Q6_K_BLOCK_BYTES = 210;
export const MXFP4_BLOCK_BYTES = 17;

/** The block-quantized dtypes: [weights per block, bytes per block]. */
export const BLOCK_FORMATS = {
  q8_0: [QK, Q8_0_BLOCK_BYTES],
  q4_0: [QK, Q4_0_BLOCK_BYTES],
  q4_k: [QK_K, Q4_K_BLOCK_BYTES],
  q5_k: [QK_K, Q5_K_BLOCK_BYTES],
  q6_k: [QK_K, Q6_K_BLOCK_BYTES],
  mxfp4: [QK, MXFP4_BLOCK_BYTES],
} as const satisfies Record<string, readonly [number, number]>;
export type BlockDType = keyof typeof BLOCK_FORMATS;

export function isQuantized(dtype: DType): dtype is BlockDType {
  return dtype in BLOCK_FORMATS;
}

/** The K-quant dtypes (256-weight super-blocks, 8-bit activations per super-block in the kernels). */
export function isKQuant(dtype: DType): dtype is 'q4_k' | 'q5_k' | 'q6_k' {
  return dtype === 'q4_k' || dtype === 'q5_k' || dtype === 'q6_k';
}

export interface MlxLayout {
  bits: 2 | 3 | 4 | 6 | 8;
  groupSize: 32 | 64 | 128;
  scales: 'f16' | 'bf16' | 'f32';
}

const MLX_DTYPE = /^mlx([23468])_g(32|64|128)_(f16|bf16|f32)$/;

const mlxNames = new Map<string, boolean>();

/** Whether `dtype` names an MLX layout (remembered per dtype: the backend asks several times per matmul). */
export function isMlx(dtype: DType): dtype is MlxDType {
  let mlx = mlxNames.get(dtype);
  if (mlx === undefined) {
    mlx = MLX_DTYPE.test(dtype);
    mlxNames.set(dtype, mlx);
  }
  return mlx;
}

const layouts = new Map<string, Readonly<MlxLayout>>();

/** The layout an MLX dtype names (parsed once per dtype: the kernels ask on every call). */
export function mlxLayout(dtype: MlxDType): Readonly<MlxLayout> {
  let layout = layouts.get(dtype);
  if (!layout) {
    const m = MLX_DTYPE.exec(dtype);
    if (!m) throw new Error(`not an MLX dtype: ${dtype}`);
    layout = Object.freeze({ bits: Number(m[1]) as MlxLayout['bits'], groupSize: Number(m[2]) as MlxLayout['groupSize'], scales: m[3] as MlxLayout['scales'] });
    layouts.set(dtype, layout);
  }
  return layout;
}

export function mlxDType(l: MlxLayout): MlxDType {
  return `mlx${l.bits}_g${l.groupSize}_${l.scales}`;
}

/** Weights per block of a block dtype, per group of an MLX dtype (1 for the float dtypes). */
export function blockElems(dtype: DType): number {
  if (isMlx(dtype)) return mlxLayout(dtype).groupSize;
  return isQuantized(dtype) ? BLOCK_FORMATS[dtype][0] : 1;
}

/** Columns per FP8 block scale (DeepSeek V3's weight_block_size). */
export const FP8_BLOCK = 128;

/** Bytes of one stored row of `cols` weights. */
export function rowBytes(dtype: DType, cols: number): number {
  switch (dtype) {
    case 'fp8_e4m3':
      return Math.ceil(cols / FP8_BLOCK) * 4 + cols;
    case 'f32':
      return cols * 4;
    case 'f16':
    case 'bf16':
      return cols * 2;
    default: {
      if (isMlx(dtype)) {
        const { bits, groupSize, scales } = mlxLayout(dtype);
        return (cols * bits) / 8 + (cols / groupSize) * (scales === 'f32' ? 8 : 4);
      }
      if (!isQuantized(dtype)) throw new Error(`unknown weight dtype ${String(dtype)}`);
      const [elems, bytes] = BLOCK_FORMATS[dtype];
      return (cols / elems) * bytes;
    }
  }
}

/** Bytes of a `[rows, cols]` weight; errors when a quantized row is not whole blocks. */
export function weightBytes(dtype: DType, rows: number, cols: number): number {
  const be = blockElems(dtype);
  if (cols % be !== 0) throw new Error(`${dtype} weight has ${cols} columns; its blocks need a multiple of ${be}`);
  return rows * rowBytes(dtype, cols);
}
