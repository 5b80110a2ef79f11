/**
 * A pull killed mid-download (`orchard pull` under kill -9) goes on when a daemon starts on the same
 * data directory: the daemon finds the pull's manifest with files still pending, resumes it from the
 * chunk logs, and the model appears in /v1/models byte for byte the hub's — with the hub asked only
 * for what had not arrived. Until then the model is not listed. The same daemon, asked to pull onto a
 * 1 MiB tmpfs (as root), refuses before a file byte moves: 507 with the path and the sizes.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomModel } from '@orchard/engine/testing';
import { completenessOf } from '../../packages/daemon/src/store/index.js';
import { REPO_ROOT, startLoopbackDaemon, waitFor, type LoopbackDaemon } from '../harness/daemons.js';
import { startFakeHub, type FakeHub } from '../harness/fake-hub.js';

const REPO = 'resume-org/killed-pull';
/** The same model under another name, pulled onto a disk too small for it. */
const BIG = 'small-disk/too-big';
let work: string;
let src: string;
let hub: FakeHub;
let daemon: LoopbackDaemon | undefined;
let mounted: string | undefined;
const isRoot = process.getuid?.() === 0;

beforeAll(async () => {
  work = mkdtempSync(join(os.tmpdir(), 'orchard-pull-resume-'));
  src = join(work, 'src');
  writeRandomModel(src, { numLayers: 4, hiddenSize: 256, intermediateSize: 512, seed: 12 });
  hub = await startFakeHub({ [REPO]: src, [BIG]: src }, { throttleBytesPerSecond: 2 * 1024 * 1024 });
});
afterAll(async () => {
  daemon?.child.kill('SIGKILL');
  if (mounted) execFileSync('umount', [mounted]);
  await hub?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('pulls and the disk, through a daemon', () => {
  it('resumes when a daemon starts on its data directory, fetching only what had not arrived', async () => {
    const dataDir = join(work, 'data');
    const dir = join(dataDir, 'models', 'resume-org', 'killed-pull');
    const weights = join(dir, 'model.safetensors');
    const size = statSync(join(src, 'model.safetensors')).size;
    const log = join(dir, '.orchard-chunks', 'model.safetensors.log');
    const pull = spawn(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'packages/daemon/src/cli/main.ts'), 'pull', REPO, '--data-dir', dataDir], {
      cwd: REPO_ROOT,
      stdio: 'ignore',
      env: { ...process.env, HF_ENDPOINT: hub.url },
    });
    const exited = new Promise((res) => pull.once('exit', res));
    // Killed once a few chunks of the weights are recorded as verified.
    await waitFor('chunks of the weights on disk', () => existsSync(log) && readFileSync(log, 'utf8').split('\n').length > 4, 60_000, 50);
    pull.kill('SIGKILL');
    await exited;
    expect(completenessOf(dir).complete).toBe(false);
    expect(completenessOf(dir).missing).toContain('model.safetensors');

    const before = hub.servedBytes.get('model.safetensors') ?? 0;
    hub.servedBytes.clear();
    hub.faults.throttleBytesPerSecond = undefined;
    daemon = await startLoopbackDaemon(dataDir, { args: ['--name', 'resume'], env: { HF_ENDPOINT: hub.url, ORCHARD_LOG_LEVEL: 'info' } });
    const ids = await waitFor(
      'the resumed model in /v1/models',
      async () => {
        const list = ((await (await fetch(`${daemon!.base}/v1/models`)).json()) as { data: { id: string }[] }).data.map((m) => m.id);
        return list.includes(REPO) ? list : undefined;
      },
      60_000,
      200,
    );
    expect(ids).toContain(REPO);
    expect(completenessOf(dir), readFileSync(join(dir, '.orchard-manifest.json'), 'utf8')).toEqual({ complete: true, missing: [], stage: false });
    expect(readFileSync(weights).equals(readFileSync(join(src, 'model.safetensors')))).toBe(true);
    // What the killed pull had verified was not fetched again.
    const after = hub.servedBytes.get('model.safetensors') ?? 0;
    expect(before).toBeGreaterThan(0);
    expect(after).toBeGreaterThan(0);
    expect(after).toBeLessThan(size);
    expect(readFileSync(daemon.logFile, 'utf8')).toMatch(/resuming an interrupted pull/);
  }, 150_000);

  it.skipIf(!isRoot)('the daemon refuses a pull its disk cannot hold (507, the path, the sizes), with no file fetched from the hub', async () => {
    expect(daemon, 'the daemon of the test before').toBeDefined();
    const at = join(work, 'data', 'models', 'small-disk');
    mkdirSync(at, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', at]);
    mounted = at;
    hub.servedBytes.clear();
    const res = await fetch(`${daemon!.base}/api/models/pull`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ repo: BIG }) });
    const body = (await res.json()) as { error: { message: string; code: string } };
    expect(res.status, JSON.stringify(body)).toBe(507);
    expect(body.error.code).toBe('insufficient_storage');
    expect(body.error.message).toMatch(new RegExp(`^${BIG}: not enough free space in ${at}/too-big: the pull needs [\\d.]+ MB more and the disk has [\\d.]+ (kB|MB) free`));
    // Nothing of the weights came from the hub (the small files and headers the engine's check reads may have).
    const weightBytes = [...hub.servedBytes].filter(([name]) => name.endsWith('.safetensors')).reduce((a, [, n]) => a + n, 0);
    expect(weightBytes, JSON.stringify([...hub.servedBytes])).toBeLessThan(64 * 1024);
  }, 60_000);
});
