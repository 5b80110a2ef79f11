/**
 * The store and the disk under it, as a person's bad day goes: a disk too small for the model
 * (refused before a byte is fetched, naming the path, the bytes needed and free), a disk that fills
 * up anyway (ENOSPC named with the path and the fix, not "no source left"), a read-only data
 * directory (named as such, not ENOENT from a mkdir), and a pull cut off half way: not listed, says
 * which files are missing and `orchard pull`, and the next pull fetches only what is missing.
 *
 * Real small tmpfs mounts where this process may mount them (root); the free-space check also
 * through an injected statfs, so it runs everywhere.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomModel, type RandomModelInfo } from '@orchard/engine/testing';
import { ModelCatalog, UnknownModelError } from '../../src/models/catalog.js';
import { completenessOf, DiskError, DiskSpaceError, HubClient, ModelStore } from '../../src/store/index.js';
import { diskError } from '../../src/store/errors.js';
import { startFakeHub, type FakeHub } from '../../../../test/harness/fake-hub.js';

const REPO = 'orchard-test/disk-llama';
let work: string;
let model: RandomModelInfo;
let hub: FakeHub;
let weightsSize: number;
const mounts: string[] = [];

/** A tmpfs of `size` at a new directory, read-only when asked; null where this process cannot mount. */
function tmpfs(size: string, readOnly = false): string | null {
  const at = mkdtempSync(join(work, 'mnt-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}${readOnly ? ',ro' : ''}`, 'tmpfs', at], { stdio: 'ignore' });
  } catch {
    return null;
  }
  mounts.push(at);
  return at;
}
const canMount = (() => {
  if (process.getuid?.() !== 0) return false;
  try {
    const probe = mkdtempSync(join(tmpdir(), 'orchard-mount-probe-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', probe], { stdio: 'ignore' });
    execFileSync('umount', [probe]);
    rmSync(probe, { recursive: true });
    return true;
  } catch {
    return false;
  }
})();

const stores: ModelStore[] = [];
const newStore = (dir: string, o?: ConstructorParameters<typeof ModelStore>[2]) => {
  const s = new ModelStore(dir, new HubClient({ endpoint: hub.url }), o);
  stores.push(s);
  return s;
};
/** Body bytes the hub served for the model's files (the listing is not a file). */
const servedFiles = () => [...hub.servedBytes.values()].reduce((a, b) => a + b, 0);

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'orchard-disk-'));
  model = writeRandomModel(join(work, 'src-model'), { hiddenSize: 256, intermediateSize: 512, numLayers: 4, numHeads: 4, numKvHeads: 2, seed: 9 });
  weightsSize = statSync(join(model.dir, 'model.safetensors')).size;
  hub = await startFakeHub({ [REPO]: model.dir });
});
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await hub?.close();
  for (const m of mounts) execFileSync('umount', [m]);
  rmSync(work, { recursive: true, force: true });
});

describe('free space is checked before a pull', () => {
  it('refuses a pull the disk cannot hold, naming the path and the bytes needed and free, with nothing fetched', async () => {
    hub.servedBytes.clear();
    const dataDir = join(work, 'small');
    const store = newStore(dataDir, { statfs: async () => ({ bavail: 100, bsize: 4096 }) });
    const err = await store.pull(REPO).catch((e: Error) => e);
    expect(err).toBeInstanceOf(DiskSpaceError);
    const e = err as DiskSpaceError;
    expect(e.freeBytes).toBe(409_600);
    expect(e.neededBytes).toBeGreaterThanOrEqual(weightsSize);
    expect(e.message).toContain(join(dataDir, 'models', 'orchard-test', 'disk-llama'));
    expect(e.message).toMatch(/needs [\d.]+ MB more and the disk has 409.6 kB free/);
    expect(e.message).toContain('--data-dir');
    expect(servedFiles()).toBe(0);
  });

  it.skipIf(!canMount)('on a real 1 MiB tmpfs: refused before a byte of weights is fetched', async () => {
    hub.servedBytes.clear();
    const at = tmpfs('1m')!;
    const err = await newStore(join(at, 'orchard')).pull(REPO).catch((e: Error) => e);
    expect(err).toBeInstanceOf(DiskSpaceError);
    expect((err as Error).message).toContain(at);
    expect(servedFiles()).toBe(0);
  });
});

describe.skipIf(!canMount)('a disk that fails under the pull', () => {
  it('a disk that fills up mid-pull is named (ENOSPC, the file, the fix), not "no source left"', async () => {
    const at = tmpfs(`${Math.floor(weightsSize / 2 / 1024)}k`)!;
    // The free-space check says yes (as a disk another process fills would): the write then fails.
    const err = await newStore(join(at, 'orchard'), { statfs: async () => ({ bavail: 1e9, bsize: 4096 }) })
      .pull(REPO)
      .catch((e: Error) => e);
    expect(err).toBeInstanceOf(DiskError);
    expect((err as DiskError).code).toBe('ENOSPC');
    expect((err as Error).message).toMatch(new RegExp(`no space left on the disk writing ${at}/orchard/models/orchard-test/disk-llama/(model\\.safetensors|\\.orchard-chunks)`));
    expect((err as Error).message).toContain('--data-dir');
    expect((err as Error).message).not.toMatch(/no source left/);
  });

  it('a read-only data directory is named as read-only with its path, not ENOENT from a mkdir', async () => {
    const at = tmpfs('1m', true)!;
    for (const dataDir of [at, join(at, 'not', 'yet')]) {
      const err = await newStore(dataDir).pull(REPO).catch((e: Error) => e);
      expect(err).toBeInstanceOf(DiskError);
      expect((err as DiskError).code).toBe('EROFS');
      expect((err as Error).message).toBe(`${at} is on a read-only file system (EROFS) so it cannot be written: remount it read-write, or start orchard with --data-dir on another disk (or set ORCHARD_DATA_DIR)`);
    }
  });
});

describe('disk errors by their code', () => {
  it('names a directory this user may not write (EACCES, EPERM) with the fix; leaves other errors alone', () => {
    const errno = (code: string) => Object.assign(new Error(`${code}: raw`), { code });
    for (const code of ['EACCES', 'EPERM']) {
      const e = diskError(errno(code), '/data/models/o/m/model.safetensors');
      expect(e).toBeInstanceOf(DiskError);
      expect(e!.message).toBe(`no permission writing /data/models/o/m/model.safetensors (${code}): make the data directory writable by this user (chown/chmod), or start orchard with --data-dir on another disk (or set ORCHARD_DATA_DIR)`);
    }
    expect(diskError(errno('EDQUOT'), '/q')!.message).toMatch(/^no space left on the disk writing \/q \(EDQUOT\)/);
    expect(diskError(errno('ECONNRESET'), '/x')).toBeUndefined();
    expect(diskError(new Error('plain'), '/x')).toBeUndefined();
  });
});

describe('a pull cut off half way', () => {
  it('is not listed, names what is missing and `orchard pull`; the next pull fetches only the rest', async () => {
    const dataDir = join(work, 'cut');
    hub.faults.throttleBytesPerSecond = 4 * 1024 * 1024;
    const abort = new AbortController();
    const first = newStore(dataDir);
    const cut = await first
      .pull(REPO, {
        signal: abort.signal,
        onProgress: (e) => {
          if (e.file === 'model.safetensors' && e.done > weightsSize / 8) abort.abort(new Error('cut'));
        },
      })
      .catch((e: Error) => e);
    expect(cut).toBeInstanceOf(Error);
    await first.close();
    hub.faults.throttleBytesPerSecond = undefined;

    const dir = join(dataDir, 'models', 'orchard-test', 'disk-llama');
    const state = completenessOf(dir);
    expect(state.complete).toBe(false);
    expect(state.missing).toContain('model.safetensors');
    // The check before the weights fetched the small files first: only the weights are left.
    expect(state.missing).not.toContain('tokenizer.json');
    // config.json came first and is whole: the directory looks like a model, but is not listed.
    const catalog = new ModelCatalog(dataDir, join(work, 'no-demo'));
    expect(catalog.dirOf(REPO)).toBe(dir);
    expect(catalog.list()).toEqual([]);
    expect(catalog.unlisted(REPO)).toMatch(/^model 'orchard-test\/disk-llama' is incomplete on this node \(a pull did not finish\): missing .*model\.safetensors.*; run `orchard pull orchard-test\/disk-llama` to finish it$/);
    const refused = await catalog.describe(REPO).catch((e: Error) => e);
    expect(refused).toBeInstanceOf(UnknownModelError);
    expect((refused as Error).message).toContain('orchard pull orchard-test/disk-llama');

    hub.servedBytes.clear();
    const r = await newStore(dataDir).pull(REPO);
    expect(r.hubBytes).toBeGreaterThan(0);
    expect(hub.servedBytes.get('model.safetensors')).toBeLessThan(weightsSize);
    expect(hub.servedBytes.get('config.json')).toBeUndefined();
    expect(hub.servedBytes.get('tokenizer.json')).toBeUndefined();
    expect(completenessOf(dir)).toEqual({ complete: true, missing: [], stage: false });
    expect(catalog.list()).toEqual([REPO]);
    expect(catalog.unlisted(REPO)).toBeNull();
    const d = await catalog.describe(REPO);
    expect(d.dims.numLayers).toBe(4);
  }, 30_000);

  it('a directory a pull from before `pending` was kept left mid-file (a chunk log, no manifest entry) is incomplete too', () => {
    const dir = join(work, 'old', 'models', 'o', 'm');
    mkdirSync(join(dir, '.orchard-chunks'), { recursive: true });
    writeFileSync(join(dir, 'config.json'), '{}');
    writeFileSync(join(dir, '.orchard-manifest.json'), JSON.stringify({ repo: 'o/m', commit: 'c', files: { 'config.json': { size: 2, complete: true } } }));
    writeFileSync(join(dir, '.orchard-chunks', 'config.json.log'), 'x\n');
    writeFileSync(join(dir, '.orchard-chunks', 'model.safetensors.log'), 'x\n');
    expect(completenessOf(dir)).toEqual({ complete: false, missing: ['model.safetensors'], stage: false });
  });
});
