import type { Command } from 'commander';
import { defaultBenchThreads, formatEngineTable, llamaCppMissingReason, runEngineBench } from '@orchard/engine/bench';
import { CliError } from '../../errors.js';

/**
 * `orchard bench engine [--json] [--threads N] [--rounds N]`: Orchard's engine (WASM backend) against
 * llama.cpp (node-llama-cpp, CPU, same threads) on the same GGUF weights: decode and prefill tokens/s
 * for f16/Q8_0/Q4_0 of a generated ~100M model and of the demo model, and f16 weight streaming against
 * a read sweep. `--json` prints exactly one object:
 * {"lines":[{"name","orchard","llamacpp","unit","ratio"}, ...]} (stable contract; lines include
 * decode-f16, decode-q8_0, decode-q4_0, prefill-f16 and stream-f16, and on a GPU (lavapipe if no other)
 * gpu-decode-f16, gpu-decode-q8_0, gpu-decode-q4_0, gpu-prefill-f16 against llama.cpp's GPU build on the
 * same device). Without node-llama-cpp installed
 * it says so and exits 2, printing no numbers.
 */
export function registerBenchEngine(bench: Command): void {
  bench
    .command('engine')
    .description('engine decode/prefill tokens/s vs llama.cpp on the same GGUF weights (f16, Q8_0, Q4_0), f16 weight streaming vs read bandwidth')
    .option('--json', 'print one JSON object (stable contract) instead of a table')
    .option('--threads <n>', 'threads for both engines (default: physical cores)')
    .option('--rounds <n>', 'measured rounds per model, best kept (default 2)')
    .action(async (opts: { json?: boolean; threads?: string; rounds?: string }) => {
      const threads = opts.threads === undefined ? defaultBenchThreads() : Number(opts.threads);
      if (!Number.isInteger(threads) || threads < 1) throw new CliError(`--threads must be an integer >= 1, got ${JSON.stringify(opts.threads)}`, 2);
      const rounds = opts.rounds === undefined ? undefined : Number(opts.rounds);
      if (rounds !== undefined && (!Number.isInteger(rounds) || rounds < 1)) throw new CliError(`--rounds must be an integer >= 1, got ${JSON.stringify(opts.rounds)}`, 2);
      const missing = llamaCppMissingReason();
      if (missing) throw new CliError(missing, 2);
      const result = await runEngineBench({ threads, rounds, log: opts.json ? undefined : (line) => process.stderr.write(`${line}\n`) });
      process.stdout.write(opts.json ? `${JSON.stringify(result)}\n` : `${formatEngineTable(result, threads)}\n`);
    });
}
