import type { ServiceSpec } from './spec.js';

/** systemd splits ExecStart on whitespace and treats `%`, `$`, `\` and quotes specially. */
function quoteArg(arg: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(arg) && !arg.includes('%')) return arg;
  return `"${arg.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/%/g, '%%').replace(/\$/g, '$$$$')}"`;
}

/**
 * A user unit (`systemctl --user`): starts with the user's session (default.target), restarts on
 * failure, appends output to the log file under the data dir so `orchard logs` can tail it.
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
StandardOutput=append:${spec.logFile}
StandardError=append:${spec.logFile}

[Install]
WantedBy=default.target
`;
}
