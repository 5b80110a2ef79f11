import type { ServiceSpec } from './spec.js';

/** systemd splits ExecStart on whitespace and treats `%`, `$`, `\` and quotes specially. */
function quoteArg(arg: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(arg) && !arg.includes('%')) return arg;
  return `"${arg.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/%/g, '%%').replace(/\$/g, '$$$$')}"`;
}

/**
 * A user unit (`systemctl --user`): starts with the user's session (default.target), restarts on
 * failure. The daemon writes its own rotated log (`orchard logs`); the unit appends only what the
 * process prints outside it (a crash before the log is open) to the output file.
 */
export function renderSystemdUnit(spec: ServiceSpec): string {
  const env = Object.entries(spec.environment)
    .map(([k, v]) => `Environment=${quoteArg(`${k}=${v}`)}`)
    .join('\n');
  return `[Unit]
Description=${spec.description}
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
ExecStart=${spec.programArguments.map(quoteArg).join(' ')}
WorkingDirectory=${quoteArg(spec.workingDirectory)}
${env}
Restart=on-failure
RestartSec=2
StandardOutput=append:${spec.outputFile}
StandardError=append:${spec.outputFile}

[Install]
WantedBy=default.target
`;
}
