import type { Command } from 'commander';
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createReferenceBackend,
  createWasmBackend,
  describeAdapter,
  generate,
  InProcessModel,
  loadGpuModel,
  loadInProcessModel,
  loadTokenizer,
  ModelFormatError,
  MtpHead,
  UnsupportedModelError,
  type Backend,
  type GenerateOptions,
  type LanguageModel,
} from '@orchard/engine';
import { BACKEND_NAMES, chooseBackend, isBackendName, isGpuError, type BackendName, type CpuKernels } from '../../backend/select.js';
import { CliError } from '../errors.js';
import { contextTokens } from './load.js';
import { cliSettings } from '../../config/cli.js';
import { openSession, type SessionOptions } from '../model-session.js';
import { runChat } from './chat.js';

/** The bundled demo model, relative to the repository root. */
const BUNDLED_MODEL = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../../models/orchard-demo');

function int(name: string, min: number) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new CliError(`${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`, 2);
    return n;
  };
}

function num(name: string, ok: (n: number) => boolean, want: string) {
  return (v: string): number => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || !ok(n)) throw new CliError(`${name} must be ${want}, got ${JSON.stringify(v)}`, 2);
    return n;
  };
}

function parseIds(v: string): number[] {
  const parts = v.split(',').map((s) => s.trim()).filter((s) => s !== '');
  const ids = parts.map(Number);
  if (!ids.length || ids.some((n) => !Number.isInteger(n) || n < 0)) {
    throw new CliError(`--prompt-ids must be comma-separated token ids, got ${JSON.stringify(v)}`, 2);
  }
  return ids;
}

interface RunOptions {
  model?: string;
  prompt?: string;
  promptIds?: number[];
  chat?: boolean;
  maxTokens: number;
  temperature: number;
  topK: number;
  topP: number;
  seed?: number;
  stop: string[];
  ignoreEos?: boolean;
  pipeline: number;
  tensor: number;
  json?: boolean;
  backend: string;
  threads?: number;
  allowSoftwareGpu?: boolean;
  /** --backend was given (not the default): then `auto` says why it did not use a GPU. */
  explicitBackend?: boolean;
  promptLookup?: boolean;
  mtp?: boolean;
}

export function registerRun(program: Command): void {
  program
    .command('run')
    .description('run a model: `run MODEL [PROMPT]` pulls it if needed, places it on the pod and chats (or answers PROMPT); `run --model DIR --prompt TEXT` generates in this process')
    .argument('[model]', 'orchard-demo, a name from `orchard models --available`, ORG/NAME[:QUANT] (pulled if missing) or a model directory: served by the pod')
    .argument('[prompt]', 'answer this one message and exit (default: chat)')
    .option('--model <dir>', 'in this process: Hugging Face model directory or .gguf file (default: the bundled models/orchard-demo)')
    .option('--prompt <text>', 'prompt text')
    .option('--prompt-ids <ids>', 'prompt as comma-separated token ids (instead of --prompt)', parseIds)
    .option('--chat', 'wrap --prompt as a user message with the model chat template')
    .option('--max-tokens <n>', 'most tokens to generate', int('--max-tokens', 0), 128)
    .option('--temperature <t>', 'sampling temperature; 0 = greedy', num('--temperature', (n) => n >= 0, 'a number >= 0'), 0.8)
    .option('--top-k <k>', 'sample from the k most likely tokens; 0 = all', int('--top-k', 0), 40)
    .option('--top-p <p>', 'nucleus sampling mass', num('--top-p', (n) => n > 0 && n <= 1, 'in (0, 1]'), 0.95)
    .option('--seed <s>', 'random seed (default: random)', int('--seed', 0))
    .option('--stop <text>', 'stop when this text appears (repeatable)', (v: string, acc: string[]) => [...acc, v], [] as string[])
    .option('--ignore-eos', 'keep generating past end-of-sequence tokens')
    .option('--pipeline <n>', 'run as n in-process pipeline stages', int('--pipeline', 1), 1)
    .option('--tensor <n>', 'run as n in-process tensor-parallel ranks', int('--tensor', 1), 1)
    .option('--json', 'print {"tokens":[...]} (generated ids) instead of streaming text')
    .option('--prompt-lookup', 'speculative decoding: draft tokens from the context and verify them in one forward (same output; CPU backends)')
    .option('--mtp', "speculative decoding with the checkpoint's multi-token-prediction layer as the drafter (DeepSeek-V3 num_nextn_predict_layers; same output; CPU backends)")
    .option(
      '--backend <name>',
      'auto (a hardware GPU if there is one, else cpu), cpu (= wasm), gpu (WebGPU), reference (plain TypeScript) or wasm (SIMD + threads)',
      'auto',
    )
    .option('--threads <n>', 'wasm backend: threads per shard (default: physical cores / shards)', int('--threads', 1))
    .option('--allow-software-gpu', 'let gpu/auto use a software WebGPU adapter (Mesa lavapipe: runs on the CPU, for testing)')
    .option('--url <url>', 'with MODEL: the daemon API (one is started for the session when none answers)', cliSettings().url)
    .option('--token <token>', 'with MODEL: API token (env ORCHARD_API_TOKEN)')
    .option('--data-dir <dir>', 'with MODEL: data directory of a daemon started for the session (default ~/.orchard)')
    .option('--system <text>', 'with MODEL: system message')
    .option('-y, --yes', 'with MODEL: pull without asking')
    .option('--context <tokens>', "tokens per sequence (prompt + answer) when the model is placed now; default: the daemon's", contextTokens)
    .action(async (modelRef: string | undefined, prompt: string | undefined, opts: RunOptions & PodRunOptions, cmd: Command) => {
      if (modelRef !== undefined) {
        if (opts.model !== undefined || opts.promptIds !== undefined) throw new CliError('give a MODEL to run on the pod, or --model with --prompt/--prompt-ids to run in this process, not both', 2);
        return runOnPod(modelRef, prompt ?? opts.prompt, opts, cmd);
      }
      await runCommand({ ...opts, explicitBackend: cmd.getOptionValueSource('backend') === 'cli' });
    });
}

interface PodRunOptions extends SessionOptions {
  system?: string;
}

/** `orchard run MODEL [PROMPT]`: through the pod, like `orchard chat MODEL` (one answer when PROMPT is given). */
async function runOnPod(ref: string, prompt: string | undefined, opts: RunOptions & PodRunOptions, cmd: Command): Promise<void> {
  const session = await openSession(ref, opts);
  try {
    // `run`'s defaults suit text continuation in this process; on the pod, chat's defaults apply unless given.
    const given = (name: string) => cmd.getOptionValueSource(name) === 'cli';
    await runChat(
      {
        url: opts.url,
        token: opts.token,
        system: opts.system,
        message: prompt,
        maxTokens: String(given('maxTokens') ? opts.maxTokens : 256),
        temperature: String(given('temperature') ? opts.temperature : 0.7),
      },
      session.model,
    );
  } finally {
    await session.close();
  }
}

async function runCommand(opts: RunOptions): Promise<void> {
  if ((opts.prompt === undefined) === (opts.promptIds === undefined)) throw new CliError('give exactly one of --prompt or --prompt-ids', 2);
  const dir = resolve(opts.model ?? BUNDLED_MODEL);
  if (!existsSync(dir)) throw new CliError(`model directory not found: ${dir}`, 2);
  if (!isBackendName(opts.backend)) {
    throw new CliError(`--backend must be one of ${BACKEND_NAMES.join(', ')}, got ${JSON.stringify(opts.backend)}`, 2);
  }
  const cpuBackend = (kernels: CpuKernels): (() => Backend) => {
    if (kernels === 'reference') return createReferenceBackend;
    const threads = opts.threads ?? Math.max(1, Math.floor(availableParallelism() / (opts.pipeline * opts.tensor)));
    return () => createWasmBackend({ threads });
  };

  let model: (LanguageModel & { dispose(): void }) | undefined;
  let mtp: MtpHead | undefined;
  let used = '';
  try {
    const loaded = await loadModel(dir, opts.backend, opts, cpuBackend);
    model = loaded.model;
    used = loaded.used;
    if (opts.mtp) {
      if (!(model instanceof InProcessModel)) throw new CliError(`--mtp runs on the CPU backends (the ${used} has no draft verification); add --backend cpu`, 2);
      mtp = MtpHead.load(dir, { backend: cpuBackend(opts.backend === 'reference' ? 'reference' : 'wasm')() });
    }
    const tokenizer = opts.promptIds && opts.json ? null : loadTokenizer(dir);
    let promptIds: number[];
    if (opts.promptIds) promptIds = opts.promptIds;
    else {
      const text = opts.chat ? tokenizer!.applyChatTemplate([{ role: 'user', content: opts.prompt! }]) : opts.prompt!;
      promptIds = tokenizer!.encode(text, { addSpecialTokens: !opts.chat });
      if (!promptIds.length) throw new CliError('the prompt encodes to no tokens', 2);
    }
    const vocab = model.config.vocabSize;
    const badId = promptIds.find((t) => t >= vocab);
    if (badId !== undefined) throw new CliError(`prompt token id ${badId} is outside the vocabulary 0..${vocab - 1} of ${dir}`, 2);

    const options: GenerateOptions = {
      maxTokens: opts.maxTokens,
      temperature: opts.temperature,
      topK: opts.topK,
      topP: opts.topP,
      seed: opts.seed ?? Math.floor(Math.random() * 2 ** 31),
      stopTokenIds: opts.ignoreEos ? [] : undefined,
      stopStrings: opts.stop,
      tokenizer: tokenizer ?? undefined,
      promptLookup: opts.promptLookup,
      mtp,
    };
    if (!opts.json) options.onText = (t) => process.stdout.write(t);
    const result = await generate(model, promptIds, options);
    if (opts.json) process.stdout.write(JSON.stringify({ tokens: result.tokens }) + '\n');
    else process.stdout.write('\n');
    const contextFull = result.finishReason === 'length' && result.tokens.length < opts.maxTokens;
    const finish = contextFull ? `stopped: the model's context of ${model.maxSeqLen} tokens is full` : result.finishReason;
    const speed = Number.isFinite(result.tokensPerSecond) ? result.tokensPerSecond.toFixed(1) : 'n/a';
    process.stderr.write(
      `orchard run: ${result.promptTokens} prompt tokens in ${result.prefillMs.toFixed(0)} ms, ` +
        `${result.tokens.length} tokens generated, ${speed} tokens/s (${used}, pipeline ${opts.pipeline} × tensor ${opts.tensor}, ${finish})\n`,
    );
    const spec = result.speculation;
    if (spec) process.stderr.write(`orchard run: ${mtp ? 'MTP drafts' : 'prompt lookup'}: ${spec.accepted} of ${spec.drafted} drafted tokens accepted\n`);
  } catch (err) {
    if (err instanceof ModelFormatError || err instanceof UnsupportedModelError || err instanceof RangeError) {
      throw new CliError(err.message, 1);
    }
    // A GPU that fails mid-generation (device lost, out of memory): the tokens streamed so far are out,
    // so this is not retried on the CPU; the message says how to run without the GPU.
    if (isGpuError(err)) throw new CliError(`GPU failed during generation: ${oneLine(err.message)} (run with --backend cpu to avoid the GPU)`, 1);
    throw err;
  } finally {
    mtp?.dispose();
    model?.dispose();
  }
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ').trim();
}

/**
 * Loads the model on the backend asked for. `gpu`: a GPU failure (no adapter, over a limit, out of
 * memory) is a one-line error. `auto`: no usable GPU, or a GPU load that fails, is said in one line on
 * stderr and the model runs on the CPU (wasm) instead.
 */
async function loadModel(
  dir: string,
  name: BackendName,
  opts: RunOptions,
  cpuBackend: (k: CpuKernels) => () => Backend,
): Promise<{ model: LanguageModel & { dispose(): void }; used: string }> {
  const onCpu = (kernels: CpuKernels) => ({
    model: loadInProcessModel(dir, { pipeline: opts.pipeline, tensor: opts.tensor, backend: cpuBackend(kernels) }),
    used: `${kernels} backend`,
  });
  let choice;
  try {
    choice = await chooseBackend(name, { allowSoftware: opts.allowSoftwareGpu });
  } catch (err) {
    if (isGpuError(err)) throw new CliError(`--backend gpu: ${oneLine(err.message)}`, 1);
    throw err;
  }
  if (choice.kind === 'cpu') {
    if (choice.fallback && opts.explicitBackend) process.stderr.write(`orchard run: no GPU used (${oneLine(choice.fallback)}); running on the CPU (wasm backend)\n`);
    return onCpu(choice.kernels);
  }
  const ctx = choice.ctx;
  try {
    const gpu = await loadGpuModel(dir, { context: ctx, pipeline: opts.pipeline, tensor: opts.tensor });
    // The context was handed in, so the model does not own it: destroy it with the model.
    const dispose = gpu.dispose.bind(gpu);
    gpu.dispose = () => {
      dispose();
      ctx.destroy();
    };
    return { model: gpu, used: `gpu backend on ${describeAdapter(ctx.adapter)}` };
  } catch (err) {
    ctx.destroy();
    if (!isGpuError(err)) throw err;
    if (name === 'gpu') throw new CliError(`--backend gpu: loading ${dir} on the GPU failed: ${oneLine(err.message)}`, 1);
    process.stderr.write(`orchard run: GPU load failed (${oneLine(err.message)}); running on the CPU (wasm backend)\n`);
    return onCpu('wasm');
  }
}
