import type { ServiceSpec } from './spec.js';

const xmlEscape = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

const str = (s: string) => `<string>${xmlEscape(s)}</string>`;

/**
 * A per-user LaunchAgent: starts at login (RunAtLoad), restarts after a crash but not after a clean
 * exit (KeepAlive.SuccessfulExit = false), throttled so a crash loop does not spin the CPU.
 */
export function renderLaunchAgent(spec: ServiceSpec): string {
  const env = Object.entries(spec.environment)
    .map(([k, v]) => `      <key>${xmlEscape(k)}</key>\n      ${str(v)}`)
    .join('\n');
  const args = spec.programArguments.map((a) => `      ${str(a)}`).join('\n');
  return `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
  <dict>
    <key>Label</key>
    ${str(spec.label)}
    <key>ProgramArguments</key>
    <array>
${args}
    </array>
    <key>WorkingDirectory</key>
    ${str(spec.workingDirectory)}
    <key>EnvironmentVariables</key>
    <dict>
${env}
    </dict>
    <key>RunAtLoad</key>
    <true/>
    <key>KeepAlive</key>
    <dict>
      <key>SuccessfulExit</key>
      <false/>
    </dict>
    <key>ThrottleInterval</key>
    <integer>5</integer>
    <key>ProcessType</key>
    <string>Interactive</string>
    <key>StandardOutPath</key>
    ${str(spec.outputFile)}
    <key>StandardErrorPath</key>
    ${str(spec.outputFile)}
  </dict>
</plist>
`;
}
