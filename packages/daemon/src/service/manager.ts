/**
 * Installs, removes and inspects the background service through the platform's init system.
 * All process and file access goes through `ServiceHost`, so the logic is tested without touching the
 * real launchd/systemd; the real host is in `host.ts`.
 */
import { renderLaunchAgent } from './launchd.js';
import { SYSTEMD_UNIT_NAME, type ServiceSpec } from './spec.js';
import { renderSystemdUnit } from './systemd.js';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface ServiceHost {
  platform: NodeJS.Platform;
  homeDir: string;
  uid: number;
  /** Login name, for the commands install suggests. */
  user?: string;
  run(command: string, args: string[]): Promise<RunResult>;
  writeFile(path: string, content: string): Promise<void>;
  /** Resolves false when there was nothing to remove. */
  removeFile(path: string): Promise<boolean>;
  exists(path: string): Promise<boolean>;
}

export interface ServiceStatus {
  installed: boolean;
  /** True when the init system reports the job/unit running. */
  running: boolean;
  pid?: number;
  /** Path of the plist or unit file. */
  file: string;
  /** What the init system said, in its own words (state, sub-state). */
  detail: string;
}

export interface InstallResult {
  file: string;
  /** False when the file was written but the init system could not start it (said in `detail`). */
  started: boolean;
  detail: string;
}

export function serviceFilePath(host: Pick<ServiceHost, 'platform' | 'homeDir'>, spec: Pick<ServiceSpec, 'label'>): string {
  switch (host.platform) {
    case 'darwin':
      return `${host.homeDir}/Library/LaunchAgents/${spec.label}.plist`;
    case 'linux':
      return `${host.homeDir}/.config/systemd/user/${SYSTEMD_UNIT_NAME}`;
    default:
      throw new Error(`orchard service supports macOS (launchd) and Linux (systemd), not ${host.platform}`);
  }
}

export function renderServiceFile(platform: NodeJS.Platform, spec: ServiceSpec): string {
  return platform === 'darwin' ? renderLaunchAgent(spec) : renderSystemdUnit(spec);
}

/** `launchctl print gui/UID/LABEL` output → running state. */
export function parseLaunchctlPrint(out: string): { running: boolean; pid?: number; state: string } {
  const state = /^\s*state = (.+)$/m.exec(out)?.[1]?.trim() ?? 'unknown';
  const pidText = /^\s*pid = (\d+)$/m.exec(out)?.[1];
  return { running: state === 'running', pid: pidText ? Number(pidText) : undefined, state };
}

/** `systemctl --user show UNIT -p ActiveState,SubState,MainPID,LoadState` output → running state. */
export function parseSystemctlShow(out: string): { running: boolean; pid?: number; state: string; loaded: boolean } {
  const props = new Map<string, string>();
  for (const line of out.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) props.set(line.slice(0, eq).trim(), line.slice(eq + 1).trim());
  }
  const active = props.get('ActiveState') ?? 'unknown';
  const sub = props.get('SubState') ?? 'unknown';
  const pid = Number(props.get('MainPID') ?? 0);
  return {
    running: active === 'active' && sub === 'running',
    pid: pid > 0 ? pid : undefined,
    state: `${active} (${sub})`,
    loaded: props.get('LoadState') === 'loaded',
  };
}

/** What to run when no systemd user manager answers: the unit is written, but nothing enabled or started it. */
function systemdUnavailable(host: ServiceHost, why: string): string {
  const user = host.user ?? '$USER';
  return (
    `the unit file is written but NOT enabled or started: no systemd user manager answers for this user (${why || '`systemctl --user` failed'}). ` +
    `To run it: log in to a session that starts one (or, as root, \`loginctl enable-linger ${user}\` to keep one running), then ` +
    `\`systemctl --user daemon-reload && systemctl --user enable --now ${SYSTEMD_UNIT_NAME}\`. Until then, run \`orchard start\` in a terminal.`
  );
}

async function systemdUser(host: ServiceHost): Promise<{ ok: boolean; why: string }> {
  const r = await host.run('systemctl', ['--user', 'show-environment']);
  return { ok: r.code === 0, why: (r.stderr || r.stdout).trim().split('\n')[0] ?? '' };
}

async function systemdUserAvailable(host: ServiceHost): Promise<boolean> {
  return (await systemdUser(host)).ok;
}

/** How long install waits for the init system to report the daemon running. @default 3000 */
const START_WAIT_MS = 3000;

/** Polls the init system until the job runs (or the wait is over): install says what really happened. */
async function waitRunning(host: ServiceHost, spec: ServiceSpec, waitMs: number): Promise<ServiceStatus> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const s = await serviceStatus(host, spec);
    if (s.running || Date.now() >= deadline) return s;
    await new Promise((r) => setTimeout(r, 250));
  }
}

export async function installService(host: ServiceHost, spec: ServiceSpec, o: { startWaitMs?: number } = {}): Promise<InstallResult> {
  const file = serviceFilePath(host, spec);
  await host.writeFile(file, renderServiceFile(host.platform, spec));
  const waitMs = o.startWaitMs ?? START_WAIT_MS;
  if (host.platform === 'darwin') {
    const domain = `gui/${host.uid}`;
    // Re-installing must replace a loaded job; bootout fails harmlessly when none is loaded.
    await host.run('launchctl', ['bootout', `${domain}/${spec.label}`]);
    const boot = await host.run('launchctl', ['bootstrap', domain, file]);
    if (boot.code !== 0) {
      return { file, started: false, detail: `launchctl bootstrap failed: ${(boot.stderr || boot.stdout).trim()}; nothing is running. Retry with \`launchctl bootstrap ${domain} ${file}\`, or run \`orchard start\` in a terminal` };
    }
    await host.run('launchctl', ['enable', `${domain}/${spec.label}`]);
    const s = await waitRunning(host, spec, waitMs);
    if (!s.running) return { file, started: false, detail: `loaded into ${domain} (it will start at login) but not running now (${s.detail}); see ${spec.outputFile} and \`orchard logs\`` };
    return { file, started: true, detail: `loaded into ${domain} and running (pid ${s.pid ?? '?'}); starts at login and restarts after a crash; log: ${spec.logFile}` };
  }
  const manager = await systemdUser(host);
  if (!manager.ok) return { file, started: false, detail: systemdUnavailable(host, manager.why) };
  await host.run('systemctl', ['--user', 'daemon-reload']);
  const enable = await host.run('systemctl', ['--user', 'enable', '--now', SYSTEMD_UNIT_NAME]);
  if (enable.code !== 0) {
    return { file, started: false, detail: `systemctl --user enable --now failed: ${(enable.stderr || enable.stdout).trim()}; nothing is running. See \`systemctl --user status ${SYSTEMD_UNIT_NAME}\`` };
  }
  const s = await waitRunning(host, spec, waitMs);
  if (!s.running) return { file, started: false, detail: `enabled (it will start with your session) but not running now (${s.detail}); see \`journalctl --user -u ${SYSTEMD_UNIT_NAME}\`, ${spec.outputFile} and \`orchard logs\`` };
  return { file, started: true, detail: `enabled and running (pid ${s.pid ?? '?'}); starts with your session and restarts on failure; log: ${spec.logFile}` };
}

export async function uninstallService(host: ServiceHost, spec: ServiceSpec): Promise<{ file: string; removed: boolean }> {
  const file = serviceFilePath(host, spec);
  if (host.platform === 'darwin') {
    await host.run('launchctl', ['bootout', `gui/${host.uid}/${spec.label}`]);
  } else if (await systemdUserAvailable(host)) {
    await host.run('systemctl', ['--user', 'disable', '--now', SYSTEMD_UNIT_NAME]);
  }
  const removed = await host.removeFile(file);
  if (host.platform === 'linux' && (await systemdUserAvailable(host))) await host.run('systemctl', ['--user', 'daemon-reload']);
  return { file, removed };
}

export async function serviceStatus(host: ServiceHost, spec: ServiceSpec): Promise<ServiceStatus> {
  const file = serviceFilePath(host, spec);
  const installed = await host.exists(file);
  if (host.platform === 'darwin') {
    const r = await host.run('launchctl', ['print', `gui/${host.uid}/${spec.label}`]);
    if (r.code !== 0) return { installed, running: false, file, detail: 'not loaded in launchd' };
    const s = parseLaunchctlPrint(r.stdout);
    return { installed, running: s.running, pid: s.pid, file, detail: `launchd state: ${s.state}` };
  }
  const manager = await systemdUser(host);
  if (!manager.ok) {
    return { installed, running: false, file, detail: `no systemd user manager answers for this user (${manager.why}); the unit ${installed ? 'is written but cannot run' : 'is not installed'}` };
  }
  const r = await host.run('systemctl', ['--user', 'show', SYSTEMD_UNIT_NAME, '-p', 'ActiveState,SubState,MainPID,LoadState']);
  const s = parseSystemctlShow(r.stdout);
  return { installed, running: s.running, pid: s.pid, file, detail: `systemd state: ${s.state}` };
}
