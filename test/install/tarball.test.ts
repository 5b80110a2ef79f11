/**
 * The installable Orchard as a Mac owner gets it, without the checkout: scripts/pack.sh builds the
 * tarball; `npm install -g` puts it into a fresh prefix (npm alone: no pnpm, no repository on the path);
 * the installed `orchard start` serves the bundled demo model from a directory outside the checkout, a
 * completion and `orchard chat -m` answer; `orchard service install` writes a unit that starts the
 * installed command; `npm uninstall -g` removes it all. Needs the npm registry (for the dependencies),
 * as `pnpm install` does. The RDMA addon's build is skipped here (its own tests cover it).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, REPO_ROOT, waitFor } from '../harness/daemons.js';

let work: string;
let prefix: string;
let home: string;
let tarball: string;
let daemon: ChildProcess | undefined;
let daemonLog = '';

const bin = () => join(prefix, 'bin', 'orchard');
/** The installed command, run from outside the checkout with a home of its own. */
const orchard = (args: string[]) =>
  spawnSync(bin(), args, { cwd: work, encoding: 'utf8', timeout: 120_000, env: { ...process.env, HOME: home, NO_COLOR: '1', ORCHARD_URL: '' } });
const npm = (args: string[]) =>
  spawnSync('npm', [...args, '--prefix', prefix, '--no-audit', '--no-fund', '--prefer-offline'], { cwd: work, encoding: 'utf8', timeout: 300_000, env: { ...process.env, ORCHARD_SKIP_RDMA_BUILD: '1' } });

beforeAll(() => {
  work = mkdtempSync(join(os.tmpdir(), 'orchard-install-'));
  prefix = join(work, 'prefix');
  home = join(work, 'home');
  const packed = spawnSync('bash', [join(REPO_ROOT, 'scripts/pack.sh'), join(work, 'dist')], { encoding: 'utf8', timeout: 300_000 });
  expect(packed.status, packed.stderr).toBe(0);
  tarball = packed.stdout.trim().split('\n').at(-1)!;
}, 300_000);

afterAll(() => {
  daemon?.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

describe('orchard from its npm tarball', () => {
  it('packs one tarball named by the version, holding the sources, the demo model and no test or checkout files', () => {
    const version = (JSON.parse(readFileSync(join(REPO_ROOT, 'packages/daemon/package.json'), 'utf8')) as { version: string }).version;
    expect(tarball).toBe(join(work, 'dist', `orchard-${version}.tgz`));
    const files = spawnSync('tar', ['tzf', tarball], { encoding: 'utf8' }).stdout.split('\n');
    expect(files).toContain('package/packages/daemon/bin/orchard.js');
    expect(files).toContain('package/models/orchard-demo/model.safetensors');
    expect(files).toContain('package/node_modules/@orchard/engine/wasm/kernels.wasm');
    expect(files.some((f) => /^package\/node_modules\/@orchard\/dashboard\/dist\/[0-9a-f]+\/app\.js$/.test(f))).toBe(true);
    expect(files.filter((f) => /\/test\/|\.test\.ts$|pnpm|node_modules\/(?!@orchard\/)/.test(f))).toEqual([]);
  });

  it('writes the Homebrew formula for that tarball: its file URL and checksum, and the npm install as its steps', () => {
    const formula = readFileSync(join(work, 'dist', 'orchard.rb'), 'utf8');
    const sha = createHash('sha256').update(readFileSync(tarball)).digest('hex');
    expect(formula).toContain(`url "${pathToFileURL(tarball).href}"`);
    expect(formula).toContain(`sha256 "${sha}"`);
    expect(formula).toMatch(/system "npm", "install", \*std_npm_args/);
    expect(formula).not.toMatch(/"@URL@"|"@SHA256@"/);
  });

  it('installs with npm -g, serves the bundled model, chats, installs its service, and uninstalls', async () => {
    const installed = npm(['install', '-g', tarball]);
    expect(installed.status, installed.stderr).toBe(0);
    const version = orchard(['--version']);
    expect(version.stdout).toMatch(/^orchard \d+\.\d+\.\d+ \(Node\.js /);

    const apiPort = await freePort();
    const out: Buffer[] = [];
    daemon = spawn(bin(), ['start', '--api-port', String(apiPort), '--listen', '/ip4/127.0.0.1/tcp/0', '--no-mdns'], { cwd: work, env: { ...process.env, HOME: home } });
    daemon.stdout!.on('data', (d: Buffer) => out.push(d));
    daemon.stderr!.on('data', (d: Buffer) => out.push(d));
    const base = `http://127.0.0.1:${apiPort}`;
    await waitFor('the installed daemon to answer /v1/models', async () => {
      daemonLog = Buffer.concat(out).toString();
      const r = await fetch(`${base}/v1/models`).catch(() => null);
      return r?.ok && ((await r.json()) as { data: { id: string }[] }).data.some((m) => m.id === 'orchard-demo');
    }, 120_000);

    const res = await fetch(`${base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'orchard-demo', prompt: 'And God said', max_tokens: 8, temperature: 0 }),
    });
    expect(res.status).toBe(200);
    const completion = (await res.json()) as { choices: { text: string }[]; usage: { completion_tokens: number } };
    expect(completion.usage.completion_tokens).toBe(8);
    expect(completion.choices[0]!.text.trim().length).toBeGreaterThan(0);
    const chat = orchard(['chat', '-m', 'And God said', '--url', base, '--max-tokens', '8', '--temperature', '0']);
    expect(chat.status, chat.stderr).toBe(0);
    expect(chat.stdout.trim().length).toBeGreaterThan(0);
    expect(chat.stderr).toMatch(/\[\d+ tokens, /);
    daemon.kill('SIGTERM');

    const service = orchard(['service', 'install']);
    if (process.platform === 'linux') {
      const unitFile = join(home, '.config/systemd/user/orchard.service');
      expect(service.stdout + service.stderr).toContain(`wrote ${unitFile}`);
      const unit = readFileSync(unitFile, 'utf8');
      // The unit starts the installed copy, never the checkout this test runs from.
      const installedBin = join(prefix, 'lib/node_modules/orchard/packages/daemon/bin/orchard.js');
      expect(unit.split('\n').find((l) => l.startsWith('ExecStart='))).toMatch(new RegExp(`^ExecStart=\\S+ ${installedBin.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} start `));
      expect(unit).not.toContain(REPO_ROOT);
    }

    const removed = npm(['uninstall', '-g', 'orchard']);
    expect(removed.status, removed.stderr).toBe(0);
    expect(existsSync(bin())).toBe(false);
    expect(readdirSync(join(prefix, 'lib/node_modules'))).toEqual([]);
  }, 600_000);
});
