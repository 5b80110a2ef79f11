/**
 * Where the choice of file format is made: a path is a GGUF file or a Hugging Face directory
 * (config.json + safetensors). Below this room the readers know one format each; above it the model
 * code asks for "the model at this path" and never looks at the format again.
 */
import type { ModelConfig } from '../config/config.js';
import { loadConfigJson } from '../config/config.js';
import { isGgufPath } from '../gguf/read.js';
import { GgufCheckpoint, loadGgufConfig } from '../gguf/read-model.js';
import { Checkpoint } from '../safetensors/checkpoint.js';
import type { SafetensorsFile } from '../safetensors/reader.js';

export { isGgufPath };

export type ModelFileFormat = 'safetensors' | 'gguf';

export function modelFileFormat(path: string): ModelFileFormat {
  return isGgufPath(path) ? 'gguf' : 'safetensors';
}

/** The model's validated config: a GGUF's metadata, or config.json (+ generation_config.json). */
export function loadModelConfig(path: string): ModelConfig {
  return isGgufPath(path) ? loadGgufConfig(path) : loadConfigJson(path);
}

export interface OpenWeightsOptions {
  /** Safetensors weight files by name in place of opening them (headers fetched before a download). */
  openFile?: (name: string) => SafetensorsFile;
}

/** The model's tensors under Hugging Face names, whatever the file format. */
export function openWeights(path: string, config: ModelConfig, options: OpenWeightsOptions = {}): Checkpoint | GgufCheckpoint {
  return isGgufPath(path) ? GgufCheckpoint.open(path, config) : Checkpoint.open(path, { openFile: options.openFile });
}
