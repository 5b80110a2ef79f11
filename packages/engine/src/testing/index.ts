/** Test helpers: random-weight models in Hugging Face layout (and MLX-quantized from them). Not for production use. */
export {
  writeRandomModel,
  type RandomModelOptions,
  type RandomModelInfo,
  type RandomModelVariant,
  type RandomModelDType,
} from './random-model.js';
export type { MoeOptions } from './random-moe.js';
export { writeSafetensors, type TensorToWrite } from '../safetensors/writer.js';
export { writeMlxModel, type MlxModelOptions } from './mlx-model.js';
export { writeMlxMoeModel, type MlxMoeModelOptions } from './mlx-moe-model.js';
export { writeAwqModel } from './awq-model.js';
/** The engine's seeded PRNG, for tests and simulations that must repeat exactly. */
export { Prng } from '../numeric/prng.js';
export {
  buildByteLevelTokenizer,
  byteToUnicode,
  BYTE_LEVEL_SPECIAL_TOKENS,
  CHATML_TEMPLATE,
  type ByteLevelTokenizerOptions,
  type ByteLevelTokenizerFiles,
} from '../tokenizer/byte-level.js';
export {
  writeFp8Model,
  writeInt4PackedModel,
  kimiInt4QuantizationConfig,
  DEEPSEEK_FP8_QUANTIZATION_CONFIG,
  type QuantizedHfOptions,
} from './quantized-hf.js';
