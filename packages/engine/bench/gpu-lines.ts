/**
 * GPU lines for `pnpm bench:engine`: decode and prompt tokens/s of whole models on the GPU through
 * `generate()` (what `orchard run --backend gpu` does), the same models on the CPU (wasm) backend in the
 * same run for the speed ratio, and effective weight-streaming GB/s against the device's copy bandwidth
 * measured in the same run (profileGpu). A hardware adapter is used when there is one; otherwise a
 * software one (lavapipe) only with `allowSoftware`, and then the numbers only show overhead.
 */
import { loadInProcessModel, type LanguageModel } from '../src/drivers/in-process.js';
import { generate } from '../src/generate/generate.js';
import { createWasmBackend } from '../src/kernels/wasm/backend.js';
import { createGpuContext, describeAdapter, type GpuContext } from '../src/kernels/gpu/context.js';
import { loadGpuModel } from '../src/kernels/gpu/model.js';
import { chooseGpu, profileGpu } from '../src/kernels/gpu/probe.js';

export interface GpuBenchLine {
  name: string;
  value: number;
  unit: string;
  /** decode/prefill lines: GPU / CPU (wasm) in the same run; stream lines: effective / copy baseline. */
  ratio: number | null;
}

export interface GpuBenchOptions {
  /** Models to run: line names are `gpu-<label>-decode`, `gpu-<label>-prefill`, `gpu-<label>-stream`. */
  models: { label: string; dir: string; /** Too big to be worth it on a software adapter (minutes of CPU). */ skipOnSoftware?: boolean }[];
  /** Accept a software adapter when no hardware one exists. @default false */
  allowSoftware?: boolean;
  /** Threads of the CPU (wasm) comparison. @default 1 */
  threads?: number;
  promptTokens?: number;
  decodeTokens?: number;
  /** Best of this many runs per figure. @default 2 */
  rounds?: number;
  log?: (line: string) => void;
}

export interface GpuBenchResult {
  lines: GpuBenchLine[];
  /** The adapter used ("... (software)" for lavapipe), or null when none could be. */
  adapter: string | null;
  software: boolean;
  /** Why there are no lines. */
  skipped: string | null;
}

const round3 = (x: number) => Number(x.toPrecision(3));

/** A hardware adapter if there is one; else a software one when allowed; else null and why. */
export async function openBenchGpu(allowSoftware: boolean): Promise<{ ctx: GpuContext | null; reason: string | null }> {
  const auto = await chooseGpu('auto');
  if (auto.ctx || !allowSoftware) return { ctx: auto.ctx, reason: auto.reason };
  try {
    return { ctx: await createGpuContext({ allowSoftware: true }), reason: null };
  } catch (err) {
    return { ctx: null, reason: (err as Error).message };
  }
}

/** Best decode and prefill tokens/s of greedy generation on `model`. */
async function speeds(model: LanguageModel, prompt: number[], decodeTokens: number, rounds: number): Promise<{ decode: number; prefill: number }> {
  let decode = 0;
  let prefill = 0;
  for (let r = 0; r < rounds + 1; r++) {
    const res = await generate(model, prompt, { maxTokens: decodeTokens, temperature: 0, stopTokenIds: [] });
    if (r === 0) continue; // warm-up: pipelines, first-use allocation, JIT
    decode = Math.max(decode, res.tokensPerSecond);
    prefill = Math.max(prefill, (prompt.length * 1000) / res.prefillMs);
  }
  return { decode, prefill };
}

export async function runGpuBenchLines(o: GpuBenchOptions): Promise<GpuBenchResult> {
  const log = o.log ?? (() => {});
  const { ctx, reason } = await openBenchGpu(o.allowSoftware ?? false);
  if (!ctx) return { lines: [], adapter: null, software: false, skipped: reason };
  const adapter = describeAdapter(ctx.adapter);
  const lines: GpuBenchLine[] = [];
  const promptTokens = o.promptTokens ?? 64;
  const decodeTokens = o.decodeTokens ?? 32;
  const rounds = o.rounds ?? 2;
  try {
    const copy = await profileGpu(ctx);
    const copyGBs = copy.copyBandwidth / 1e9;
    lines.push({ name: 'gpu-copy-baseline', value: round3(copyGBs), unit: 'GB/s', ratio: null });
    log(`GPU ${adapter}: copy bandwidth ${round3(copyGBs)} GB/s`);
    for (const m of o.models) {
      if (m.skipOnSoftware && ctx.adapter.software) {
        log(`  ${m.label}: left out on a software adapter`);
        continue;
      }
      const prompt = Array.from({ length: promptTokens }, (_, i) => (i * 37 + 11) % 256);
      const maxSeqLen = promptTokens + decodeTokens + 8;
      const gpu = await loadGpuModel(m.dir, { context: ctx, maxBatch: Math.min(64, promptTokens), maxSeqLen });
      let g: { decode: number; prefill: number };
      let weightBytes: number;
      try {
        g = await speeds(gpu, prompt, decodeTokens, rounds);
        weightBytes = gpu.weightBytes;
      } finally {
        gpu.dispose();
      }
      const cpu = loadInProcessModel(m.dir, { backend: () => createWasmBackend({ threads: o.threads ?? 1 }), maxBatch: Math.min(64, promptTokens), maxSeqLen });
      let c: { decode: number; prefill: number };
      try {
        c = await speeds(cpu, prompt, decodeTokens, rounds);
      } finally {
        cpu.dispose();
      }
      // Every weight held on the GPU is read once per decoded token (an upper bound for the embedding table).
      const streamGBs = (weightBytes * g.decode) / 1e9;
      lines.push({ name: `gpu-${m.label}-decode`, value: round3(g.decode), unit: 'tok/s', ratio: round3(g.decode / c.decode) });
      lines.push({ name: `gpu-${m.label}-prefill`, value: round3(g.prefill), unit: 'tok/s', ratio: round3(g.prefill / c.prefill) });
      lines.push({ name: `gpu-${m.label}-stream`, value: round3(streamGBs), unit: 'GB/s', ratio: round3(streamGBs / copyGBs) });
      log(`  ${m.label}: GPU decode ${round3(g.decode)} tok/s (CPU wasm ${round3(c.decode)}), prefill ${round3(g.prefill)} tok/s (CPU ${round3(c.prefill)}), ${round3(streamGBs)} GB/s weights`);
    }
  } finally {
    ctx.destroy();
  }
  return { lines, adapter, software: ctx.adapter.software, skipped: null };
}
