/**
 * @orchard/engine — loads Hugging Face model directories and runs one shard of them.
 *
 * Typical use:
 *   const model = loadInProcessModel(dir, { pipeline: 1, tensor: 1 });  // or loadShard() per machine
 *   const tokenizer = loadTokenizer(dir);
 *   const r = await generate(model, tokenizer.encode('In the beginning'), { tokenizer, maxTokens: 64, onText: write });
 *
 * A distributed runner loads one `ModelShard` per process with `loadShard(dir, spec, { allReduce })`
 * and moves between processes itself: the rows `shard.embed()` gives on the first stage's tensor rank
 * 0, the hidden states `shard.forward()` returns between pipeline stages, and the head ranks' logit
 * slices (`joinLogitSlices`).
 */
export type { ShardSpec, AllReduce } from './shard.js';
export type { Backend, Weight, DType } from './kernels/backend.js';
export { createReferenceBackend } from './kernels/reference.js';
export { createWasmBackend, type WasmBackend, type WasmBackendOptions } from './kernels/wasm/backend.js';
export { relaxedSimdAvailable, type SimdBuild, type SimdChoice } from './kernels/wasm/module.js';
export { ModelFormatError, UnsupportedModelError } from './errors.js';

// Model directory: config, weights, tokenizer.
export { modelConfigFromJson, type ModelConfig, type RopeScaling, type MoeConfig, type MlaConfig } from './config/config.js';
export { GGUF_LOADABLE_TYPES } from './gguf/read.js';
export { loadModelConfig, openWeights, isGgufPath, modelFileFormat, type ModelFileFormat } from './format/model-files.js';
export { describeModelFiles, type ModelFileDescription, type ModelRefusal, type DescribedTensor, type DescribeFilesOptions } from './format/describe.js';
export { lookupArchitecture, supportedArchitectures } from './config/architectures/registry.js';
export type { ArchitectureCaps } from './config/architectures/types.js';
export { SafetensorsFile } from './safetensors/reader.js';
export { Checkpoint } from './safetensors/checkpoint.js';
export { writeSafetensors, type TensorToWrite } from './safetensors/writer.js';
export { type ModelTokenizer, type ChatMessage } from './tokenizer/load.js';
export { loadTokenizer } from './format/tokenizer.js';
export { ChatTemplate, ChatTemplateError, pythonJson, type ChatTemplateCaps, type ToolDefinition, type ToolCall, type RenderOptions } from './tokenizer/chat-template.js';
export { vocabularyOf, type TokenVocabulary } from './tokenizer/vocabulary.js';
export {
  buildByteLevelTokenizer,
  byteToUnicode,
  BYTE_LEVEL_SPECIAL_TOKENS,
  CHATML_TEMPLATE,
  type ByteLevelTokenizerOptions,
  type ByteLevelTokenizerFiles,
} from './tokenizer/byte-level.js';

// Shards and the forward pass.
export { loadShard, loadShardAsync, ModelShard, KVCache, type LoadShardOptions, type ShardInput, type BatchSegment } from './model/forward.js';
export { embedTokens, readEmbeddingConfig, normalizeL2, type EmbeddingConfig, type Pooling } from './model/embed.js';
export { tensorSlice, vocabSlice, joinLogitSlices, type TensorSlice, type SplitDims } from './model/tensor-split.js';
export { kvCacheValuesPerToken } from './model/kv-cache-size.js';
export { PrefixCache, cpuKvBlocks, type KvBlocks, type PrefixCacheable, type PrefixCacheOptions } from './model/prefix-cache.js';

// Layouts: how an instance's ranks split the model, and whether the engine runs a layout.
export {
  canRun,
  checkLayout,
  instanceLayoutOf,
  pipelineStages,
  rankOf,
  samplerRank,
  shardSpecOf,
  stageMembers,
  stageOf,
  worldSize,
  type CanRun,
  type InstanceLayout,
  type LayoutDims,
} from './layout.js';

// Whole models in one process (unsplit, or as N pipeline stages × M tensor ranks).
export {
  loadInProcessModel,
  InProcessModel,
  type LanguageModel,
  type Session,
  type InProcessOptions,
  type BatchStep,
} from './drivers/in-process.js';
export { createInProcessAllReduce } from './drivers/all-reduce.js';

// Generation.
export { generate, type GenerateOptions, type GenerateResult } from './generate/generate.js';
export { draftFromContext, type PromptLookupOptions } from './generate/prompt-lookup.js';
export { pickVerified } from './generate/speculate.js';
export { DraftCost, DraftPolicy, PRIOR_COST, bestDraftLength, cpuTimeMs, expectedExtra, type StepCostModel } from './generate/draft-policy.js';
export { MtpDrafter } from './generate/mtp-draft.js';
export { MtpHead, type MtpHeadOptions, type MtpOutput } from './model/mtp.js';
export { Sampler, argmax, validateSampling, tokenLogprob, DEFAULT_REPEAT_LAST_N, penaltiesOf, penaltyHistory, type SamplingOptions, type SamplingPenalties, type FullSamplingOptions, type TokenLogprob } from './generate/sampler.js';
export { pickToken } from './generate/pick.js';
export {
  compileConstraint,
  compileConstraintOrDrop,
  parseConstraintSpec,
  ConstraintError,
  type ConstraintSpec,
  type StructuralFormat,
  type TagFormat,
  type JsonSchema,
  type TokenConstraint,
  type CompileOptions,
} from './generate/constraint.js';
export { TextStream } from './generate/text-stream.js';

export { F16_TO_F32, BF16_TO_F32, f32ToF16Bits, f32ToBf16Bits } from './numeric/half.js';

// GPU (WebGPU through Dawn). Dawn itself is imported only when a context is created, so these exports
// cost nothing on machines without a GPU or a Vulkan driver.
export {
  createGpuContext,
  describeAdapter,
  summarizeAdapter,
  GpuUnavailableError,
  GpuDeviceLostError,
  GpuOutOfMemoryError,
  GpuValidationError,
  type GpuContext,
  type GpuContextOptions,
  type GpuAdapterSummary,
  type GpuLimits,
} from './kernels/gpu/context.js';
export { missingVulkanDriver } from './kernels/gpu/vulkan-icd.js';
export { chooseGpu, profileGpu, type GpuChoice, type GpuProfile } from './kernels/gpu/probe.js';
export { GpuShard, GpuKVCache, type GpuShardOptions, type GpuBatchSegment } from './kernels/gpu/shard.js';
export { loadGpuModel, GpuModel, type GpuModelOptions } from './kernels/gpu/model.js';
