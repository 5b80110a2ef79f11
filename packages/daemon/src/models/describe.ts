/**
 * The one adapter from a model's files to what planning needs: the engine's description of the model
 * (`describeModelFiles`: the loader's own config reading and weights plan, so the planner sizes exactly
 * the tensors the engine will load, a GGUF's experts included) handed to the planner as plain data.
 * `orchard plan`, the daemon's catalog, placement and the dashboard all describe models here.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import {
  canRun,
  describeModelFiles,
  instanceLayoutOf,
  ModelFormatError,
  modelConfigFromJson,
  UnsupportedModelError,
  type ModelConfig,
  type ModelFileDescription,
  type SafetensorsFile,
} from '@orchard/engine';
import { modelFromConfig, modelFromDescription, withTensorSizes, type DescribedModel, type Layout, type PlanOptions } from '@orchard/partitioner';
import { loadModel } from '@orchard/partitioner/loader';
import type { ModelDescription } from './description.js';

export interface DescribeOptions {
  /** The name plans show (a model id). @default the directory's name */
  name?: string;
  /**
   * Damaged weight files (truncated, a tensor missing or misshapen) throw ModelFormatError instead of
   * being sized and marked unsupported: a whole local model, which the catalog then marks failed.
   */
  refuseDamaged?: boolean;
  /** Plan as if the weights were quantized to this many bits (`orchard plan --bits`). */
  bits?: number;
  /** Safetensors files by name from their headers alone (fetched before a download, describe-hub.ts). */
  openFile?: (name: string) => SafetensorsFile;
  /** With `openFile`: every tensor's bytes in those headers, to size a model the engine refuses. */
  headerSizes?: { name: string; bytes: number }[];
}

/**
 * Describes the model at `path` (a model directory, its config.json, or a GGUF file). A model the
 * engine refuses (architecture, dtype, quantization method, missing tensor) is still sized from its
 * config and headers (for `orchard plan`), marked `unsupported` with the engine's reason so placement
 * refuses it. A directory holding only a config is planned from the config's dimensions.
 */
export async function describeModel(path: string, o: DescribeOptions = {}): Promise<ModelDescription> {
  const isFile = existsSync(path) && statSync(path).isFile();
  const isJson = isFile && path.endsWith('.json');
  const dir = isJson ? dirname(path) : path;
  const name = o.name ?? (isJson && basename(path) !== 'config.json' ? basename(path).replace(/\.json$/, '') : basename(isFile && !isJson ? path : dir));
  if (isJson) return configOnly(path, name, o.bits);
  const d = describeModelFiles(path, { tokenizer: false, openFile: o.openFile });
  if (d.loadable) return fromEngine(d, name, o.bits);
  if (isFile) throw new UnsupportedModelError(d.reason);
  // Damaged files (truncated, a tensor missing or misshapen) are not a model to size: the caller names them.
  if (o.refuseDamaged && d.cause === 'files' && d.stage === 'weights') throw new ModelFormatError(d.reason, path);
  if (d.config && !o.openFile && !hasWeightFiles(dir)) return configOnly(join(dir, 'config.json'), name, o.bits, d.config);
  // A config the engine refuses is still sized by the planner's own reading, whose field errors are
  // the more precise ones (the engine stops at the first thing it cannot run, e.g. no architectures).
  if (!existsSync(join(dir, 'config.json'))) throw new ModelFormatError(d.reason, join(dir, 'config.json'));
  return sizedOnly(dir, name, o.bits, d.reason, o.headerSizes);
}

/** The engine's description as the planner's plain-data input. */
export function describedModel(d: ModelFileDescription): DescribedModel {
  const c = d.config;
  return {
    architecture: c.architecture,
    numLayers: c.numLayers,
    hiddenSize: c.hiddenSize,
    vocabSize: c.vocabSize,
    numHeads: c.numHeads,
    numKvHeads: c.numKvHeads,
    headDim: c.headDim,
    intermediateSize: c.intermediateSize,
    tiedEmbeddings: c.tieWordEmbeddings,
    ...(c.mla && { mla: { qLoraRank: c.mla.qLoraRank, kvLoraRank: c.mla.kvLoraRank, nopeDim: c.mla.nopeDim, ropeDim: c.mla.ropeDim, vDim: c.mla.vDim } }),
    ...(c.moe && { moe: { experts: c.moe.experts, topK: c.moe.topK, expertIntermediate: c.moe.expertIntermediate, sharedIntermediate: c.moe.sharedIntermediate, sparse: c.moe.sparse } }),
    tensors: d.tensors.map((t) => ({ name: t.name, bytes: t.bytes })),
    source: d.format === 'gguf' ? 'GGUF' : 'safetensors',
  };
}

function fromEngine(d: ModelFileDescription, name: string, bits: number | undefined): ModelDescription {
  return { spec: modelFromDescription(describedModel(d), { name, bits }), dims: dimsOf(d.config), maxContext: d.config.maxPositionEmbeddings };
}

/** A config without weights (a config.json file, or a directory holding no weight files): sized from its dimensions. */
function configOnly(configPath: string, name: string, bits: number | undefined, parsed?: ModelConfig): ModelDescription | Promise<ModelDescription> {
  const raw = readConfig(configPath);
  let config: ModelConfig;
  try {
    config = parsed ?? modelConfigFromJson(raw, { path: configPath });
  } catch (err) {
    if (!(err instanceof UnsupportedModelError || err instanceof ModelFormatError)) throw err;
    return sizedOnly(configPath, name, bits, err.message);
  }
  // The engine's reading of the config wins where the file leaves a field to a default.
  raw.tie_word_embeddings = config.tieWordEmbeddings;
  return { spec: modelFromConfig(raw, { name, bits }), dims: dimsOf(config), maxContext: config.maxPositionEmbeddings };
}

function dimsOf(c: ModelConfig): ModelDescription['dims'] {
  return { numLayers: c.numLayers, numHeads: c.numHeads, numKvHeads: c.numKvHeads, intermediateSize: c.intermediateSize, vocabSize: c.vocabSize };
}

function hasWeightFiles(dir: string): boolean {
  return readdirSync(dir).some((f) => f.endsWith('.safetensors') || f === 'model.safetensors.index.json');
}

/** A model the engine cannot run: the planner's own reading of the config (and headers), for sizing. */
async function sizedOnly(path: string, name: string, bits: number | undefined, reason: string, headerSizes?: { name: string; bytes: number }[]): Promise<ModelDescription> {
  const raw = readConfig(path.endsWith('.json') ? path : join(path, 'config.json'));
  const spec = headerSizes ? withTensorSizes(raw, headerSizes, { name, bits }) : await loadModel(path, { name, bits });
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
