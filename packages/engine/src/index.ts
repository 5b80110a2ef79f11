export type { ShardSpec, AllReduce } from './shard.js';
export type { Backend, Weight, DType } from './kernels/backend.js';
export { ModelFormatError, UnsupportedModelError } from './errors.js';
export {
  buildByteLevelTokenizer,
  byteToUnicode,
  BYTE_LEVEL_SPECIAL_TOKENS,
  CHATML_TEMPLATE,
  type ByteLevelTokenizerOptions,
  type ByteLevelTokenizerFiles,
} from './tokenizer/byte-level.js';
export { writeSafetensors, type TensorToWrite } from './safetensors/writer.js';
export { F16_TO_F32, BF16_TO_F32, f32ToF16Bits, f32ToBf16Bits } from './numeric/half.js';
