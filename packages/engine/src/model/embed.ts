/**
 * Sentence embeddings from a decoder model: every token's hidden state after the final norm, pooled
 * (mean over the tokens, the last token, or the first) and L2-normalised, as the model's
 * sentence-transformers files say (modules.json → the Pooling module's config.json, a Normalize
 * module). Without those files: mean pooling, normalised — what OpenAI-style clients expect of a
 * general model. Qwen3-Embedding's layout (last-token pooling, Normalize) is read from its own files.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ModelFormatError } from '../errors.js';
import { checkTokenIds } from './embedding.js';
import { rmsnorm } from './math.js';
import type { ModelShard } from './forward.js';

export type Pooling = 'mean' | 'last' | 'cls';

export interface EmbeddingConfig {
  pooling: Pooling;
  normalize: boolean;
  /** Where the settings came from (a file, or "default"), for messages and /api/show. */
  source: string;
}

const DEFAULT: EmbeddingConfig = { pooling: 'mean', normalize: true, source: 'default' };

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ModelFormatError(`${file}: not valid JSON (${(err as Error).message})`);
  }
}

/** The pooling and normalisation of the model at `dir` (a GGUF file path gets the defaults). */
export function readEmbeddingConfig(dir: string): EmbeddingConfig {
  const modulesFile = join(dir, 'modules.json');
  if (!existsSync(dir) || !statSync(dir).isDirectory() || !existsSync(modulesFile)) return DEFAULT;
  const modules = readJson(modulesFile);
  if (!Array.isArray(modules)) throw new ModelFormatError(`${modulesFile}: expected a list of modules`);
  const typeOf = (m: unknown) => (m && typeof m === 'object' ? String((m as { type?: unknown }).type ?? '') : '');
  const pool = modules.find((m) => typeOf(m).endsWith('.Pooling')) as { path?: unknown } | undefined;
  const normalize = modules.some((m) => typeOf(m).endsWith('.Normalize'));
  if (!pool) return { pooling: DEFAULT.pooling, normalize, source: modulesFile };
  const poolFile = join(dir, String(pool.path ?? ''), 'config.json');
  if (!existsSync(poolFile)) throw new ModelFormatError(`${modulesFile}: the Pooling module's ${poolFile} is missing`);
  const c = readJson(poolFile) as Record<string, unknown>;
  const modes: [string, Pooling][] = [
    ['pooling_mode_lasttoken', 'last'],
    ['pooling_mode_mean_tokens', 'mean'],
    ['pooling_mode_cls_token', 'cls'],
  ];
  const on = modes.filter(([k]) => c[k] === true);
  const other = Object.keys(c).filter((k) => k.startsWith('pooling_mode_') && c[k] === true && !modes.some(([m]) => m === k));
  if (other.length || on.length !== 1)
    throw new ModelFormatError(`${poolFile}: needs exactly one of ${modes.map(([k]) => k).join(', ')} set (found ${[...on.map(([k]) => k), ...other].join(', ') || 'none'})`);
  return { pooling: on[0][1], normalize, source: poolFile };
}

/**
 * The embedding of `ids` on a whole-model shard (every layer, the embedding table and the final norm):
 * the tokens go through in chunks of the shard's batch, each chunk's normed rows are pooled as they come.
 */
export async function embedTokens(shard: ModelShard, ids: ArrayLike<number>, cfg: EmbeddingConfig): Promise<Float32Array> {
  const c = shard.config;
  const [first, last] = shard.spec.layers;
  if (first !== 0 || last !== c.numLayers || shard.spec.tensor.size !== 1 || !shard.spec.embed || !shard.weights.finalNorm)
    throw new Error('embeddings need the whole model on one shard (every layer, the embedding and the final norm)');
  const n = ids.length;
  if (n < 1) throw new RangeError('embeddings: the input has no tokens');
  // All of them before any work: the forward checks each chunk only as it comes.
  checkTokenIds(ids, c.vocabSize);
  const D = c.hiddenSize;
  const out = new Float32Array(D);
  const row = new Float32Array(D);
  const cache = shard.newCache(n);
  try {
    for (let at = 0; at < n; at += shard.maxBatch) {
      const chunk = Array.from({ length: Math.min(shard.maxBatch, n - at) }, (_, i) => ids[at + i]);
      await shard.forward({ tokens: chunk }, cache);
      const x = shard.residual(chunk.length);
      for (let b = 0; b < chunk.length; b++) {
        const pos = at + b;
        const take = cfg.pooling === 'mean' || (cfg.pooling === 'last' && pos === n - 1) || (cfg.pooling === 'cls' && pos === 0);
        if (!take) continue;
        rmsnorm(row, 0, x, b * D, shard.weights.finalNorm, D, c.rmsNormEps);
        for (let i = 0; i < D; i++) out[i] += row[i];
      }
    }
  } finally {
    shard.releaseCache(cache);
  }
  if (cfg.pooling === 'mean') for (let i = 0; i < D; i++) out[i] /= n;
  if (cfg.normalize) normalizeL2(out);
  return out;
}

/** Scales `v` to unit length (a zero vector stays zero). */
export function normalizeL2(v: Float32Array): Float32Array {
  let ss = 0;
  for (let i = 0; i < v.length; i++) ss += v[i] * v[i];
  if (ss > 0) {
    const s = 1 / Math.sqrt(ss);
    for (let i = 0; i < v.length; i++) v[i] *= s;
  }
  return v;
}
