/**
 * The one capability check and model description: whether the engine loads the model at a path, and
 * if so exactly what it loads (every tensor's dtype, shape and byte range per file) and the model's
 * dimensions, MoE and MLA facts; if not, the precise reason (architecture, option, dtype, quantization
 * method, missing tensor, tokenizer).
 *
 * It runs the loader's own stages, not a second reading: the config through `loadModelConfig`, the
 * tensors through the weights plan (`planShardWeights`, which checks every tensor's name, dtype and
 * shape before anything is read) over the whole model, and the tokenizer through `loadTokenizer`.
 * The plan needs headers only, so it also runs over headers fetched before a download
 * (`openFile` + `SafetensorsFile.fromHeader`). A layout the loader learns is described here with it.
 *
 * This file sits above the weights plan (model/weights.ts) because it is that plan; the rest of the
 * format room (model-files.ts, tokenizer.ts) sits below model/.
 */
import { basename } from 'node:path';
import type { ModelConfig } from '../config/config.js';
import { ModelFormatError, UnsupportedModelError } from '../errors.js';
import type { Backend } from '../kernels/backend.js';
import { tensorSlice } from '../model/tensor-split.js';
import { planShardWeights } from '../model/weights.js';
import type { SafetensorsFile } from '../safetensors/reader.js';
import { loadModelConfig, modelFileFormat, openWeights, type ModelFileFormat } from './model-files.js';
import { loadTokenizer } from './tokenizer.js';

/** One tensor the loader reads, by its Hugging Face name (a GGUF's stacked experts: one expert's slab). */
export interface DescribedTensor {
  name: string;
  /** The file it lies in (a name inside the model directory, or the GGUF file's name). */
  file: string;
  /** As the file stores it (safetensors: F32, BF16, U32 …; GGUF: Q4_K, MXFP4 …). */
  dtype: string;
  shape: number[];
  /** Absolute byte offset in the file. */
  offset: number;
  bytes: number;
}

export interface ModelFileDescription {
  loadable: true;
  path: string;
  format: ModelFileFormat;
  /** Dimensions, MoE and MLA facts, as the engine runs them. */
  config: ModelConfig;
  /** Every tensor the loader reads for the whole model, in the loader's order. */
  tensors: DescribedTensor[];
  /** Sum of `tensors[].bytes`. */
  weightBytes: number;
  /** Whether the tokenizer was built (false when the caller skipped it). */
  tokenizerChecked: boolean;
}

export interface ModelRefusal {
  loadable: false;
  path: string;
  format: ModelFileFormat;
  /** Which of the loader's stages refused. */
  stage: 'config' | 'weights' | 'tokenizer';
  reason: string;
  /**
   * `files`: the files are damaged or disagree with each other (truncated, a tensor missing or of the
   * wrong shape: ModelFormatError) and fixing them fixes it; `unsupported`: whole files of something
   * the engine does not run (an architecture, dtype or quantization method: UnsupportedModelError).
   */
  cause: 'files' | 'unsupported';
  /** The config, when that stage passed (a model may still be sized from it). */
  config?: ModelConfig;
}

export interface DescribeFilesOptions {
  /** Safetensors files by name in place of opening them: headers fetched before a download. */
  openFile?: (name: string) => SafetensorsFile;
  /** Build the tokenizer too (the runner does before it serves). @default true */
  tokenizer?: boolean;
}

/** Quantization methods whose tensors the weights plan reads under their own names (gpt-oss's MXFP4 blocks). */
const PLANNED_METHODS = new Set(['mxfp4']);

export function describeModelFiles(path: string, options: DescribeFilesOptions = {}): ModelFileDescription | ModelRefusal {
  const format = modelFileFormat(path);
  let config: ModelConfig;
  try {
    config = loadModelConfig(path);
  } catch (err) {
    return { loadable: false, path, format, stage: 'config', reason: refusalText(err), cause: causeOf(err) };
  }
  let tensors: DescribedTensor[];
  try {
    tensors = plannedTensors(path, config, options.openFile);
  } catch (err) {
    const method = config.quantMethod;
    const reason = method && !PLANNED_METHODS.has(method) ? `quantization method ${method} (config.json quantization_config.quant_method) is not supported: ${refusalText(err)}` : refusalText(err);
    return { loadable: false, path, format, stage: 'weights', reason, cause: causeOf(err), config };
  }
  const tokenizerChecked = options.tokenizer ?? true;
  if (tokenizerChecked) {
    try {
      loadTokenizer(path);
    } catch (err) {
      return { loadable: false, path, format, stage: 'tokenizer', reason: refusalText(err), cause: causeOf(err), config };
    }
  }
  return { loadable: true, path, format, config, tensors, weightBytes: tensors.reduce((a, t) => a + t.bytes, 0), tokenizerChecked };
}

/**
 * The weights plan of the whole model (one tensor rank, every layer, embedding and head), one layer at
 * a time so that nothing but the plan is held; every tensor it reads, once.
 */
function plannedTensors(path: string, config: ModelConfig, openFile?: (name: string) => SafetensorsFile): DescribedTensor[] {
  const ckpt = openWeights(path, config, { openFile });
  try {
    const slice = tensorSlice(config, 0, 1);
    const backend = sizingBackend();
    const seen = new Map<string, DescribedTensor>();
    const last = config.numLayers - 1;
    for (let l = 0; l <= last; l++) {
      const spec = { layers: [l, l + 1] as [number, number], tensor: { rank: 0, size: 1 }, embed: l === 0, head: l === last };
      for (const r of planShardWeights(ckpt, config, spec, slice, backend, { sizing: true }).reads) {
        if (seen.has(r.name)) continue;
        seen.set(r.name, { name: r.name, file: basename(r.file.path), ...r.file.tensorRange(r.name) });
      }
    }
    return [...seen.values()];
  } finally {
    ckpt.close();
  }
}

/** A backend that allocates nothing: the plan only checks and records reads, which never run. */
function sizingBackend(): Backend {
  const none = () => {
    throw new Error('the sizing backend computes nothing');
  };
  return { name: 'sizing', allocF32: () => new Float32Array(0), allocBytes: () => new Uint8Array(0), matvec: none, matmul: none };
}

function causeOf(err: unknown): ModelRefusal['cause'] {
  return err instanceof ModelFormatError ? 'files' : 'unsupported';
}

function refusalText(err: unknown): string {
  if (err instanceof ModelFormatError || err instanceof UnsupportedModelError) return err.message;
  throw err;
}
