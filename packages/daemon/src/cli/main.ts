#!/usr/bin/env node
import '../polyfills.js';
import { Command, CommanderError } from 'commander';
import { cliSettings } from '../config/cli.js';
import { commands } from './commands/index.js';
import { CliError } from './errors.js';
import { addExamples, helpStyle } from './help.js';
import { endQuietlyOnClosedPipes } from './pipes.js';
import { readFileSync } from 'node:fs';

/** This package's version (package.json), shown by `orchard --version`. */
export const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export function buildProgram(): Command {
  const program = new Command('orchard')
    .description('Turn the machines on your desk into one inference machine.')
    .version(`orchard ${VERSION} (Node.js ${process.versions.node})`, '-v, --version', 'print the version')
    .configureHelp(helpStyle)
    .showHelpAfterError()
    .exitOverride();
  for (const register of commands) register(program);
  addExamples(program);
  return program;
}

/** Runs the CLI; never lets a stack trace reach the terminal unless ORCHARD_DEBUG is set. */
export async function main(argv: string[]): Promise<number> {
  try {
    const program = buildProgram();
    // Bare `orchard` is a question, not a mistake: the overview, exit 0.
    if (argv.length === 0) {
      program.outputHelp();
      return 0;
    }
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode;
    if (err instanceof CliError) {
      process.stderr.write(`orchard: ${err.message}\n`);
      return err.exitCode;
    }
    const e = err as Error;
    process.stderr.write(`orchard: ${e?.message ?? String(err)}\n`);
    if (cliSettings().debug) process.stderr.write(`${e?.stack ?? ''}\n`);
    return 1;
  }
}

/** The `orchard` process: main() with the process-wide parts (closed pipes) set up once. */
export async function runCli(argv: string[]): Promise<void> {
  endQuietlyOnClosedPipes();
  const code = await main(argv);
  // A command may set process.exitCode itself (e.g. `service status` when not installed).
  if (code !== 0) process.exitCode = code;
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('/cli/main.ts')) {
  await runCli(process.argv.slice(2));
}
