/**
 * The engine's house plan: its rooms stand on floors, and an import only ever points down (or
 * across one floor). Built from the sources with TypeScript's own pre-processor, so type imports,
 * re-exports and dynamic imports all count. A new circle or a new upward arrow fails here; the few
 * that remain are listed below, each with its reason.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { circles, importGraph, upwardArrows, type Floors } from '../../../test/harness/house.js';

const SRC = join(dirname(fileURLToPath(import.meta.url)), '../src');

/**
 * Floors, lowest first. A file belongs to the floor of the longest prefix that matches its path
 * under src/. Where a room's files stand on different floors (gguf/, kernels/, format/), the
 * prefixes say which.
 */
const FLOORS: Floors = [
  // Numbers, errors and the plain shapes everything else speaks in.
  ['numeric', ['numeric/', 'errors.ts', 'shard.ts', 'open-model-file.ts', 'kernels/backend.ts', 'kernels/wasm/formats.ts']],
  // Container files: safetensors and GGUF bytes in and out, no model knowledge.
  ['readers', ['safetensors/', 'gguf/read.ts', 'gguf/read-split.ts', 'gguf/write.ts', 'gguf/write-split.ts', 'gguf/pre-tokenizers.ts']],
  ['tokenizer', ['tokenizer/']],
  ['config', ['config/']],
  // GGUF metadata read as a ModelConfig and a tokenizer.
  ['gguf-read', ['gguf/read-model.ts', 'gguf/read-moe.ts', 'gguf/read-tokenizer.ts']],
  ['quant', ['quant/']],
  // CPU kernels and the reference backend (dequantizing through quant/).
  ['kernels', ['kernels/reference.ts', 'kernels/wasm/']],
  // Fixtures that write real-format checkpoints for tests and benches.
  ['testing', ['testing/']],
  // HF -> GGUF export: quantizes through quant/ and kernels/wasm.
  ['gguf-convert', ['gguf/convert', 'gguf/index.ts']],
  // Choosing a model's file format and tokenizer; the model loads through it.
  ['format', ['format/']],
  ['model', ['model/']],
  // Describing a model is running its weights plan (model/weights.ts) without reading, so
  // format/describe.ts stands above model/, unlike the rest of format/.
  ['describe', ['format/describe.ts']],
  ['layout', ['layout.ts']],
  ['drivers', ['drivers/']],
  // The WebGPU backend runs whole models (drivers, model plans), so it stands above them.
  ['gpu', ['kernels/gpu/']],
  ['generate', ['generate/']],
  ['index', ['index.ts']],
];

/** Upward arrows that remain, each with its reason. */
const UPWARD_EXCEPTIONS: Record<string, string> = {};

/** Circles that remain (as their sorted files), each with its reason. */
const CIRCLE_EXCEPTIONS: Record<string, string> = {};

describe('engine house plan', () => {
  const graph = importGraph(SRC);

  it('reads the real import graph', () => {
    expect(graph.get('index.ts')?.length).toBeGreaterThan(10);
    expect(graph.get('quant/fp8.ts')).toContain('quant/read-scratch.ts');
  });

  it('has no import circles beyond the listed ones', () => {
    expect(circles(graph)).toEqual(Object.keys(CIRCLE_EXCEPTIONS).sort());
  });

  it('has no arrow from a lower floor to a higher one beyond the listed ones', () => {
    expect(upwardArrows(graph, FLOORS)).toEqual(Object.keys(UPWARD_EXCEPTIONS).sort());
  });

  it('keeps quant/ and kernels/ free of model/', () => {
    const offending = [...graph].flatMap(([from, targets]) =>
      /^(quant|kernels\/wasm|kernels\/reference)/.test(from) ? targets.filter((t) => t.startsWith('model/')).map((t) => `${from} -> ${t}`) : [],
    );
    expect(offending).toEqual([]);
  });
});
