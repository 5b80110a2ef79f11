import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, chmodSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  buildServiceSpec,
  installService,
  parseLaunchctlPrint,
  parseSystemctlShow,
  renderLaunchAgent,
  renderSystemdUnit,
  serviceStatus,
  uninstallService,
  type ServiceHost,
} from '../../src/service/index.js';

const spec = buildServiceSpec({
  nodePath: '/usr/local/bin/node',
  cliPath: '/opt/orchard/packages/daemon/bin/orchard.js',
  dataDir: '/Users/ada/.orchard',
  startArgs: ['--cluster-key', '/Users/ada/My Keys/pod.key'],
  path: '/usr/local/bin:/usr/bin:/bin',
});

/** A fake init system that records calls and answers from a script. */
function fakeHost(platform: NodeJS.Platform, answers: Record<string, { code: number; stdout?: string; stderr?: string }> = {}) {
  const files = new Map<string, string>();
  const calls: string[] = [];
  const host: ServiceHost = {
    platform,
    homeDir: '/Users/ada',
    uid: 501,
    async run(cmd, args) {
      const line = [cmd, ...args].join(' ');
      calls.push(line);
      const key = Object.keys(answers).find((k) => line.startsWith(k));
      const a = key ? answers[key] : { code: 0 };
      return { code: a.code, stdout: a.stdout ?? '', stderr: a.stderr ?? '' };
    },
    async writeFile(p, c) {
      files.set(p, c);
    },
    async removeFile(p) {
      return files.delete(p);
    },
    async exists(p) {
      return files.has(p);
    },
  };
  return { host, files, calls };
}

describe('service spec', () => {
  it('refuses relative paths, which init systems cannot resolve', () => {
    expect(() => buildServiceSpec({ nodePath: 'node', cliPath: '/x', dataDir: '/d' })).toThrow(/node path must be an absolute path/);
  });
  it('runs `orchard start` with the data dir and logs under it', () => {
    expect(spec.programArguments.slice(2, 5)).toEqual(['start', '--data-dir', '/Users/ada/.orchard']);
    expect(spec.logFile).toBe('/Users/ada/.orchard/logs/orchard.log');
  });
});

describe('launchd LaunchAgent', () => {
  const plist = renderLaunchAgent(spec);
  it('starts at login, restarts only after a crash, logs to the data dir', () => {
    expect(plist).toMatch(/<key>RunAtLoad<\/key>\s*<true\/>/);
    expect(plist).toMatch(/<key>KeepAlive<\/key>\s*<dict>\s*<key>SuccessfulExit<\/key>\s*<false\/>/);
    expect(plist).toContain('<string>/Users/ada/.orchard/logs/orchard.log</string>');
    expect(plist).toContain('<string>/Users/ada/My Keys/pod.key</string>');
  });
  it('is well-formed XML', () => {
    const hasXmllint = spawnSync('sh', ['-c', 'command -v xmllint']).status === 0;
    // Balanced tags are a cheap proxy when xmllint is absent.
    const opens = (plist.match(/<(dict|array|plist)>|<plist [^>]*>/g) ?? []).length;
    const closes = (plist.match(/<\/(dict|array|plist)>/g) ?? []).length;
    expect(opens).toBe(closes);
    if (hasXmllint) {
      const dir = mkdtempSync(join(tmpdir(), 'plist-'));
      writeFileSync(join(dir, 'a.plist'), plist);
      expect(spawnSync('xmllint', ['--noout', '--nonet', join(dir, 'a.plist')]).status).toBe(0);
      rmSync(dir, { recursive: true });
    }
  });
  it('escapes XML special characters in arguments', () => {
    const s = buildServiceSpec({ nodePath: '/n', cliPath: '/c', dataDir: '/d', startArgs: ['--name', 'a<b>&"c"'] });
    expect(renderLaunchAgent(s)).toContain('<string>a&lt;b&gt;&amp;&quot;c&quot;</string>');
  });
});

describe('systemd user unit', () => {
  const unit = renderSystemdUnit(spec);
  it('restarts on failure, starts with the session, quotes paths with spaces', () => {
    expect(unit).toContain('Restart=on-failure');
    expect(unit).toContain('WantedBy=default.target');
    expect(unit).toContain('"/Users/ada/My Keys/pod.key"');
    expect(unit).toContain('StandardOutput=append:/Users/ada/.orchard/logs/orchard.log');
  });
  const hasAnalyze = spawnSync('sh', ['-c', 'command -v systemd-analyze']).status === 0;
  it.skipIf(!hasAnalyze)('passes systemd-analyze verify', () => {
    const dir = mkdtempSync(join(tmpdir(), 'unit-'));
    // verify checks that ExecStart's binary exists and is executable, so point it at real files.
    const node = process.execPath;
    const cli = join(dir, 'orchard.js');
    writeFileSync(cli, '');
    chmodSync(cli, 0o755);
    const s = buildServiceSpec({ nodePath: node, cliPath: cli, dataDir: dir, startArgs: ['--name', 'desk 1'] });
    const file = join(dir, 'orchard.service');
    writeFileSync(file, renderSystemdUnit(s));
    // `--user` needs a running user manager, which containers lack; the unit syntax is the same in
    // system mode, so verify there. A deliberately broken unit proves the checker really checks.
    const verify = (f: string) => spawnSync('systemd-analyze', ['verify', f], { encoding: 'utf8' });
    const r = verify(file);
    expect(`${r.stdout}${r.stderr}`).not.toContain('orchard.service:');
    expect(r.status).toBe(0);
    const broken = join(dir, 'broken.service');
    writeFileSync(broken, renderSystemdUnit(s).replace(/^ExecStart=.*$/m, 'ExecStart=relative/orchard start'));
    expect(verify(broken).status).not.toBe(0);
    rmSync(dir, { recursive: true });
  });
});

describe('service manager', () => {
  it('macOS: writes the plist and bootstraps it into the gui domain', async () => {
    const { host, files, calls } = fakeHost('darwin');
    const r = await installService(host, spec);
    expect(r.started).toBe(true);
    expect(files.get('/Users/ada/Library/LaunchAgents/dev.orchard.daemon.plist')).toContain('dev.orchard.daemon');
    expect(calls).toContain('launchctl bootstrap gui/501 /Users/ada/Library/LaunchAgents/dev.orchard.daemon.plist');
  });
  it('macOS: a failed bootstrap is reported, not hidden', async () => {
    const { host } = fakeHost('darwin', { 'launchctl bootstrap': { code: 5, stderr: 'Bootstrap failed: 5: Input/output error' } });
    const r = await installService(host, spec);
    expect(r.started).toBe(false);
    expect(r.detail).toContain('Input/output error');
  });
  it('macOS: status reads launchctl print', async () => {
    const { host } = fakeHost('darwin', {
      'launchctl print': { code: 0, stdout: 'gui/501/dev.orchard.daemon = {\n\tactive count = 1\n\tstate = running\n\tpid = 4242\n}' },
    });
    await installService(host, spec);
    const s = await serviceStatus(host, spec);
    expect(s).toMatchObject({ installed: true, running: true, pid: 4242 });
  });
  it('Linux with a user manager: enables and starts the unit; uninstall removes it', async () => {
    const { host, files, calls } = fakeHost('linux');
    const r = await installService(host, spec);
    expect(r.started).toBe(true);
    expect(calls).toContain('systemctl --user enable --now orchard.service');
    expect(files.has('/Users/ada/.config/systemd/user/orchard.service')).toBe(true);
    const u = await uninstallService(host, spec);
    expect(u.removed).toBe(true);
    expect(files.size).toBe(0);
  });
  it('Linux without a user manager: writes the unit and says why it did not start', async () => {
    const { host, files } = fakeHost('linux', { 'systemctl --user show-environment': { code: 1, stderr: 'Failed to connect to bus' } });
    const r = await installService(host, spec);
    expect(r.started).toBe(false);
    expect(r.detail).toMatch(/user manager is not running/);
    expect(files.size).toBe(1);
  });
  it('parses systemctl show and launchctl print', () => {
    expect(parseSystemctlShow('ActiveState=active\nSubState=running\nMainPID=77\nLoadState=loaded\n')).toEqual({
      running: true,
      pid: 77,
      state: 'active (running)',
      loaded: true,
    });
    expect(parseSystemctlShow('ActiveState=failed\nSubState=failed\nMainPID=0\n').running).toBe(false);
    expect(parseLaunchctlPrint('state = not running\n').running).toBe(false);
  });
});

describe('orchard logs', () => {
  it('prints the last lines of the service log', async () => {
    const { tailLines } = await import('../../src/cli/commands/logs.js');
    const dir = mkdtempSync(join(tmpdir(), 'logs-'));
    const f = join(dir, 'l.log');
    writeFileSync(f, Array.from({ length: 5000 }, (_, i) => `line ${i}`).join('\n') + '\n');
    expect(await tailLines(f, 3)).toBe('line 4997\nline 4998\nline 4999\n');
    rmSync(dir, { recursive: true });
  });
  it('exits 1 with a clear message when there is no log', () => {
    const r = spawnSync('pnpm', ['-s', 'orchard', 'logs', '--data-dir', '/nonexistent-orchard'], { encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('no log at /nonexistent-orchard/logs/orchard.log');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
