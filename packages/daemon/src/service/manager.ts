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

const SYSTEMD_UNAVAILABLE =
  'the systemd user manager is not running here (no `systemctl --user`); the unit file is written and will start at next login, or start it by hand with `orchard start`';

async function systemdUserAvailable(host: ServiceHost): Promise<boolean> {
  const r = await host.run('systemctl', ['--user', 'show-environment']);
  return r.code === 0;
}

export async function installService(host: ServiceHost, spec: ServiceSpec): Promise<InstallResult> {
  const file = serviceFilePath(host, spec);
  await host.writeFile(file, renderServiceFile(host.platform, spec));
  if (host.platform === 'darwin') {
    const domain = `gui/${host.uid}`;
    // Re-installing must replace a loaded job; bootout fails harmlessly when none is loaded.
    await host.run('launchctl', ['bootout', `${domain}/${spec.label}`]);
    const boot = await host.run('launchctl', ['bootstrap', domain, file]);
    if (boot.code !== 0) {
      return { file, started: false, detail: `launchctl bootstrap failed: ${(boot.stderr || boot.stdout).trim()}` };
    }
    await host.run('launchctl', ['enable', `${domain}/${spec.label}`]);
    return { file, started: true, detail: `loaded into ${domain}; starts at login and restarts after a crash` };
  }
  if (!(await systemdUserAvailable(host))) return { file, started: false, detail: SYSTEMD_UNAVAILABLE };
  await host.run('systemctl', ['--user', 'daemon-reload']);
  const enable = await host.run('systemctl', ['--user', 'enable', '--now', SYSTEMD_UNIT_NAME]);
  if (enable.code !== 0) {
    return { file, started: false, detail: `systemctl --user enable --now failed: ${(enable.stderr || enable.stdout).trim()}` };
  }
  return { file, started: true, detail: 'enabled and started; starts with your session and restarts on failure' };
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
  if (!(await systemdUserAvailable(host))) {
    return { installed, running: false, file, detail: SYSTEMD_UNAVAILABLE };
  }
  const r = await host.run('systemctl', ['--user', 'show', SYSTEMD_UNIT_NAME, '-p', 'ActiveState,SubState,MainPID,LoadState']);
  const s = parseSystemctlShow(r.stdout);
  return { installed, running: s.running, pid: s.pid, file, detail: `systemd state: ${s.state}` };
}
