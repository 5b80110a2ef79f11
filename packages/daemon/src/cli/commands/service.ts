import type { Command } from 'commander';
import { homedir } from 'node:os';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cliSettings } from '../../config/cli.js';
import { buildServiceSpec, installService, logDirFor, realServiceHost, serviceStatus, uninstallService } from '../../service/index.js';
import { CliError } from '../errors.js';

const CLI_ENTRY = fileURLToPath(new URL('../../../bin/orchard.js', import.meta.url));

/** The data dir a client command uses without --data-dir (ORCHARD_DATA_DIR, else ~/.orchard). */
export function defaultDataDir(): string {
  return cliSettings().dataDir;
}

export function specFrom(opts: { dataDir?: string; startArg?: string[] }) {
  const dataDir = resolve(opts.dataDir ?? defaultDataDir());
  return buildServiceSpec({
    // Absolute already (the Node running this command); the CLI entry is this checkout's bin.
    nodePath: process.execPath,
    cliPath: CLI_ENTRY,
    dataDir,
    startArgs: opts.startArg ?? [],
    path: cliSettings().path,
    logDir: logDirFor(process.platform, homedir(), dataDir),
  });
}

export function registerService(program: Command): void {
  const service = program.command('service').description('run the daemon in the background at login (launchd on macOS, systemd on Linux)');
  const common = (cmd: Command) =>
    cmd
      .option('--data-dir <dir>', 'data directory the service uses (default ~/.orchard)')
      .option('--json', 'print machine-readable output');

  common(service.command('install'))
    .description('install and start the service')
    .option('--start-arg <arg...>', 'extra arguments for `orchard start` (e.g. --cluster-key FILE)')
    .action(async (opts) => {
      const result = await installService(realServiceHost(), specFrom(opts));
      if (opts.json) process.stdout.write(`${JSON.stringify(result)}\n`);
      else process.stdout.write(`wrote ${result.file}\n${result.started ? 'started' : 'NOT started'}: ${result.detail}\n`);
      // Written but not running is not success: scripts must not take it for one.
      if (!result.started) process.exitCode = 1;
    });

  common(service.command('uninstall'))
    .description('stop the service and remove its file')
    .action(async (opts) => {
      const result = await uninstallService(realServiceHost(), specFrom(opts));
      if (opts.json) process.stdout.write(`${JSON.stringify(result)}\n`);
      else process.stdout.write(result.removed ? `removed ${result.file}\n` : `no service file at ${result.file}\n`);
    });

  common(service.command('status'))
    .description('is the service installed and running?')
    .action(async (opts) => {
      const status = await serviceStatus(realServiceHost(), specFrom(opts));
      if (opts.json) process.stdout.write(`${JSON.stringify(status)}\n`);
      else
        process.stdout.write(
          `${status.installed ? 'installed' : 'not installed'} (${status.file})\n` +
            `${status.running ? `running, pid ${status.pid ?? '?'}` : 'not running'} — ${status.detail}\n`,
        );
      if (!status.installed) process.exitCode = 3;
    });

  service.action(() => {
    throw new CliError('usage: orchard service install|uninstall|status', 2);
  });
}
