/**
 * Random-weight Llama models for the benchmarks, written once into $TMPDIR/<name> (HF directory plus
 * f16, Q8_0, Q4_0 and pure Q4_K GGUFs from the project's own converter, each on its first use) so later
 * runs skip writing them. Both engines of a comparison read the same GGUF bytes.
 */
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hfToGguf, type GgufExportDtype } from '../src/gguf/convert.js';
import { writeRandomModel } from '../src/testing/random-model.js';

export type Dtype = 'f16' | 'q8_0' | 'q4_0' | 'q4_k';
export const DTYPES: Dtype[] = ['f16', 'q8_0', 'q4_0', 'q4_k'];

/** A Llama shape with an untied head; `name` is the cache directory (change it when the shape changes). */
export interface BenchModelShape {
  name: string;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  vocab: number;
}

export function parameterCount(c: BenchModelShape): number {
  const hd = c.hiddenSize / c.numHeads;
  const perLayer = 2 * c.hiddenSize * c.hiddenSize + 2 * c.hiddenSize * c.numKvHeads * hd + 3 * c.hiddenSize * c.intermediateSize + 2 * c.hiddenSize;
  return c.numLayers * perLayer + 2 * c.vocab * c.hiddenSize + c.hiddenSize;
}

/** The model's HF directory and its GGUFs in `dtypes`, written on first use. */
export function generatedModel<D extends Dtype>(shape: BenchModelShape, log: (s: string) => void, dtypes: readonly D[]): { dir: string; ggufs: Record<D, string> } {
  const { name, vocab, ...dims } = shape;
  const options = { variant: 'llama' as const, ...dims, extraVocab: vocab - 259, maxPositionEmbeddings: 512, dtype: 'f16' as const, seed: 1 };
  const dir = randomModelDir(name, `${(parameterCount(shape) / 1e6).toFixed(0)}M-parameter random model`, options, log);
  return { dir, ggufs: ggufsOf(dir, join(tmpdir(), name), log, dtypes) };
}

/** A random model's HF directory (`writeRandomModel` options), written once as $TMPDIR/<cache>/hf. */
export function randomModelDir(cache: string, what: string, options: Parameters<typeof writeRandomModel>[1], log: (s: string) => void): string {
  const root = join(tmpdir(), cache);
  const dir = join(root, 'hf');
  if (!existsSync(join(dir, 'model.safetensors'))) {
    log(`writing a ${what} to ${dir} (once)`);
    const tmp = join(root, `hf-${process.pid}`);
    mkdirSync(root, { recursive: true });
    writeRandomModel(tmp, options);
    renameSync(tmp, dir);
  }
  return dir;
}

/** GGUFs of `dir` in `dtypes` (any format hfToGguf writes), converted into `outDir` on first use. */
export function ggufsOf<D extends GgufExportDtype = Dtype>(dir: string, outDir: string, log: (s: string) => void, dtypes: readonly D[]): Record<D, string> {
  const out = {} as Record<D, string>;
  for (const dt of dtypes) {
    const path = join(outDir, `model-${dt}.gguf`);
    if (!existsSync(path)) {
      log(`converting ${dir} to ${dt} GGUF`);
      const tmp = `${path}.${process.pid}.tmp.gguf`;
      hfToGguf(dir, tmp, { dtype: dt });
      renameSync(tmp, path);
    }
    out[dt] = path;
  }
  return out;
}
