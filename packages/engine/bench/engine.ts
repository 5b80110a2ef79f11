/**
 * Engine benchmark (not a test): Orchard (WASM backend) against llama.cpp (node-llama-cpp 3.21.1, CPU,
 * same thread count) on the SAME GGUF files — f16, Q8_0, Q4_0, (pure) Q4_K, Q4_K_M and Q5_K_M (llama-quantize's mixes: Q6_K head, attn_v and ffn_down in half the layers) of a generated
 * ~100M-parameter llama model, f16/Q8_0/Q4_0 of the demo model, Q8_0 and Q4_0 of a generated
 * Qwen3-MoE-shaped model with ~100M active parameters (decode-moe-*, prefill-moe-*) — decode tokens/s and
 * prompt (prefill) tokens/s, each with its ratio; decode-mlx4 / prefill-mlx4 run Orchard on the ~100M model
 * as an MLX 4-bit (groups of 64) directory against llama.cpp on its Q4_K file (the same parameters at ~4.5 bits);
 * decode-moe-mlx4 / prefill-moe-mlx4 run Orchard on a Qwen3-MoE model as mlx-lm writes it (4-bit switch_mlp)
 * against llama.cpp on the Q4_K_M GGUF of the same float model, decode-moe-fp8 / prefill-moe-fp8 on its
 * FP8 block-scaled layout (Qwen3 FP8 repositories) against the Q8_0 GGUF, decode-moe-int4 / prefill-moe-int4
 * on its compressed-tensors INT4 layout (Kimi-K2-Thinking) against the Q4_0 GGUF (bench/moe-quant-model.ts);
 * plus the effective GB/s of f16 weight streaming during Orchard's decode against a memory-read sweep
 * measured in the same run with the same threads. Then the GPU: Orchard's WebGPU kernels against
 * llama.cpp's Vulkan (Metal on macOS) build on the same adapter and GGUFs of a ~170M model
 * (gpu-decode-<format>, gpu-prefill-<format> and Orchard's per-token overhead: bench/gpu.ts, also
 * `pnpm bench:gpu` alone), on lavapipe when there is no hardware GPU.
 *
 *   pnpm bench:engine [--threads N] [--rounds 2] [--only dense,moe,demo,gpu] [--dtypes f16,q8_0,q4_0,q4_k,q4_k_m,q5_k_m,mlx4,fp8,int4] [--size full|small] [--simd auto|relaxed|baseline] [--json]
 *   orchard bench engine --json
 *
 * Rounds interleave Orchard and llama.cpp and each keeps its best, so on a shared machine both get the
 * same share of the noise; compare ratios within one run. --dtypes also picks the moe group's formats
 * (q8_0, q4_0, mlx4, fp8, int4; all without --dtypes); --size small runs the moe group on tiny models (a quick
 * check that the lines work, not a measurement). The generated models are cached in
 * $TMPDIR/orchard-bench-engine-v1 (about 0.6 GB), $TMPDIR/orchard-bench-engine-moe-v1 (about 1.1 GB) and
 * $TMPDIR/orchard-bench-engine-moe-quant-v1 (about 2.5 GB: the BF16 model, its MLX 4-bit, FP8 and INT4
 * directories, its Q4_K_M, Q8_0 and Q4_0 GGUFs) so later runs skip writing them.
 * Needs tools/llama-oracle installed (npm ci --prefix tools/llama-oracle); says so otherwise.
 */
import { existsSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Weight } from '../src/kernels/backend.js';
import { createWasmBackend } from '../src/kernels/wasm/backend.js';
import { type SimdBuild, type SimdChoice, resolveSimd } from '../src/kernels/wasm/module.js';
import { physicalCores } from '../src/kernels/wasm/cores.js';
import { loadShard } from '../src/model/forward.js';
import { layerMatrices } from '../src/model/weights.js';
import { loadModelConfig } from '../src/format/model-files.js';
import type { writeRandomModel } from '../src/testing/random-model.js';
import { writeMlxModel } from '../src/testing/mlx-model.js';
import { runGpuBenchLines } from './gpu-lines.js';
import { specDecodeLines } from './spec-lines.js';
import { runGpuBench } from './gpu.js';
import { llamaRunner } from './llama-cpp.js';
import { ggufsOf, randomModelDir } from './models.js';
import { BENCH_SIZES, type BenchSize, MOE_QUANT_GGUF, type MoeQuantFormat, moeQuantModel } from './moe-quant-model.js';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
// ORCHARD_LLAMA_ORACLE_DIR points elsewhere (tests use it to check the missing-llama.cpp path).
const ORACLE_DIR = process.env.ORCHARD_LLAMA_ORACLE_DIR ?? join(REPO_ROOT, 'tools/llama-oracle');
const LLAMA_ENTRY = join(ORACLE_DIR, 'node_modules/node-llama-cpp/dist/index.js');

/** Threads both engines use unless told: the physical cores (the WASM backend's default). */
export const defaultBenchThreads = (): number => physicalCores();
const DEMO_DIR = join(REPO_ROOT, 'models/orchard-demo');

export interface EngineBenchLine {
  name: string;
  /** Orchard's value (tokens/s or GB/s). */
  orchard: number;
  /** llama.cpp's value in the same unit, or null where the line has no llama.cpp counterpart. */
  llamacpp: number | null;
  unit: string;
  /** orchard / llamacpp for speed lines; effective / read bandwidth for stream-* lines. */
  ratio: number | null;
}

export interface EngineBenchOptions {
  threads?: number;
  rounds?: number;
  promptTokens?: number;
  decodeTokens?: number;
  /** Groups of lines to run. @default all: the ~100M llama, the MoE model, the demo model, the GPU lines */
  only?: readonly BenchGroup[];
  /**
   * Weight formats of the ~100M model's lines (the dense group: all but fp8 and int4) and of the moe group
   * (q8_0, q4_0, mlx4, fp8, int4). @default all
   */
  dtypes?: readonly Dtype[];
  /** 'small': the moe group's models at a tiny shape (a quick check that the lines run). @default 'full' */
  size?: BenchSize;
  /** Orchard's kernel build (createWasmBackend's simd). @default 'auto' */
  simd?: SimdChoice;
  /** Progress lines. */
  log?: (line: string) => void;
}

export type BenchGroup = 'dense' | 'moe' | 'demo' | 'spec' | 'gpu';
export const BENCH_GROUPS: readonly BenchGroup[] = ['dense', 'moe', 'demo', 'spec', 'gpu'];

export class LlamaCppMissingError extends Error {}

/** Why llama.cpp cannot run here, or null. */
export function llamaCppMissingReason(): string | null {
  if (!existsSync(LLAMA_ENTRY)) return `node-llama-cpp is not installed in ${ORACLE_DIR} (run: npm ci --prefix tools/llama-oracle); bench engine compares against llama.cpp and prints no numbers without it`;
  return null;
}

/** ~100M parameters: 12 layers of hidden 768 (12 heads, 4 KV heads), FFN 2304, vocabulary 8192 (untied). */
const BIG = { variant: 'llama' as const, hiddenSize: 768, intermediateSize: 2304, numLayers: 12, numHeads: 12, numKvHeads: 4, extraVocab: 8192 - 259, maxPositionEmbeddings: 512, dtype: 'f16' as const, seed: 1 };

function parameterCount(c: typeof BIG): number {
  const hd = c.hiddenSize / c.numHeads;
  const perLayer = 2 * c.hiddenSize * c.hiddenSize + 2 * c.hiddenSize * c.numKvHeads * hd + 3 * c.hiddenSize * c.intermediateSize + 2 * c.hiddenSize;
  return c.numLayers * perLayer + 2 * 8192 * c.hiddenSize + c.hiddenSize;
}

/**
 * Qwen3-MoE-shaped (qwen3moe in GGUF): 12 layers of hidden 768 (12 heads of 64, 4 KV heads, q/k norms),
 * 16 experts of intermediate 640, top-4 renormalised; vocabulary 8192 (untied). ~96M parameters active
 * per token (attention, 4 experts, router, head) of ~315M.
 */
const MOE = {
  variant: 'qwen3-moe' as const,
  hiddenSize: 768,
  numLayers: 12,
  numHeads: 12,
  numKvHeads: 4,
  headDim: 64,
  numExperts: 16,
  expertsPerToken: 4,
  moeIntermediateSize: 640,
  mlpOnlyLayers: [],
  extraVocab: 8192 - 259,
  maxPositionEmbeddings: 512,
  dtype: 'f16' as const,
  seed: 2,
};

/** --size small: the MoE model at 2 layers of 256, 8 experts of 256 (whole 32-blocks), top-2, vocabulary 512. */
const SMALL_MOE = { hiddenSize: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, numExperts: 8, expertsPerToken: 2, moeIntermediateSize: 256, extraVocab: 512 - 259 };

function activeParameters(c: typeof MOE): number {
  const attention = 2 * c.hiddenSize * c.numHeads * c.headDim + 2 * c.hiddenSize * c.numKvHeads * c.headDim;
  const experts = c.expertsPerToken * 3 * c.hiddenSize * c.moeIntermediateSize + c.numExperts * c.hiddenSize;
  return c.numLayers * (attention + experts) + 8192 * c.hiddenSize;
}

/** A generated model's HF directory and its GGUFs, written once into a cache directory. */
function generatedModel(log: (s: string) => void, cache = 'orchard-bench-engine-v1', options: Parameters<typeof writeRandomModel>[1] = BIG, dtypes: readonly Dtype[] = DTYPES, what = `${(parameterCount(BIG) / 1e6).toFixed(0)}M-parameter random model`): { dir: string; ggufs: Record<GgufDtype, string>; mlx4: string } {
  const root = join(tmpdir(), cache);
  const dir = randomModelDir(cache, what, options, log);
  // decode-mlx4 runs against llama.cpp on the Q4_K file: the same parameters at ~4.5 bits per weight
  const mlx4 = join(root, 'mlx4');
  if (dtypes.includes('mlx4') && !existsSync(join(mlx4, 'model.safetensors'))) {
    log(`converting ${dir} to MLX 4-bit (groups of 64)`);
    const tmp = join(root, `mlx4-${process.pid}`);
    writeMlxModel(dir, tmp, { bits: 4, groupSize: 64 });
    renameSync(tmp, mlx4);
  }
  const ggufDtypes = [...new Set(dtypes.filter((d) => d !== 'fp8' && d !== 'int4').map((d) => (d === 'mlx4' ? 'q4_k' : d)))];
  return { dir, ggufs: ggufsOf(dir, root, log, ggufDtypes), mlx4 };
}

export type Dtype = 'f16' | 'q8_0' | 'q4_0' | 'q4_k' | 'q4_k_m' | 'q5_k_m' | 'mlx4' | 'fp8' | 'int4';
/**
 * Formats written as GGUF for both engines; 'mlx4' is an MLX 4-bit (g64) directory Orchard runs, against
 * llama.cpp on the Q4_K file (moe group: Q4_K_M); 'fp8' (moe group only) an FP8 block-scaled directory,
 * against the Q8_0 file; 'int4' (moe group only) a compressed-tensors INT4 directory, against the Q4_0 file.
 */
type GgufDtype = Exclude<Dtype, 'mlx4' | 'fp8' | 'int4'>;
/** A decode measurement stops early (after at least 4 tokens) past this, so a very slow engine cannot stretch the run. */
const DECODE_CAP_MS = 3000;
const DTYPES: Dtype[] = ['f16', 'q8_0', 'q4_0', 'q4_k', 'q4_k_m', 'q5_k_m', 'mlx4', 'fp8', 'int4'];
/** The moe group's formats: GGUFs of the Qwen3-MoE-shaped model, then the mlx-lm, FP8 and INT4 layouts of another (moe-quant-model.ts). */
const MOE_DTYPES = ['q8_0', 'q4_0', 'mlx4', 'fp8', 'int4'] as const;

interface Speeds {
  prefill: number;
  decode: number;
  /** Decode tokens per CPU-second of this process (one thread: the engine's own time, unaffected by preemption). */
  decodeCpu: number;
  /** Prompt tokens per CPU-second of this process during the prompt batch (likewise). */
  prefillCpu: number;
  /** 1 / the fastest single decode step (s): the streaming measure, comparable to the best-of read sweep. */
  fastest: number;
}

/** Orchard on one model (GGUF or directory): loads once, then measures a prompt batch and token-by-token greedy decode per round. */
async function orchardRunner(gguf: string, threads: number, simd: SimdBuild, promptTokens: number, decodeTokens: number) {
  const backend2 = createWasmBackend({ threads, simd, initialBytes: 256 * 2 ** 20 });
  const L = loadModelConfig(gguf).numLayers;
  const model = loadShard(gguf, { layers: [0, L], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend: backend2, maxBatch: promptTokens, maxSeqLen: promptTokens + decodeTokens + 8 });
  const vocab = model.config.vocabSize;
  const prompt = Array.from({ length: promptTokens }, (_, i) => (i * 37 + 11) % Math.min(256, vocab));
  const weights = model.weights;
  const matrices: Weight[] = [...weights.layers.flatMap(layerMatrices), weights.head!];
  const streamedBytes = matrices.reduce((s, w) => s + w.bytes.byteLength, 0);
  return {
    streamedBytes,
    backend: backend2,
    async round(): Promise<Speeds> {
      const cache = model.newCache();
      let t0 = performance.now();
      const p0 = process.cpuUsage();
      let logits = await model.forward({ tokens: prompt }, cache);
      const prefill = promptTokens / ((performance.now() - t0) / 1000);
      const prefillCpu = promptTokens / cpuSeconds(p0);
      t0 = performance.now();
      const c0 = process.cpuUsage();
      let done = 0;
      let fastestMs = Infinity;
      while (done < decodeTokens && !(done >= 4 && performance.now() - t0 > DECODE_CAP_MS)) {
        let best = 0;
        for (let v = 1; v < vocab; v++) if (logits[v] > logits[best]) best = v;
        const s0 = performance.now();
        logits = await model.forward({ tokens: [best] }, cache);
        fastestMs = Math.min(fastestMs, performance.now() - s0);
        done++;
      }
      const decode = done / ((performance.now() - t0) / 1000);
      const decodeCpu = done / cpuSeconds(c0);
      model.releaseCache(cache);
      return { prefill, decode, decodeCpu, prefillCpu, fastest: 1000 / fastestMs };
    },
    dispose: () => model.dispose(),
  };
}

/** Best round of each engine, rounds interleaved. Orchard runs `model`, llama.cpp `gguf` (the same file unless given). */
async function measure(model: string, o: Required<Omit<EngineBenchOptions, 'log' | 'only' | 'dtypes' | 'size' | 'simd'>> & { simd: SimdBuild }, gguf = model) {
  const orchard = await orchardRunner(model, o.threads, o.simd, o.promptTokens, o.decodeTokens);
  const llama = await llamaRunner(gguf, o);
  const best = (a: Speeds, b: Speeds): Speeds => ({ prefill: Math.max(a.prefill, b.prefill), decode: Math.max(a.decode, b.decode), decodeCpu: Math.max(a.decodeCpu, b.decodeCpu), prefillCpu: Math.max(a.prefillCpu, b.prefillCpu), fastest: Math.max(a.fastest, b.fastest) });
  let ob: Speeds = { prefill: 0, decode: 0, decodeCpu: 0, prefillCpu: 0, fastest: 0 };
  let lb: Speeds = { prefill: 0, decode: 0, decodeCpu: 0, prefillCpu: 0, fastest: 0 };
  let readGBs = 0;
  try {
    await orchard.round(); // warm-up (first-touch of memory, JIT)
    await llama.round();
    for (let r = 0; r < o.rounds; r++) {
      ob = best(ob, await orchard.round());
      lb = best(lb, await llama.round());
      readGBs = Math.max(readGBs, readSweepGBs(orchard.backend, orchard.streamedBytes));
    }
  } finally {
    await llama.dispose();
  }
  const streamedBytes = orchard.streamedBytes;
  orchard.dispose();
  return { orchard: ob, llama: lb, streamedBytes, readGBs };
}

const sweepBuffers = new WeakMap<object, Uint8Array>();
/**
 * Read bandwidth baseline: the backend's own read sweep (same threads, same row split as the kernels)
 * over a buffer the size of the streamed weights, best of a few passes.
 */
function readSweepGBs(backend: ReturnType<typeof createWasmBackend>, bytes: number): number {
  const rowBytes = 4096;
  const rows = Math.max(1, Math.floor(bytes / rowBytes));
  let buf = sweepBuffers.get(backend);
  if (!buf) {
    buf = backend.allocBytes(rows * rowBytes);
    buf.fill(1);
    sweepBuffers.set(backend, buf);
  }
  let best = Infinity;
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    backend.readSweep(buf, rows);
    best = Math.min(best, performance.now() - t0);
  }
  return (rows * rowBytes) / (best / 1000) / 1e9;
}

const round3 = (v: number) => Number(v.toPrecision(4));

/** CPU seconds this process used since `start` (all threads). */
function cpuSeconds(start: NodeJS.CpuUsage): number {
  const u = process.cpuUsage(start);
  return (u.user + u.system) / 1e6;
}

export async function runEngineBench(options: EngineBenchOptions = {}): Promise<{ lines: EngineBenchLine[]; simd: SimdBuild }> {
  // The spec group compares Orchard with itself: it runs without llama.cpp.
  const missing = options.only?.every((g) => g === 'spec') ? null : llamaCppMissingReason();
  if (missing) throw new LlamaCppMissingError(missing);
  const log = options.log ?? (() => {});
  const o = {
    threads: options.threads ?? physicalCores(),
    rounds: options.rounds ?? 2,
    promptTokens: options.promptTokens ?? 64,
    decodeTokens: options.decodeTokens ?? 32,
    simd: resolveSimd(options.simd ?? 'auto'),
  };
  log(`Orchard's WASM kernels: the ${o.simd} build (${o.simd === 'relaxed' ? 'relaxed SIMD' : 'WASM SIMD 128'})`);
  const load = loadavg()[0];
  if (o.threads > 1 && load > availableParallelism()) {
    log(
      `warning: load average ${load.toFixed(1)} on ${availableParallelism()} CPUs: llama.cpp's threads spin-wait at every barrier and collapse when ` +
        `oversubscribed, so ratios with --threads ${o.threads} flatter Orchard here; --threads 1 compares like for like`,
    );
  }
  const lines: EngineBenchLine[] = [];
  const speedLines = (prefix: string, dt: Dtype, m: Awaited<ReturnType<typeof measure>>) => {
    lines.push({ name: `${prefix}decode-${dt}`, orchard: round3(m.orchard.decode), llamacpp: round3(m.llama.decode), unit: 'tok/s', ratio: round3(m.orchard.decode / m.llama.decode) });
    lines.push({ name: `${prefix}prefill-${dt}`, orchard: round3(m.orchard.prefill), llamacpp: round3(m.llama.prefill), unit: 'tok/s', ratio: round3(m.orchard.prefill / m.llama.prefill) });
    // With one thread each, tokens per CPU-second compare the engines' own work even on a loaded machine.
    if (o.threads === 1) {
      for (const [what, a, b] of [['decode', m.orchard.decodeCpu, m.llama.decodeCpu], ['prefill', m.orchard.prefillCpu, m.llama.prefillCpu]] as const) {
        lines.push({ name: `${prefix}${what}-${dt}-cpu`, orchard: round3(a), llamacpp: round3(b), unit: 'tok/cpu-s', ratio: round3(a / b) });
      }
    }
  };

  const only = new Set(options.only ?? BENCH_GROUPS);
  const dtypes = only.has('dense') ? (options.dtypes ?? DTYPES).filter((d) => d !== 'fp8' && d !== 'int4') : [];
  const big = only.has('dense') || only.has('gpu') ? generatedModel(log, undefined, undefined, dtypes) : null;
  for (const dt of dtypes) {
    log(`~100M model, ${dt}${dt === 'mlx4' ? ' (llama.cpp: Q4_K)' : ''}, ${o.threads} thread(s): Orchard vs llama.cpp`);
    const m = dt === 'mlx4' ? await measure(big!.mlx4, o, big!.ggufs.q4_k) : await measure(big!.ggufs[dt], o);
    speedLines('', dt, m);
    log(lines.slice(o.threads === 1 ? -4 : -2).map((l) => `  ${l.name}: ${l.orchard} vs ${l.llamacpp} ${l.unit} (${l.ratio}x)`).join('\n'));
    if (dt === 'f16') {
      // Weight bytes of one decode step / the fastest step, against the best read sweep: both are
      // best-of short intervals, so a busy machine's preemptions affect them alike.
      const orchardGBs = (m.streamedBytes * m.orchard.fastest) / 1e9;
      const llamaGBs = (m.streamedBytes * m.llama.fastest) / 1e9;
      lines.push({ name: 'stream-f16', orchard: round3(orchardGBs), llamacpp: round3(llamaGBs), unit: 'GB/s', ratio: round3(orchardGBs / m.readGBs) });
      lines.push({ name: 'stream-read-baseline', orchard: round3(m.readGBs), llamacpp: null, unit: 'GB/s', ratio: null });
    }
  }
  const size = options.size ?? 'full';
  const moeDtypes = only.has('moe') ? MOE_DTYPES.filter((d) => !options.dtypes || options.dtypes.includes(d)) : [];
  const moeGgufDtypes = moeDtypes.filter((d): d is 'q8_0' | 'q4_0' => d === 'q8_0' || d === 'q4_0');
  const moeShape = size === 'small' ? { ...MOE, ...SMALL_MOE } : MOE;
  const moe = moeGgufDtypes.length
    ? generatedModel(log, `orchard-bench-engine-moe${size === 'small' ? '-small' : ''}-v1`, moeShape, moeGgufDtypes, `Qwen3-MoE-shaped random model (${(activeParameters(moeShape) / 1e6).toFixed(0)}M parameters active per token)`)
    : null;
  const quantFormats = moeDtypes.filter((d): d is MoeQuantFormat => d === 'mlx4' || d === 'fp8' || d === 'int4');
  const moeQuant = quantFormats.length ? moeQuantModel(size, quantFormats, log) : null;
  for (const dt of moeDtypes) {
    const quant = dt === 'mlx4' || dt === 'fp8' || dt === 'int4';
    log(
      quant
        ? `Qwen3-MoE model (${size}), ${{ mlx4: 'MLX 4-bit switch_mlp', fp8: 'FP8 blocks', int4: 'compressed-tensors INT4 experts' }[dt]} (llama.cpp: ${MOE_QUANT_GGUF[dt].toUpperCase()}), ${o.threads} thread(s): Orchard vs llama.cpp`
        : `Qwen3-MoE-shaped model (~${(activeParameters(moeShape) / 1e6).toFixed(0)}M active), ${dt}, ${o.threads} thread(s): Orchard vs llama.cpp`,
    );
    const m = quant ? await measure(moeQuant!.dirs[dt]!, o, moeQuant!.ggufs[dt]!) : await measure(moe!.ggufs[dt], o);
    const first = lines.length;
    lines.push({ name: `decode-moe-${dt}`, orchard: round3(m.orchard.decode), llamacpp: round3(m.llama.decode), unit: 'tok/s', ratio: round3(m.orchard.decode / m.llama.decode) });
    lines.push({ name: `prefill-moe-${dt}`, orchard: round3(m.orchard.prefill), llamacpp: round3(m.llama.prefill), unit: 'tok/s', ratio: round3(m.orchard.prefill / m.llama.prefill) });
    // With one thread each, tokens per CPU-second compare the engines' own work even on a loaded machine.
    if (o.threads === 1) {
      lines.push({ name: `decode-moe-${dt}-cpu`, orchard: round3(m.orchard.decodeCpu), llamacpp: round3(m.llama.decodeCpu), unit: 'tok/cpu-s', ratio: round3(m.orchard.decodeCpu / m.llama.decodeCpu) });
      lines.push({ name: `prefill-moe-${dt}-cpu`, orchard: round3(m.orchard.prefillCpu), llamacpp: round3(m.llama.prefillCpu), unit: 'tok/cpu-s', ratio: round3(m.orchard.prefillCpu / m.llama.prefillCpu) });
    }
    log(lines.slice(first).map((l) => `  ${l.name}: ${l.orchard} vs ${l.llamacpp} ${l.unit} (${l.ratio}x)`).join('\n'));
  }
  if (!only.has('demo')) {
    // left out on request
  } else if (existsSync(join(DEMO_DIR, 'config.json'))) {
    // The demo model is converted afresh each run (it may have changed), into a directory removed after.
    const demoDir = mkdtempSync(join(tmpdir(), 'orchard-bench-engine-demo-'));
    try {
      // The demo model's rows (192 columns) are not whole 256-blocks: no K-quant lines for it.
      const demoDtypes = (options.dtypes ?? DTYPES).filter((dt): dt is GgufDtype => dt !== 'q4_k' && dt !== 'q4_k_m' && dt !== 'q5_k_m' && dt !== 'mlx4' && dt !== 'fp8' && dt !== 'int4');
      const demoGgufs = ggufsOf(DEMO_DIR, demoDir, () => {}, demoDtypes);
      for (const dt of demoDtypes) {
        log(`demo model, ${dt}: Orchard vs llama.cpp`);
        speedLines('demo-', dt, await measure(demoGgufs[dt], { ...o, rounds: o.rounds + 1 }));
        log(lines.slice(-2).map((l) => `  ${l.name}: ${l.orchard} vs ${l.llamacpp} ${l.unit} (${l.ratio}x)`).join('\n'));
      }
    } finally {
      rmSync(demoDir, { recursive: true, force: true });
    }
  } else log('demo model (models/orchard-demo) not found: its lines are left out');
  if (only.has('spec')) {
    if (existsSync(join(DEMO_DIR, 'config.json'))) lines.push(...(await specDecodeLines(DEMO_DIR, o, log)));
    else log('demo model (models/orchard-demo) not found: the spec-decode-* lines are left out');
  }
  // GPU lines (docs/gpu.md): a hardware adapter, else lavapipe (a software adapter: overhead only, and the
  // ~100M model is left out there). Ratios: GPU / wasm in this run (tok/s), effective / gpu-copy-baseline (GB/s).
  if (!only.has('gpu')) return { lines, simd: o.simd };
  const gpu = await runGpuBenchLines({
    models: [{ label: 'f16', dir: big!.dir, skipOnSoftware: true }, ...(existsSync(join(DEMO_DIR, 'config.json')) ? [{ label: 'demo', dir: DEMO_DIR }] : [])],
    allowSoftware: true,
    threads: o.threads,
    promptTokens: o.promptTokens,
    decodeTokens: o.decodeTokens,
    rounds: o.rounds,
    log,
  });
  if (gpu.skipped) log(`GPU lines left out: ${gpu.skipped}`);
  for (const l of gpu.lines) lines.push({ name: l.name, orchard: l.value, llamacpp: null, unit: l.unit, ratio: l.ratio });
  // Orchard's GPU kernels against llama.cpp's GPU build on the same adapter and GGUFs (bench/gpu.ts).
  const vsLlama = await runGpuBench({ allowSoftware: true, threads: o.threads, rounds: o.rounds, promptTokens: o.promptTokens, decodeTokens: o.decodeTokens, log });
  if (vsLlama.skipped) log(`gpu-decode/prefill lines against llama.cpp left out: ${vsLlama.skipped}`);
  lines.push(...vsLlama.lines);
  return { lines, simd: o.simd };
}

export function formatEngineTable(result: { lines: EngineBenchLine[]; simd?: SimdBuild }, threads: number): string {
  const rows = [['line', 'orchard', 'llama.cpp', 'unit', 'ratio']];
  for (const l of result.lines) rows.push([l.name, String(l.orchard), l.llamacpp === null ? '-' : String(l.llamacpp), l.unit, l.ratio === null ? '-' : `${l.ratio}x`]);
  const w = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const body = rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ')).join('\n');
  return `${body}\n(${threads} thread(s) each; ${result.simd ? `Orchard's WASM kernels: the ${result.simd} build; ` : ''}*-cpu lines: decode / prompt tokens per CPU-second of the process (1 thread only; robust to a loaded machine); stream-f16 = f16 weight bytes per decode step / the fastest step; ratio = Orchard's stream / the best read sweep over as many bytes, same backend and threads, same run; gpu-<model>-* lines: decode/prefill ratio = GPU / wasm, stream ratio = / gpu-copy-baseline, same run; gpu-decode/prefill-<format> lines: Orchard's GPU kernels / llama.cpp's GPU build on the same adapter and GGUF, same run; spec-decode-* lines: ratio = prompt-lookup speculation / plain decode of the demo model, same run, identical output; spec-decode-*-cpu: plain / speculative CPU time of the whole run)`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { threads: { type: 'string' }, rounds: { type: 'string' }, only: { type: 'string' }, dtypes: { type: 'string' }, size: { type: 'string' }, simd: { type: 'string' }, json: { type: 'boolean', default: false } } });
  const threads = values.threads ? Number(values.threads) : physicalCores();
  const only = values.only?.split(',') as BenchGroup[] | undefined;
  const unknown = only?.filter((g) => !BENCH_GROUPS.includes(g));
  if (unknown?.length) {
    process.stderr.write(`bench:engine: --only takes ${BENCH_GROUPS.join(', ')}; got ${unknown.join(', ')}\n`);
    process.exit(2);
  }
  const dtypes = values.dtypes?.split(',') as Dtype[] | undefined;
  const bad = dtypes?.find((d) => !DTYPES.includes(d));
  if (bad) {
    process.stderr.write(`bench:engine: --dtypes: ${bad} is not one of ${DTYPES.join(', ')}\n`);
    process.exit(2);
  }
  const size = values.size as BenchSize | undefined;
  if (size !== undefined && !BENCH_SIZES.includes(size)) {
    process.stderr.write(`bench:engine: --size takes ${BENCH_SIZES.join(' or ')}; got ${size}\n`);
    process.exit(2);
  }
  try {
    const result = await runEngineBench({ threads, rounds: values.rounds ? Number(values.rounds) : undefined, only, dtypes, size, simd: values.simd as SimdChoice | undefined, log: (l) => process.stderr.write(`${l}\n`) });
    process.stdout.write(values.json ? `${JSON.stringify(result)}\n` : `${formatEngineTable(result, threads)}\n`);
  } catch (err) {
    if (err instanceof LlamaCppMissingError) {
      process.stderr.write(`bench:engine: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  process.exit(0);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
