/**
 * The model behind `decode-moe-mlx4` / `prefill-moe-mlx4` and `decode-moe-fp8` / `prefill-moe-fp8`: one
 * random Qwen3-MoE float model (BF16, as Qwen3's releases are), written once, then
 * - `mlx4`: the directory mlx-lm's `convert -q` writes from it (4-bit groups of 64, experts stacked as
 *   `switch_mlp`, the router at 8 bits by qwen3_moe's predicate), against llama.cpp on its Q4_K_M GGUF;
 * - `fp8`: the layout of Qwen3's FP8 repositories (F8_E4M3 + BF16 `weight_scale_inv` per 128x128 block,
 *   BF16 around them), against llama.cpp on its Q8_0 GGUF;
 * - `int4`: Kimi-K2-Thinking's compressed-tensors pack-quantized layout (the routed experts' projections
 *   as symmetric INT4 in groups of 32, everything else BF16), against llama.cpp on its Q4_0 GGUF (symmetric
 *   4-bit in groups of 32 too, but every matrix: llama.cpp reads fewer attention bytes).
 * Both GGUFs come from the same float directory, so both engines run the same parameters. Every matrix
 * input is a whole number of 256-blocks (hidden 768, experts of 768), so llama.cpp's Q4_K_M keeps its
 * K-quants instead of falling back to Q8_0 on odd rows.
 */
import { existsSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeFp8Model, writeInt4PackedModel } from '../src/testing/quantized-hf.js';
import { writeMlxMoeModel } from '../src/testing/mlx-moe-model.js';
import type { RandomModelOptions } from '../src/testing/random-model.js';
import { ggufsOf, randomModelDir } from './models.js';

export type MoeQuantFormat = 'mlx4' | 'fp8' | 'int4';
/** 'small': a tiny shape for quick checks and tests (seconds), in its own cache directory. */
export type BenchSize = 'full' | 'small';
export const BENCH_SIZES: readonly BenchSize[] = ['full', 'small'];

/** The GGUF llama.cpp runs against each Orchard format. */
export const MOE_QUANT_GGUF = { mlx4: 'q4_k_m', fp8: 'q8_0', int4: 'q4_0' } as const;

/**
 * full: 12 layers of hidden 768 (12 heads of 64, 4 KV heads), 16 experts of 768, top-4, vocabulary 8192
 * (untied): ~375M parameters, ~100M active per token. small: 2 layers of 256, 8 experts of 256, top-2.
 */
const SHAPES: Record<BenchSize, RandomModelOptions> = {
  full: { hiddenSize: 768, numLayers: 12, numHeads: 12, numKvHeads: 4, numExperts: 16, expertsPerToken: 4, moeIntermediateSize: 768, extraVocab: 8192 - 259 },
  small: { hiddenSize: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, numExperts: 8, expertsPerToken: 2, moeIntermediateSize: 256, extraVocab: 512 - 259 },
};

export function moeQuantShape(size: BenchSize): RandomModelOptions {
  return { variant: 'qwen3-moe', headDim: 64, mlpOnlyLayers: [], maxPositionEmbeddings: 512, dtype: 'bf16', seed: 3, ...SHAPES[size] };
}

const DESCRIPTION: Record<MoeQuantFormat, string> = {
  mlx4: 'MLX 4-bit (groups of 64, switch_mlp) as mlx-lm writes it',
  fp8: 'FP8 (128x128 blocks, BF16 scales) as Qwen3 FP8 repositories ship it',
  int4: "compressed-tensors pack-quantized INT4 experts (groups of 32) as Kimi-K2-Thinking ships them",
};

export interface MoeQuantModel {
  /** Orchard's directory per format asked for. */
  dirs: Partial<Record<MoeQuantFormat, string>>;
  /** llama.cpp's GGUF per format asked for (MOE_QUANT_GGUF of the same float model). */
  ggufs: Partial<Record<MoeQuantFormat, string>>;
}

/** The float model, its `formats` and their GGUFs, written on first use into $TMPDIR/orchard-bench-engine-moe-quant[-small]-v1. */
export function moeQuantModel(size: BenchSize, formats: readonly MoeQuantFormat[], log: (s: string) => void): MoeQuantModel {
  const cache = `orchard-bench-engine-moe-quant${size === 'small' ? '-small' : ''}-v1`;
  const root = join(tmpdir(), cache);
  const src = randomModelDir(cache, `${size === 'small' ? 'small ' : ''}Qwen3-MoE random model (BF16)`, moeQuantShape(size), log);
  const gguf = ggufsOf(src, root, log, formats.map((f) => MOE_QUANT_GGUF[f]));
  const out: MoeQuantModel = { dirs: {}, ggufs: {} };
  for (const f of formats) {
    const dir = join(root, f);
    if (!existsSync(join(dir, 'config.json'))) {
      log(`converting ${src} to ${DESCRIPTION[f]}`);
      const tmp = join(root, `${f}-${process.pid}`);
      rmSync(tmp, { recursive: true, force: true });
      if (f === 'mlx4') writeMlxMoeModel(src, tmp, { bits: 4, groupSize: 64 });
      else if (f === 'fp8') writeFp8Model(src, tmp, { scaleDtype: 'BF16' });
      else writeInt4PackedModel(src, tmp, { groupSize: 32 });
      renameSync(tmp, dir);
    }
    out.dirs[f] = dir;
    out.ggufs[f] = gguf[MOE_QUANT_GGUF[f]];
  }
  return out;
}
