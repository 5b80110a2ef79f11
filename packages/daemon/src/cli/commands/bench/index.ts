import type { Command } from 'commander';
import { registerBenchTransport } from './transport.js';
import { registerBenchEngine } from './engine.js';

/** `orchard bench <what>`: one file per benchmark in this folder, each adding its subcommand here. */
export type RegisterBench = (bench: Command) => void;

export const benches: RegisterBench[] = [registerBenchTransport, registerBenchEngine];

export function registerBench(program: Command): void {
  const bench = program.command('bench').description('measure this machine: run a benchmark and print its numbers with ratios to a baseline');
  for (const register of benches) register(bench);
}
