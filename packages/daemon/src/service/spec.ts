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
  /** Both stdout and stderr are appended here. */
  logFile: string;
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
  /** PATH for the service (launchd starts jobs with a minimal one). */
  path?: string;
}

export function buildServiceSpec(input: ServiceSpecInput): ServiceSpec {
  for (const [field, value] of [
    ['node path', input.nodePath],
    ['orchard entry point', input.cliPath],
    ['data dir', input.dataDir],
  ] as const) {
    if (!value.startsWith('/')) throw new Error(`service: ${field} must be an absolute path, got "${value}"`);
  }
  return {
    label: SERVICE_LABEL,
    description: 'Orchard inference daemon',
    programArguments: [input.nodePath, input.cliPath, 'start', '--data-dir', input.dataDir, ...(input.startArgs ?? [])],
    workingDirectory: input.dataDir,
    logFile: `${input.dataDir}/logs/orchard.log`,
    environment: {
      ORCHARD_SERVICE: '1',
      ...(input.path ? { PATH: input.path } : {}),
    },
  };
}
