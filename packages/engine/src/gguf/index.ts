export {
  writeGguf,
  gguf,
  GgufValueType,
  GgmlType,
  GGUF_MAGIC,
  GGUF_VERSION,
  GGUF_DEFAULT_ALIGNMENT,
  type GgufMetadata,
  type GgufMetadataValue,
  type GgufScalarType,
  type GgufTensorSource,
  type GgufTensorType,
  type WriteGgufOptions,
  type WrittenGguf,
} from './write.js';
export { hfToGguf, llama3RopeFactors, type HfToGgufOptions, type HfToGgufResult } from './convert.js';
export { permuteRope, type GgufArch } from './convert-tensors.js';
export { ggufTensorSizes, ggufTensorName, hfTensorName } from './read-model.js';
export { GGML_TYPES, isGgufPath, readOneGgufFile } from './read.js';
export { ggufTokenizerMetadata, type TokenizerIds } from './convert-tokenizer.js';
export { PRE_TOKENIZERS, preNameOf } from './pre-tokenizers.js';
export { ggufSplitName, ggufSplitNames, parseGgufSplitName, readGgufFile } from './read-split.js';
export { writeGgufSplit, splitGroups, type GgufSplitOptions } from './write-split.js';
