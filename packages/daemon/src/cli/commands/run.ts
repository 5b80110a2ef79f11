import type { Command } from 'commander';
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createReferenceBackend,
  createWasmBackend,
  generate,
  loadInProcessModel,
  loadTokenizer,
  ModelFormatError,
  UnsupportedModelError,
  type Backend,
  type GenerateOptions,
} from '@orchard/engine';
import { CliError } from '../errors.js';

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
}

export function registerRun(program: Command): void {
  program
    .command('run')
    .description('generate text with a model in this process (optionally split into pipeline stages / tensor ranks)')
    .option('--model <dir>', 'Hugging Face model directory (default: the bundled models/orchard-demo)')
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
    .option('--backend <name>', 'matrix kernels: reference (plain TypeScript) or wasm (SIMD + threads)', 'reference')
    .option('--threads <n>', 'wasm backend: threads per shard (default: physical cores / shards)', int('--threads', 1))
    .action(async (opts: RunOptions) => {
      await runCommand(opts);
    });
}

async function runCommand(opts: RunOptions): Promise<void> {
  if ((opts.prompt === undefined) === (opts.promptIds === undefined)) throw new CliError('give exactly one of --prompt or --prompt-ids', 2);
  const dir = resolve(opts.model ?? BUNDLED_MODEL);
  if (!existsSync(dir)) throw new CliError(`model directory not found: ${dir}`, 2);
  let backend: () => Backend;
  if (opts.backend === 'reference') backend = createReferenceBackend;
  else if (opts.backend === 'wasm') {
    const threads = opts.threads;
    backend = () => createWasmBackend(threads ? { threads } : { threads: Math.max(1, Math.floor(availableParallelism() / (opts.pipeline * opts.tensor))) });
  } else throw new CliError(`--backend must be reference or wasm, got ${JSON.stringify(opts.backend)}`, 2);

  let model: ReturnType<typeof loadInProcessModel> | undefined;
  try {
    model = loadInProcessModel(dir, { pipeline: opts.pipeline, tensor: opts.tensor, backend });
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
        `${result.tokens.length} tokens generated, ${speed} tokens/s (${opts.backend} backend, pipeline ${opts.pipeline} × tensor ${opts.tensor}, ${finish})\n`,
    );
  } catch (err) {
    if (err instanceof ModelFormatError || err instanceof UnsupportedModelError || err instanceof RangeError) {
      throw new CliError(err.message, 1);
    }
    throw err;
  } finally {
    model?.dispose();
  }
}
