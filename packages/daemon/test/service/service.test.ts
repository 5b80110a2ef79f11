import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, chmodSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  buildServiceSpec,
  installService,
  logDirFor,
  servicePath,
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
  it('runs `orchard start` with the data dir, its own rotated log file and no console lines', () => {
    expect(spec.programArguments.slice(2, 9)).toEqual(['start', '--data-dir', '/Users/ada/.orchard', '--log-format', 'none', '--log-file', '/Users/ada/.orchard/logs/orchard.log']);
    expect(spec.logFile).toBe('/Users/ada/.orchard/logs/orchard.log');
    expect(spec.outputFile).toBe('/Users/ada/.orchard/logs/orchard.out.log');
  });
  it('macOS keeps the logs in ~/Library/Logs/Orchard', () => {
    const dir = logDirFor('darwin', '/Users/ada', '/Users/ada/.orchard');
    expect(dir).toBe('/Users/ada/Library/Logs/Orchard');
    expect(logDirFor('linux', '/home/ada', '/home/ada/.orchard')).toBe('/home/ada/.orchard/logs');
    const mac = buildServiceSpec({ nodePath: '/opt/homebrew/bin/node', cliPath: '/c/orchard.js', dataDir: '/Users/ada/.orchard', logDir: dir });
    expect(renderLaunchAgent(mac)).toContain('<string>/Users/ada/Library/Logs/Orchard/orchard.out.log</string>');
    expect(mac.programArguments).toContain('/Users/ada/Library/Logs/Orchard/orchard.log');
  });
  it("PATH: the installing Node's folder first, only absolute entries, no package-manager folders", () => {
    const pnpmPath = './node_modules/.bin:/work/orchard/node_modules/.bin:/root/.local/share/pnpm:/usr/local/bin:node_modules/.bin:/usr/bin:/usr/local/bin';
    const p = servicePath('/opt/node-20/bin/node', pnpmPath);
    expect(p.split(':')[0]).toBe('/opt/node-20/bin');
    expect(p.split(':').every((e) => e.startsWith('/'))).toBe(true);
    expect(p).not.toMatch(/node_modules/);
    expect(p).toContain('/root/.local/share/pnpm');
    expect(new Set(p.split(':')).size).toBe(p.split(':').length);
    const s = buildServiceSpec({ nodePath: '/opt/node-20/bin/node', cliPath: '/c', dataDir: '/d', path: pnpmPath });
    expect(s.programArguments[0]).toBe('/opt/node-20/bin/node');
    expect(renderSystemdUnit(s)).toMatch(/^Environment=PATH=\/opt\/node-20\/bin(:\/[^:\n]+)*$/m);
  });
});

describe('launchd LaunchAgent', () => {
  const plist = renderLaunchAgent(spec);
  it('starts at login, restarts only after a crash, logs to the data dir', () => {
    expect(plist).toMatch(/<key>RunAtLoad<\/key>\s*<true\/>/);
    expect(plist).toMatch(/<key>KeepAlive<\/key>\s*<dict>\s*<key>SuccessfulExit<\/key>\s*<false\/>/);
    expect(plist).toContain('<key>StandardOutPath</key>\n    <string>/Users/ada/.orchard/logs/orchard.out.log</string>');
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
    expect(unit).toContain('StandardOutput=append:/Users/ada/.orchard/logs/orchard.out.log');
  });
  const hasAnalyze = spawnSync('sh', ['-c', 'command -v systemd-analyze']).status === 0;
  if (!hasAnalyze && process.env.ORCHARD_REQUIRE_SYSTEMD_ANALYZE === '1') {
    throw new Error('ORCHARD_REQUIRE_SYSTEMD_ANALYZE=1 but systemd-analyze is not installed (Debian package systemd)');
  }
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

const RUNNING_LAUNCHD = { code: 0, stdout: 'gui/501/dev.orchard.daemon = {\n\tactive count = 1\n\tstate = running\n\tpid = 4242\n}' };
const RUNNING_SYSTEMD = { code: 0, stdout: 'ActiveState=active\nSubState=running\nMainPID=77\nLoadState=loaded\n' };

describe('service manager', () => {
  it('macOS: writes the plist, bootstraps it into the gui domain, and says it runs only when launchd says so', async () => {
    const { host, files, calls } = fakeHost('darwin', { 'launchctl print': RUNNING_LAUNCHD });
    const r = await installService(host, spec, { startWaitMs: 0 });
    expect(r.started).toBe(true);
    expect(r.detail).toMatch(/running \(pid 4242\)/);
    expect(files.get('/Users/ada/Library/LaunchAgents/dev.orchard.daemon.plist')).toContain('dev.orchard.daemon');
    expect(calls).toContain('launchctl bootstrap gui/501 /Users/ada/Library/LaunchAgents/dev.orchard.daemon.plist');
  });
  it('macOS: loaded but not running is not called started', async () => {
    const { host } = fakeHost('darwin', { 'launchctl print': { code: 0, stdout: 'state = not running\n' } });
    const r = await installService(host, spec, { startWaitMs: 0 });
    expect(r.started).toBe(false);
    expect(r.detail).toMatch(/not running now \(launchd state: not running\); see \/Users\/ada\/\.orchard\/logs\/orchard\.out\.log/);
  });
  it('macOS: a failed bootstrap is reported, not hidden', async () => {
    const { host } = fakeHost('darwin', { 'launchctl bootstrap': { code: 5, stderr: 'Bootstrap failed: 5: Input/output error' } });
    const r = await installService(host, spec, { startWaitMs: 0 });
    expect(r.started).toBe(false);
    expect(r.detail).toContain('Input/output error');
  });
  it('macOS: status reads launchctl print', async () => {
    const { host } = fakeHost('darwin', { 'launchctl print': RUNNING_LAUNCHD });
    await installService(host, spec, { startWaitMs: 0 });
    const s = await serviceStatus(host, spec);
    expect(s).toMatchObject({ installed: true, running: true, pid: 4242 });
  });
  it('Linux with a user manager: enables and starts the unit; uninstall removes it', async () => {
    const { host, files, calls } = fakeHost('linux', { 'systemctl --user show orchard.service': RUNNING_SYSTEMD });
    const r = await installService(host, spec, { startWaitMs: 0 });
    expect(r.started).toBe(true);
    expect(r.detail).toMatch(/^enabled and running \(pid 77\)/);
    expect(calls).toContain('systemctl --user enable --now orchard.service');
    expect(files.has('/Users/ada/.config/systemd/user/orchard.service')).toBe(true);
    const u = await uninstallService(host, spec);
    expect(u.removed).toBe(true);
    expect(files.size).toBe(0);
  });
  it('Linux: enabled but failed at once is said, with where to look', async () => {
    const { host } = fakeHost('linux', { 'systemctl --user show orchard.service': { code: 0, stdout: 'ActiveState=failed\nSubState=failed\nMainPID=0\n' } });
    const r = await installService(host, spec, { startWaitMs: 0 });
    expect(r.started).toBe(false);
    expect(r.detail).toMatch(/enabled \(it will start with your session\) but not running now \(systemd state: failed \(failed\)\); see `journalctl --user -u orchard.service`/);
  });
  it('Linux without a user manager: writes the unit, does not claim it will start, says exactly what to run', async () => {
    const { host, files } = fakeHost('linux', { 'systemctl --user show-environment': { code: 1, stderr: 'Failed to connect to bus: No medium found' } });
    host.user = 'ada';
    const r = await installService(host, spec, { startWaitMs: 0 });
    expect(r.started).toBe(false);
    expect(r.detail).toMatch(/NOT enabled or started: no systemd user manager answers for this user \(Failed to connect to bus: No medium found\)/);
    expect(r.detail).toContain('`loginctl enable-linger ada`');
    expect(r.detail).toContain('`systemctl --user daemon-reload && systemctl --user enable --now orchard.service`');
    expect(r.detail).not.toMatch(/will start at next login/);
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
    const r = spawnSync('pnpm', ['-s', 'orchard', 'logs', '--data-dir', '/nonexistent-orchard', '--url', 'http://127.0.0.1:1'], { encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/no log at \/nonexistent-orchard\/logs\/orchard\.log .*orchard start/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
