/**
 * llama.cpp (node-llama-cpp 3.21.1 from tools/llama-oracle) as the benchmarks' yardstick: one GGUF
 * loaded once, then rounds of a prompt batch and token-by-token greedy decode, timed the way Orchard's
 * side is timed. `gpu: false` is the CPU build (explicit threads, F32 KV cache like Orchard's CPU path);
 * `gpu: 'vulkan' | 'metal'` offloads every layer and keeps llama.cpp's own defaults (F16 KV cache, flash
 * attention when it picks it), which is what a llama.cpp user gets on that device.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
// ORCHARD_LLAMA_ORACLE_DIR points elsewhere (tests use it to check the missing-llama.cpp path).
export const ORACLE_DIR = process.env.ORCHARD_LLAMA_ORACLE_DIR ?? join(REPO_ROOT, 'tools/llama-oracle');
const LLAMA_ENTRY = join(ORACLE_DIR, 'node_modules/node-llama-cpp/dist/index.js');

export class LlamaCppMissingError extends Error {}

/** Why llama.cpp cannot run here, or null. */
export function llamaCppMissingReason(): string | null {
  if (!existsSync(LLAMA_ENTRY)) return `node-llama-cpp is not installed in ${ORACLE_DIR} (run: npm ci --prefix tools/llama-oracle); bench engine compares against llama.cpp and prints no numbers without it`;
  return null;
}

/**
 * Why node-llama-cpp's prebuilt `gpu` binaries are missing, or null. They are optional dependencies of
 * node-llama-cpp (`@node-llama-cpp/linux-x64-vulkan`, `@node-llama-cpp/mac-arm64-metal`), installed by
 * `npm ci --prefix tools/llama-oracle` unless optional dependencies were omitted.
 */
export function llamaGpuBinariesMissingReason(gpu: 'vulkan' | 'metal'): string | null {
  const pkg = gpu === 'metal' ? `mac-${process.arch}-metal` : `${process.platform}-${process.arch}-vulkan`;
  const dir = join(ORACLE_DIR, 'node_modules/@node-llama-cpp', pkg);
  if (existsSync(dir)) return null;
  return `llama.cpp's ${gpu} build (@node-llama-cpp/${pkg}) is not installed in ${ORACLE_DIR}/node_modules (run: npm ci --prefix tools/llama-oracle, without --omit=optional)`;
}

export interface Speeds {
  /** Prompt tokens per second of one prompt batch. */
  prefill: number;
  /** Decoded tokens per second, token by token. */
  decode: number;
  /** Decode tokens per CPU-second of this process (one thread: the engine's own time, unaffected by preemption). */
  decodeCpu: number;
  /** Prompt tokens per CPU-second of this process during the prompt batch (likewise). */
  prefillCpu: number;
  /** 1 / the fastest single decode step (s). */
  fastest: number;
}

export const noSpeeds = (): Speeds => ({ prefill: 0, decode: 0, decodeCpu: 0, prefillCpu: 0, fastest: 0 });

/** The better of two rounds, field by field (rounds keep each engine's best). */
export function bestSpeeds(a: Speeds, b: Speeds): Speeds {
  return { prefill: Math.max(a.prefill, b.prefill), decode: Math.max(a.decode, b.decode), decodeCpu: Math.max(a.decodeCpu, b.decodeCpu), prefillCpu: Math.max(a.prefillCpu, b.prefillCpu), fastest: Math.max(a.fastest, b.fastest) };
}

/** CPU seconds this process used since `start` (all threads). */
function cpuSeconds(start: NodeJS.CpuUsage): number {
  const u = process.cpuUsage(start);
  return (u.user + u.system) / 1e6;
}

export interface RunnerOptions {
  threads: number;
  promptTokens: number;
  decodeTokens: number;
  /** @default false (CPU) */
  gpu?: false | 'vulkan' | 'metal';
}

/** A decode measurement stops early (after at least 4 tokens) past this, so a very slow engine cannot stretch the run. */
export const DECODE_CAP_MS = 3000;

/** The benchmarks' prompt: byte-range token ids, the same for every engine. */
export function benchPrompt(promptTokens: number, vocab: number): number[] {
  return Array.from({ length: promptTokens }, (_, i) => (i * 37 + 11) % Math.min(256, vocab));
}

/**
 * Times one prompt batch, then greedy decode one token per call (argmax picked by `step`'s caller),
 * until `decodeTokens` or DECODE_CAP_MS. `prefill` runs the prompt and returns the first token; `step`
 * runs one token and returns the next.
 */
export async function timeRound(decodeTokens: number, promptTokens: number, prefill: () => Promise<number>, step: (t: number) => Promise<number>): Promise<Speeds> {
  let t0 = performance.now();
  const p0 = process.cpuUsage();
  let last = await prefill();
  const prefillTokS = promptTokens / ((performance.now() - t0) / 1000);
  const prefillCpu = promptTokens / cpuSeconds(p0);
  t0 = performance.now();
  const c0 = process.cpuUsage();
  let done = 0;
  let fastestMs = Infinity;
  while (done < decodeTokens && !(done >= 4 && performance.now() - t0 > DECODE_CAP_MS)) {
    const s0 = performance.now();
    last = await step(last);
    fastestMs = Math.min(fastestMs, performance.now() - s0);
    done++;
  }
  return { prefill: prefillTokS, decode: done / ((performance.now() - t0) / 1000), decodeCpu: done / cpuSeconds(c0), prefillCpu, fastest: 1000 / fastestMs };
}

type LlamaModule = { getLlama(o: Record<string, unknown>): Promise<any> };
const runtimes = new Map<string, Promise<any>>();

/** llama.cpp on one GGUF: same prompt, same token-by-token greedy decode, explicit threads. */
export async function llamaRunner(gguf: string, o: RunnerOptions) {
  const gpu = o.gpu ?? false;
  const key = String(gpu);
  let runtime = runtimes.get(key);
  if (!runtime) {
    runtime = (import(pathToFileURL(LLAMA_ENTRY).href) as Promise<LlamaModule>).then((m) =>
      m.getLlama({ gpu, build: 'never', logLevel: 'error', progressLogs: false, skipDownload: true }),
    );
    runtimes.set(key, runtime);
  }
  const llama = await runtime;
  if (gpu && llama.gpu !== gpu) throw new Error(`llama.cpp loaded its ${llama.gpu || 'CPU'} build, not ${gpu}`);
  const model = await llama.loadModel({ modelPath: gguf, gpuLayers: gpu ? 'max' : 0, useMmap: true });
  const contextSize = o.promptTokens + o.decodeTokens + 8;
  const context = await model.createContext({
    contextSize,
    batchSize: o.promptTokens,
    sequences: 1,
    threads: o.threads,
    ...(gpu ? {} : { flashAttention: false, experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32' }),
  });
  const sequence = context.getSequence();
  const prompt = benchPrompt(o.promptTokens, model.tokens?.count ?? 256);
  const next = { generateNext: { token: true, options: { temperature: 0 } } };
  const token = (results: any[], i: number): number => {
    const t = results[i]?.next?.token;
    if (t == null) throw new Error('llama.cpp returned no token');
    return t;
  };
  return {
    async round(): Promise<Speeds> {
      await sequence.clearHistory();
      return timeRound(
        o.decodeTokens,
        o.promptTokens,
        async () => token(await sequence.controlledEvaluate([...prompt.slice(0, -1), [prompt[prompt.length - 1], next]]), prompt.length - 1),
        async (t) => token(await sequence.controlledEvaluate([[t, next]]), 0),
      );
    },
    async dispose() {
      await context.dispose();
      await model.dispose();
    },
  };
}
