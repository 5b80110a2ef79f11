import { basename } from 'node:path';
import { ModelFormatError, UnsupportedModelError } from '@orchard/engine';
import { ggufPlanInput, isGgufPath } from '@orchard/engine/gguf';
import { type ModelOptions, type ModelSpec, withTensorSizes } from '@orchard/partitioner';
import { loadModel } from '@orchard/partitioner/loader';
import { CliError } from '../errors.js';

/**
 * The planner's description of `--model PATH`: a GGUF file through the engine's header reader (its
 * hyper-parameters and every tensor's exact packed size, the bytes the engine then loads), anything
 * else through the partitioner's loader (config.json and safetensors headers). The partitioner does
 * not read GGUF itself: the engine's reader is the one description of that format.
 */
export async function planModel(path: string, options: ModelOptions): Promise<ModelSpec> {
  if (!isGgufPath(path)) return loadModel(path, options);
  try {
    const { config, tensors } = ggufPlanInput(path);
    return withTensorSizes(config, tensors, { ...options, name: options.name ?? basename(path) });
  } catch (err) {
    if (err instanceof ModelFormatError || err instanceof UnsupportedModelError) throw new CliError(err.message, 2);
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new CliError(`model ${path} does not exist`, 2);
    throw err;
  }
}
