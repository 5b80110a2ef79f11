/**
 * GPU benchmark (not a test): Orchard's WebGPU shard against llama.cpp's GPU build (node-llama-cpp
 * 3.21.1: Vulkan on Linux, Metal on macOS) on the SAME device and the SAME GGUF files — f16, Q8_0, Q4_0
 * and pure Q4_K of a generated ~170M-parameter Llama — decode and prompt tokens/s with their ratio in the
 * same run, plus Orchard's per-token overhead (dispatches, host recording time, submit + readback round trip)
 * and its prompt attention kernel (query-tiled) against the per-token one at one layer's shape
 * (gpu-attention-prefill, --attention-tokens, default 512).
 * With --moe, the MoE layouts of bench:engine's Qwen3-MoE model (bench/moe-quant-model.ts: mlx-lm's
 * 4-bit switch_mlp, FP8 blocks, compressed-tensors INT4) on Orchard's GPU kernels against llama.cpp's GPU
 * build on the Q4_K_M / Q8_0 / Q4_0 GGUF of the same float model (gpu-decode-moe-<format>,
 * gpu-prefill-moe-<format>); --size small runs them on a tiny model (a check that the lines work).
 *
 *   pnpm bench:gpu [--allow-software-gpu] [--rounds 2] [--prompt 64] [--decode 32] [--attention-tokens 512] [--dtypes f16,q8_0,q4_0,q4_k] [--moe mlx4,fp8,int4] [--size full|small] [--json]
 *
 * A hardware adapter is used when there is one. A software adapter (Mesa's lavapipe: "GPU" kernels run on
 * the CPU) only with --allow-software-gpu or ORCHARD_ALLOW_SOFTWARE_GPU=1; then llama.cpp is pointed at
 * the same driver (GGML_VK_VISIBLE_DEVICES=0, which lets ggml use a CPU-type Vulkan device, and the
 * lavapipe manifest unless VK_ICD_FILENAMES is set). llama.cpp runs in a child process (bench/llama-child.ts).
 * Rounds alternate Orchard and llama.cpp and each keeps its best, so both see the same share of a busy
 * machine's noise; compare ratios within one run.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadModelConfig } from '../src/format/model-files.js';
import { argmax } from '../src/generate/sampler.js';
import { Readback, createStorage, uploadF32 } from '../src/kernels/gpu/buffers.js';
import { GpuKernels, StepUniform, recordPass } from '../src/kernels/gpu/ops.js';
import { describeAdapter, type GpuContext } from '../src/kernels/gpu/context.js';
import { openBenchGpu } from './gpu-lines.js';
import { GpuShard, type CallStats } from '../src/kernels/gpu/shard.js';
import { physicalCores } from '../src/kernels/wasm/cores.js';
import { loadShard } from '../src/model/forward.js';
import { sig4, type BenchLine } from './line.js';
import { benchPrompt, bestSpeeds, noSpeeds, llamaCppMissingReason, llamaGpuBinariesMissingReason, timeRound, type RunnerOptions, type Speeds } from './llama-cpp.js';
import { DTYPES, generatedModel, type BenchModelShape, type Dtype } from './models.js';
import { BENCH_SIZES, type BenchSize, MOE_QUANT_GGUF, type MoeQuantFormat, moeQuantModel } from './moe-quant-model.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = resolve(HERE, '../../..');
const LAVAPIPE_ICD = '/usr/share/vulkan/icd.d/lvp_icd.json';

/** ~170M parameters: 12 layers of hidden 1024 (16 heads, 4 KV heads), FFN 3328, vocabulary 8192 (untied). */
export const GPU_BENCH_MODEL: BenchModelShape = { name: 'orchard-bench-gpu-v1', hiddenSize: 1024, intermediateSize: 3328, numLayers: 12, numHeads: 16, numKvHeads: 4, vocab: 8192 };

export interface GpuBenchOptions {
  /** Accept a software adapter (lavapipe) when no hardware one exists. @default false */
  allowSoftware?: boolean;
  /** @default 64 */
  promptTokens?: number;
  /** Prompt length of the gpu-attention-prefill line. @default 512 */
  attentionTokens?: number;
  /** @default 32 */
  decodeTokens?: number;
  /** Measured rounds per engine and format, best kept. @default 2 */
  rounds?: number;
  /** llama.cpp's CPU threads (for what it keeps on the CPU). @default physical cores */
  threads?: number;
  /** @default GPU_BENCH_MODEL */
  model?: BenchModelShape;
  /** @default f16, q8_0, q4_0, q4_k */
  dtypes?: Dtype[];
  /** MoE layouts to run after the dense lines (gpu-*-moe-<format>). @default none */
  moe?: MoeQuantFormat[];
  /** The MoE model's size. @default 'full' */
  size?: BenchSize;
  log?: (line: string) => void;
}

export interface GpuBenchResult {
  lines: BenchLine[];
  /** The adapter both engines ran on, or null. */
  adapter: string | null;
  software: boolean;
  /** Why there are no lines (no adapter, no llama.cpp GPU build), or null. */
  skipped: string | null;
}

/** Orchard's GPU shard on one GGUF: greedy decode through `forward` (logits read back, argmax on the CPU, as llama.cpp's binding does). */
async function orchardGpuRunner(ctx: GpuContext, gguf: string, o: Required<Pick<GpuBenchOptions, 'promptTokens' | 'decodeTokens'>>) {
  const config = loadModelConfig(gguf);
  const spec = { layers: [0, config.numLayers] as [number, number], tensor: { rank: 0, size: 1 }, embed: true, head: true };
  const maxSeqLen = o.promptTokens + o.decodeTokens + 8;
  // The CPU shard is only the loader here: its weights are uploaded, then dropped.
  const cpu = loadShard(gguf, spec, { config, maxBatch: 1, maxSeqLen: 1 });
  const shard = await GpuShard.create(ctx, { config, spec, slice: cpu.slice, weights: cpu.weights, maxBatch: o.promptTokens, maxSeqLen });
  const prompt = benchPrompt(o.promptTokens, config.vocabSize);
  let decodeStats: CallStats | null = null;
  let prefillStats: CallStats | null = null;
  return {
    get decodeStats() {
      return decodeStats;
    },
    get prefillStats() {
      return prefillStats;
    },
    async round(): Promise<Speeds> {
      const cache = await shard.newCache(maxSeqLen);
      try {
        return await timeRound(
          o.decodeTokens,
          o.promptTokens,
          async () => {
            const t = argmax(await shard.forward({ tokens: prompt }, cache));
            prefillStats = shard.lastCall;
            return t;
          },
          async (t) => {
            const next = argmax(await shard.forward({ tokens: [t] }, cache));
            decodeStats = shard.lastCall;
            return next;
          },
        );
      } finally {
        cache.destroy();
      }
    },
    dispose: () => shard.dispose(),
  };
}

/** llama.cpp's GPU build in a child process, one request at a time. */
class LlamaChild {
  readonly #child: ChildProcess;
  #stderr = '';
  #pending: { resolve: (m: any) => void; reject: (e: Error) => void } | null = null;

  constructor(env: NodeJS.ProcessEnv) {
    this.#child = fork(join(HERE, 'llama-child.ts'), [], { cwd: REPO_ROOT, env, execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    this.#child.stderr!.on('data', (d: Buffer) => (this.#stderr = (this.#stderr + d.toString()).slice(-2000)));
    this.#child.on('message', (m: any) => {
      const p = this.#pending;
      this.#pending = null;
      if (!p) return;
      if (m.error) p.reject(new Error(`llama.cpp: ${m.error}`));
      else p.resolve(m);
    });
    this.#child.on('exit', (code, signal) => {
      const p = this.#pending;
      this.#pending = null;
      p?.reject(new Error(`llama.cpp child exited (${signal ?? code})${this.#stderr ? `: ${this.#stderr.trim().split('\n').slice(-3).join(' | ')}` : ''}`));
    });
  }

  request(m: unknown): Promise<any> {
    if (this.#pending) throw new Error('LlamaChild: one request at a time');
    return new Promise((resolve, reject) => {
      this.#pending = { resolve, reject };
      this.#child.send(m as any);
    });
  }

  kill(): void {
    this.#child.kill();
  }
}

/** The environment that makes llama.cpp's Vulkan build use the adapter Orchard got. */
function llamaEnv(software: boolean): NodeJS.ProcessEnv {
  const env = { ...process.env };
  if (software && process.platform === 'linux') {
    // ggml skips CPU-type Vulkan devices unless they are named; with only lavapipe visible it is device 0.
    env.GGML_VK_VISIBLE_DEVICES ??= '0';
    if (!env.VK_ICD_FILENAMES && existsSync(LAVAPIPE_ICD)) env.VK_ICD_FILENAMES = LAVAPIPE_ICD;
  }
  return env;
}

/** Median of `reps` empty submissions each followed by a 4-byte readback: the floor of any token, ms. */
async function roundTripMs(ctx: GpuContext, reps = 21): Promise<number> {
  const src = await createStorage(ctx, 16, 'round trip');
  const tick = new Readback(ctx, 4, 'round trip');
  try {
    const t: number[] = [];
    for (let i = 0; i < reps; i++) {
      const s = performance.now();
      const enc = ctx.device.createCommandEncoder();
      tick.encodeCopy(enc, src, 4);
      ctx.device.queue.submit([enc.finish()]);
      await tick.read(4);
      t.push(performance.now() - s);
    }
    return t.sort((a, b) => a - b)[reps >> 1];
  } finally {
    src.destroy();
    tick.destroy();
  }
}

/**
 * The prompt attention kernels alone at one layer's shape (heads, KV heads, head size of `model`) over
 * an n-token prompt from position 0: best of `reps` timed dispatches each of the query-tiled kernel and
 * the per-token one, interleaved, ms. Random q/k/v: attention's cost does not depend on the values.
 */
async function attentionKernelsMs(ctx: GpuContext, model: BenchModelShape, n: number, reps = 3): Promise<{ tiled: number; perToken: number }> {
  const [heads, kvHeads, headDim] = [model.numHeads, model.numKvHeads, model.hiddenSize / model.numHeads];
  const rnd = (len: number) => Float32Array.from({ length: len }, (_, i) => Math.sin(i * 12.9898) * 0.5);
  const kernels = new GpuKernels(ctx);
  const step = new StepUniform(ctx);
  const bufs = [
    await uploadF32(ctx, rnd(n * heads * headDim), 'q'),
    await uploadF32(ctx, rnd(n * kvHeads * headDim), 'k cache'),
    await uploadF32(ctx, rnd(n * kvHeads * headDim), 'v cache'),
    await createStorage(ctx, n * heads * n * 4, 'scores'),
    await createStorage(ctx, n * heads * headDim * 4, 'out'),
  ];
  const tick = new Readback(ctx, 4, 'attention');
  try {
    const [q, k, v, scores, out] = bufs;
    step.write(ctx, 0, n, 0);
    const time = async (kind: 'tiled' | 'per-token') => {
      const ds = kernels.attention(q, k, v, scores, out, { heads, kvHeads, headDim, maxSeq: n, window: null }, step, kind);
      const t0 = performance.now();
      const enc = ctx.device.createCommandEncoder();
      recordPass(enc, ds, n, 'attention');
      tick.encodeCopy(enc, out, 4);
      ctx.device.queue.submit([enc.finish()]);
      await tick.read(4);
      return performance.now() - t0;
    };
    await time('tiled'); // pipeline compilation
    await time('per-token');
    let best = { tiled: Infinity, perToken: Infinity };
    for (let r = 0; r < reps; r++) best = { tiled: Math.min(best.tiled, await time('tiled')), perToken: Math.min(best.perToken, await time('per-token')) };
    return best;
  } finally {
    for (const b of bufs) b.destroy();
    tick.destroy();
    step.destroy();
  }
}

export async function runGpuBench(options: GpuBenchOptions = {}): Promise<GpuBenchResult> {
  const log = options.log ?? (() => {});
  const o = {
    promptTokens: options.promptTokens ?? 64,
    attentionTokens: options.attentionTokens ?? 512,
    decodeTokens: options.decodeTokens ?? 32,
    rounds: options.rounds ?? 2,
    threads: options.threads ?? physicalCores(),
  };
  const gpu = process.platform === 'darwin' ? 'metal' : 'vulkan';
  const missing = llamaCppMissingReason() ?? llamaGpuBinariesMissingReason(gpu);
  if (missing) return { lines: [], adapter: null, software: false, skipped: missing };
  const { ctx, reason } = await openBenchGpu(options.allowSoftware ?? false);
  if (!ctx) return { lines: [], adapter: null, software: false, skipped: reason };
  const adapter = describeAdapter(ctx.adapter);
  const software = ctx.adapter.software;
  const load = loadavg()[0];
  log(`GPU bench on ${adapter}, llama.cpp ${gpu}; load average ${load.toFixed(1)} on ${availableParallelism()} CPUs`);
  const lines: BenchLine[] = [];
  const child = new LlamaChild(llamaEnv(software));
  try {
    const runnerOptions: RunnerOptions = { threads: o.threads, promptTokens: o.promptTokens, decodeTokens: o.decodeTokens, gpu };
    // the first model's per-call stats (set inside `measure`, hence a holder TypeScript does not narrow)
    const stats: { decode: CallStats | null; prefill: CallStats | null } = { decode: null, prefill: null };
    // One line pair per model: Orchard's GPU shard on `model` against llama.cpp on `gguf`, rounds alternated.
    const measure = async (name: string, model: string, gguf: string) => {
      const orchard = await orchardGpuRunner(ctx, model, o);
      try {
        await child.request({ open: { gguf, options: runnerOptions } });
        let ob = noSpeeds();
        let lb = noSpeeds();
        // Warm-up round each (pipeline compilation, first-use allocation), then alternate.
        await orchard.round();
        await child.request({ round: true });
        for (let r = 0; r < o.rounds; r++) {
          ob = bestSpeeds(ob, await orchard.round());
          lb = bestSpeeds(lb, (await child.request({ round: true })).speeds);
        }
        await child.request({ close: true });
        stats.decode ??= orchard.decodeStats;
        stats.prefill ??= orchard.prefillStats;
        lines.push({ name: `gpu-decode-${name}`, orchard: sig4(ob.decode), llamacpp: sig4(lb.decode), unit: 'tok/s', ratio: sig4(ob.decode / lb.decode) });
        lines.push({ name: `gpu-prefill-${name}`, orchard: sig4(ob.prefill), llamacpp: sig4(lb.prefill), unit: 'tok/s', ratio: sig4(ob.prefill / lb.prefill) });
        log(lines.slice(-2).map((l) => `    ${l.name}: ${l.orchard} vs ${l.llamacpp} ${l.unit} (${l.ratio}x)`).join('\n'));
      } finally {
        orchard.dispose();
      }
    };
    const dense = options.dtypes ?? DTYPES;
    const model = dense.length ? generatedModel(options.model ?? GPU_BENCH_MODEL, log, dense) : null;
    for (const dt of dense) {
      log(`  ${dt}: loading both engines`);
      await measure(dt, model!.ggufs[dt], model!.ggufs[dt]);
    }
    const moe = options.moe ?? [];
    const quant = moe.length ? moeQuantModel(options.size ?? 'full', moe, log) : null;
    for (const f of moe) {
      log(`  Qwen3-MoE ${f} (llama.cpp: ${MOE_QUANT_GGUF[f].toUpperCase()}): loading both engines`);
      await measure(`moe-${f}`, quant!.dirs[f]!, quant!.ggufs[f]!);
    }
    // Orchard's per-token overhead (no llama.cpp counterpart measured here).
    const { decode: decodeStats, prefill: prefillStats } = stats;
    if (decodeStats) {
      lines.push({ name: 'gpu-dispatches-decode', orchard: decodeStats.dispatches, llamacpp: null, unit: 'dispatches/token', ratio: null });
      lines.push({ name: 'gpu-submissions-decode', orchard: decodeStats.submissions, llamacpp: null, unit: 'submissions/token', ratio: null });
      lines.push({ name: 'gpu-record-decode', orchard: sig4(decodeStats.encodeMs * 1000), llamacpp: null, unit: 'µs/token', ratio: null });
      lines.push({ name: 'gpu-submit-decode', orchard: sig4(decodeStats.submitMs * 1000), llamacpp: null, unit: 'µs/token', ratio: null });
      lines.push({ name: 'gpu-wait-decode', orchard: sig4(decodeStats.waitMs * 1000), llamacpp: null, unit: 'µs/token', ratio: null });
    }
    if (prefillStats) lines.push({ name: 'gpu-dispatches-prefill', orchard: prefillStats.dispatches, llamacpp: null, unit: `dispatches/${o.promptTokens} tokens`, ratio: null });
    lines.push({ name: 'gpu-round-trip', orchard: sig4((await roundTripMs(ctx)) * 1000), llamacpp: null, unit: 'µs', ratio: null });
    // The prompt attention kernel against the per-token one it replaces for prompts (same run).
    const att = await attentionKernelsMs(ctx, options.model ?? GPU_BENCH_MODEL, o.attentionTokens);
    lines.push({ name: 'gpu-attention-prefill', orchard: sig4(att.tiled), llamacpp: null, unit: `ms/layer at ${o.attentionTokens} tokens (ratio: per-token kernel / tiled)`, ratio: sig4(att.perToken / att.tiled) });
  } finally {
    child.kill();
    ctx.destroy();
  }
  return { lines, adapter, software, skipped: null };
}

export function formatGpuTable(result: GpuBenchResult): string {
  if (result.skipped) return `GPU lines left out: ${result.skipped}`;
  const rows = [['line', 'orchard', 'llama.cpp', 'unit', 'ratio']];
  for (const l of result.lines) rows.push([l.name, String(l.orchard), l.llamacpp === null ? '-' : String(l.llamacpp), l.unit, l.ratio === null ? '-' : `${l.ratio}x`]);
  const w = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const body = rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ')).join('\n');
  const note = result.software ? '; a software adapter: both engines ran their GPU kernels on the CPU' : '';
  return `${body}\n(${result.adapter}${note}; ratio = Orchard / llama.cpp on the same device and GGUF, same run)`;
}

function dtypesOf(list: string): Dtype[] {
  const out = list.split(',').map((d) => d.trim());
  for (const d of out) if (!DTYPES.includes(d as Dtype)) throw new Error(`--dtypes: ${JSON.stringify(d)} is not one of ${DTYPES.join(', ')}`);
  return out as Dtype[];
}

const MOE_FORMATS = Object.keys(MOE_QUANT_GGUF) as MoeQuantFormat[];

function moeOf(list: string): MoeQuantFormat[] {
  const out = list.split(',').map((d) => d.trim());
  for (const d of out) if (!MOE_FORMATS.includes(d as MoeQuantFormat)) throw new Error(`--moe: ${JSON.stringify(d)} is not one of ${MOE_FORMATS.join(', ')}`);
  return out as MoeQuantFormat[];
}

function sizeOf(v: string): BenchSize {
  if (!BENCH_SIZES.includes(v as BenchSize)) throw new Error(`--size takes ${BENCH_SIZES.join(' or ')}; got ${v}`);
  return v as BenchSize;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'allow-software-gpu': { type: 'boolean', default: false },
      rounds: { type: 'string' },
      prompt: { type: 'string' },
      decode: { type: 'string' },
      'attention-tokens': { type: 'string' },
      dtypes: { type: 'string' },
      moe: { type: 'string' },
      size: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const int = (v: string | undefined, name: string) => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be an integer >= 1, got ${JSON.stringify(v)}`);
    return n;
  };
  const result = await runGpuBench({
    allowSoftware: values['allow-software-gpu'] || process.env.ORCHARD_ALLOW_SOFTWARE_GPU === '1',
    rounds: int(values.rounds, 'rounds'),
    promptTokens: int(values.prompt, 'prompt'),
    decodeTokens: int(values.decode, 'decode'),
    attentionTokens: int(values['attention-tokens'], 'attention-tokens'),
    dtypes: values.dtypes === undefined ? undefined : dtypesOf(values.dtypes),
    moe: values.moe === undefined ? undefined : moeOf(values.moe),
    size: values.size === undefined ? undefined : sizeOf(values.size),
    log: (l) => process.stderr.write(`${l}\n`),
  });
  process.stdout.write(values.json ? `${JSON.stringify(result)}\n` : `${formatGpuTable(result)}\n`);
  process.exit(result.skipped ? 2 : 0);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    process.stderr.write(`bench:gpu: ${(err as Error).message}\n`);
    process.exit(1);
  });
}
