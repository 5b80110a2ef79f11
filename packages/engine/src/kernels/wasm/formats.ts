/**
 * Storage layouts of the weight dtypes, as GGUF defines the block formats:
 * - q8_0: blocks of 32 weights = f16 scale d + 32 int8 q (34 bytes); w = q·d.
 * - q4_0: blocks of 32 weights = f16 scale d + 16 bytes; byte j holds weight j in its low nibble and
 *   weight j+16 in its high nibble; w = (q − 8)·d.
 * Rows are stored back to back, each a whole number of blocks (cols % 32 == 0).
 */
import type { DType } from '../backend.js';

export const QK = 32;
export const Q8_0_BLOCK_BYTES = 34;
export const Q4_0_BLOCK_BYTES = 18;

export function isQuantized(dtype: DType): dtype is 'q8_0' | 'q4_0' {
  return dtype === 'q8_0' || dtype === 'q4_0';
}

/** Bytes of one stored row of `cols` weights. */
export function rowBytes(dtype: DType, cols: number): number {
  switch (dtype) {
    case 'f32':
      return cols * 4;
    case 'f16':
    case 'bf16':
      return cols * 2;
    case 'q8_0':
      return (cols / QK) * Q8_0_BLOCK_BYTES;
    case 'q4_0':
      return (cols / QK) * Q4_0_BLOCK_BYTES;
    default:
      throw new Error(`unknown weight dtype ${String(dtype)}`);
  }
}

/** Bytes of a `[rows, cols]` weight; errors when a quantized row is not whole blocks. */
export function weightBytes(dtype: DType, rows: number, cols: number): number {
  if (isQuantized(dtype) && cols % QK !== 0) {
    throw new Error(`${dtype} weight has ${cols} columns; block formats need a multiple of ${QK}`);
  }
  return rows * rowBytes(dtype, cols);
}
