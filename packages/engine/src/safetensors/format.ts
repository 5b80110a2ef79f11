/** safetensors dtype names and element sizes (https://github.com/huggingface/safetensors). */
export const SAFETENSORS_DTYPE_SIZES: Record<string, number> = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E4M3: 1,
  F8_E5M2: 1,
  I16: 2,
  U16: 2,
  F16: 2,
  BF16: 2,
  I32: 4,
  U32: 4,
  F32: 4,
  I64: 8,
  U64: 8,
  F64: 8,
};

/** One tensor's entry in a safetensors header; offsets are relative to the data section. */
export interface TensorInfo {
  dtype: string;
  shape: number[];
  /** [begin, end) byte offsets inside the data section (after the 8-byte length and the header). */
  dataOffsets: [number, number];
}
