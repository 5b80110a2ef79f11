/**
 * The one adapter from a model on disk to what planning needs: the engine's validated config (the
 * same parse `loadShard` uses, so both agree on every default, e.g. untied embeddings when
 * `tie_word_embeddings` is absent) plus exact tensor sizes from safetensors headers when the
 * directory has them. `orchard plan`, the daemon's catalog and the dashboard all describe models here.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { canRun, instanceLayoutOf, loadModelConfig, ModelFormatError, modelConfigFromJson, UnsupportedModelError, type ModelConfig } from '@orchard/engine';
import { ggufTensorSizes, isGgufPath } from '@orchard/engine/gguf';
import { modelFromConfig, withTensorSizes, type Layout, type PlanOptions } from '@orchard/partitioner';
import { loadModel, readTensorSizes } from '@orchard/partitioner/loader';
import type { ModelDescription } from './description.js';

export interface DescribeOptions {
  /** The name plans show (a model id). @default the directory's name */
  name?: string;
  /** Plan as if the weights were quantized to this many bits (`orchard plan --bits`). */
  bits?: number;
}

/**
 * Describes the model at `path` (a model directory, its config.json, or a GGUF file). A model whose
 * architecture the engine does not run is still sized from its config (for `orchard plan`), marked
 * `unsupported` with the engine's reason so placement refuses it.
 */
export async function describeModel(path: string, o: DescribeOptions = {}): Promise<ModelDescription> {
  const isFile = existsSync(path) && statSync(path).isFile();
  const isJson = isFile && path.endsWith('.json');
  const dir = isJson ? dirname(path) : path;
  const name = o.name ?? (isJson && basename(path) !== 'config.json' ? basename(path).replace(/\.json$/, '') : basename(isFile && !isJson ? path : dir));
  let config: ModelConfig;
  try {
    config = isJson ? modelConfigFromJson(readConfig(path), { path }) : loadModelConfig(dir);
  } catch (err) {
    // A config the engine refuses is still sized by the planner's own reading, whose field errors are
    // the more precise ones (the engine stops at the first thing it cannot run, e.g. no architectures).
    const refused = err instanceof UnsupportedModelError || err instanceof ModelFormatError;
    if (!refused || !isJson && !existsSync(join(dir, 'config.json'))) throw err;
    return sizedOnly(isJson ? path : dir, name, o.bits, err.message);
  }
  const raw = existsSync(join(dir, 'config.json')) && !isFile ? readConfig(join(dir, 'config.json')) : isJson ? readConfig(path) : configOf(config);
  // The engine's reading of the config wins where the file leaves a field to a default.
  raw.tie_word_embeddings = config.tieWordEmbeddings;
  // exact sizes: safetensors headers of a directory, a GGUF's tensor table (packed K-quant/MXFP4 bytes)
  const sizes = o.bits !== undefined ? null : !isFile ? await readTensorSizes(dir) : isGgufPath(path) ? ggufTensorSizes(path) : null;
  const spec = sizes ? withTensorSizes(raw, sizes, { name, bits: o.bits }) : modelFromConfig(raw, { name, bits: o.bits });
  return {
    spec,
    dims: { numLayers: config.numLayers, numHeads: config.numHeads, numKvHeads: config.numKvHeads, intermediateSize: config.intermediateSize, vocabSize: config.vocabSize },
    maxContext: config.maxPositionEmbeddings,
  };
}

/** A model the engine cannot run: the planner's own reading of the config (and headers), for sizing. */
async function sizedOnly(path: string, name: string, bits: number | undefined, reason: string): Promise<ModelDescription> {
  const spec = await loadModel(path, { name, bits });
  const raw = readConfig(path.endsWith('.json') ? path : join(path, 'config.json'));
  const int = (k: string, d: number) => (typeof raw[k] === 'number' && (raw[k] as number) > 0 ? (raw[k] as number) : d);
  return {
    spec,
    dims: { numLayers: spec.numLayers, numHeads: spec.numHeads, numKvHeads: spec.numKvHeads, intermediateSize: int('intermediate_size', spec.maxIntermediate || 1), vocabSize: spec.vocabSize },
    maxContext: int('max_position_embeddings', 4096),
    unsupported: reason,
  };
}

/**
 * What the planner is told about the engine for this model: it only proposes layouts the engine runs
 * (same tensor group size in every stage, whole heads, every rank some MLP and vocabulary rows).
 */
export function engineCapabilities(d: ModelDescription): PlanOptions {
  if (d.unsupported) return {};
  return {
    runnable: (layout: Layout) => {
      try {
        const r = canRun(d.dims, instanceLayoutOf(layout.stages));
        return r.ok ? true : r.reason;
      } catch (err) {
        if (err instanceof UnsupportedModelError) return err.message;
        throw err;
      }
    },
  };
}

function readConfig(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
}

/** A config.json for a model that came without one (GGUF): the fields the planner reads. */
function configOf(c: ModelConfig): Record<string, unknown> {
  return {
    architectures: [c.architecture],
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numLayers,
    num_attention_heads: c.numHeads,
    num_key_value_heads: c.numKvHeads,
    head_dim: c.headDim,
    vocab_size: c.vocabSize,
    max_position_embeddings: c.maxPositionEmbeddings,
    tie_word_embeddings: c.tieWordEmbeddings,
  };
}
