/**
 * What a background service runs, independent of the init system that runs it.
 * Generators turn this into a launchd LaunchAgent (macOS) or a systemd user unit (Linux).
 */
export interface ServiceSpec {
  /** Reverse-DNS label (launchd) and unit base name (systemd). */
  label: string;
  description: string;
  /** argv[0] must be an absolute path: init systems do not search PATH the way a shell does. */
  programArguments: string[];
  workingDirectory: string;
  /** The daemon's own JSON log, rotated by size (`orchard start --log-file`; `orchard logs` reads it). */
  logFile: string;
  /** What the process prints outside the log (a crash before the log is open): the init system appends it here. */
  outputFile: string;
  environment: Record<string, string>;
}

export const SERVICE_LABEL = 'dev.orchard.daemon';
export const SYSTEMD_UNIT_NAME = 'orchard.service';

export interface ServiceSpecInput {
  nodePath: string;
  cliPath: string;
  dataDir: string;
  /** Extra `orchard start` arguments, e.g. a cluster key or API host. */
  startArgs?: string[];
  /** PATH for the service (launchd starts jobs with a minimal one); relative entries are dropped. */
  path?: string;
  /** Folder for the log files. @default <dataDir>/logs (macOS: ~/Library/Logs/Orchard, see logDirFor) */
  logDir?: string;
}

/** Where a platform keeps a user service's logs: ~/Library/Logs/Orchard on macOS (Console.app shows it), else the data dir. */
export function logDirFor(platform: NodeJS.Platform, homeDir: string, dataDir: string): string {
  return platform === 'darwin' ? `${homeDir}/Library/Logs/Orchard` : `${dataDir}/logs`;
}

/**
 * The PATH a service gets: the folder of the Node that installed it first (runners are started with
 * process.execPath, but tools the daemon calls — system_profiler, ibv_devinfo — come from PATH), then the
 * absolute entries of the installing shell's PATH, without package-manager folders such as pnpm's
 * `node_modules/.bin` (they belong to one checkout and one shell) and without duplicates.
 */
export function servicePath(nodePath: string, path: string | undefined): string {
  const nodeDir = nodePath.slice(0, nodePath.lastIndexOf('/')) || '/';
  const entries = [nodeDir, ...(path ?? '').split(':')].filter((e) => e.startsWith('/') && !/\/node_modules(\/|$)/.test(e));
  for (const d of ['/usr/local/bin', '/usr/bin', '/bin', '/usr/sbin', '/sbin']) entries.push(d);
  return [...new Set(entries)].join(':');
}

export function buildServiceSpec(input: ServiceSpecInput): ServiceSpec {
  for (const [field, value] of [
    ['node path', input.nodePath],
    ['orchard entry point', input.cliPath],
    ['data dir', input.dataDir],
    ...(input.logDir !== undefined ? ([['log dir', input.logDir]] as const) : []),
  ] as const) {
    if (!value.startsWith('/')) throw new Error(`service: ${field} must be an absolute path, got "${value}"`);
  }
  const logDir = input.logDir ?? `${input.dataDir}/logs`;
  const logFile = `${logDir}/orchard.log`;
  return {
    label: SERVICE_LABEL,
    description: 'Orchard inference daemon',
    // No console lines: the rotated log file has every entry (the output file keeps only crashes).
    programArguments: [input.nodePath, input.cliPath, 'start', '--data-dir', input.dataDir, '--log-format', 'none', '--log-file', logFile, ...(input.startArgs ?? [])],
    workingDirectory: input.dataDir,
    logFile,
    outputFile: `${logDir}/orchard.out.log`,
    environment: {
      ORCHARD_SERVICE: '1',
      PATH: servicePath(input.nodePath, input.path),
    },
  };
}
