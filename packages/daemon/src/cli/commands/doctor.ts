import type { Command } from 'commander';
import { realDoctorEnv, runDoctor, type CheckStatus } from '../../doctor/index.js';
import { CliError } from '../errors.js';
import { defaultDataDir } from './service.js';

const MARK: Record<CheckStatus, string> = { ok: 'ok  ', warn: 'warn', fail: 'FAIL', skip: 'skip' };

export function registerDoctor(program: Command): void {
  program
    .command('doctor')
    .description('check this machine for what Orchard needs, and say how to fix what is missing')
    .option('--data-dir <dir>', 'data directory (default ~/.orchard)')
    .option('--api-host <host>', 'API host to check', '127.0.0.1')
    .option('--api-port <port>', 'API port to check', '52415')
    .option('--json', 'print the checks as JSON')
    .action(async (opts) => {
      const apiPort = Number(opts.apiPort);
      if (!Number.isInteger(apiPort) || apiPort < 1 || apiPort > 65535) throw new CliError(`--api-port must be 1..65535, got "${opts.apiPort}"`, 2);
      const results = await runDoctor(realDoctorEnv({ dataDir: opts.dataDir ?? defaultDataDir(), apiHost: opts.apiHost, apiPort }));
      if (opts.json) {
        process.stdout.write(`${JSON.stringify({ checks: results })}\n`);
      } else {
        for (const r of results) {
          process.stdout.write(`[${MARK[r.status]}] ${r.title}: ${r.detail}\n`);
          if (r.fix) process.stdout.write(`       fix: ${r.fix}\n`);
        }
      }
      if (results.some((r) => r.status === 'fail')) process.exitCode = 1;
    });
}
