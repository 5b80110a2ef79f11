/**
 * An unusable data dir gets one sentence naming the path, what is wrong with it and what to do,
 * from `prepareDataDir` and through `orchard start` (exit code 1, no stack, no raw errno text).
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DataDirError, explainDataDirError, prepareDataDir } from '../src/config/data-dir.js';
import { main } from '../src/cli/main.js';

const tmp = () => mkdtempSync(join(os.tmpdir(), 'orchard-datadir-'));
const RAW = /EEXIST|ENOTDIR|ENOENT|EROFS|EACCES|errno|mkdir '/;

function failure(dir: string): DataDirError {
  try {
    prepareDataDir(dir);
  } catch (err) {
    expect(err).toBeInstanceOf(DataDirError);
    return err as DataDirError;
  }
  throw new Error(`prepareDataDir(${dir}) did not fail`);
}

describe('data dir problems', () => {
  it('creates a missing data dir (owner only) and leaves no trace of its write test', () => {
    const dir = join(tmp(), 'a', 'b');
    prepareDataDir(dir);
    expect(readdirSync(dir)).toEqual([]);
    prepareDataDir(dir); // again: already there
  });

  it('a file where the data dir should be', () => {
    const file = join(tmp(), 'orchard');
    writeFileSync(file, 'x');
    const e = failure(file);
    expect(e.message).toBe(`data dir ${file}: it is a file, not a directory; move the file away, or choose another data dir with --data-dir (or ORCHARD_DATA_DIR)`);
    expect(e.message).not.toMatch(RAW);
  });

  it('a file on the way to it', () => {
    const file = join(tmp(), 'blocker');
    writeFileSync(file, 'x');
    const e = failure(join(file, 'orchard'));
    expect(e.message).toMatch(new RegExp(`^data dir ${file}/orchard: ${file} is a file, not a directory, so nothing can be created under it; move the file away`));
  });

  it('a dangling symbolic link (a data dir on an unmounted disk)', () => {
    const link = join(tmp(), 'orchard');
    symlinkSync('/nonexistent-volume/orchard', link);
    const e = failure(link);
    expect(e.message).toBe(`data dir ${link}: ${link} is a symbolic link to /nonexistent-volume/orchard, which does not exist; create /nonexistent-volume/orchard, remove the link, or choose another data dir with --data-dir (or ORCHARD_DATA_DIR)`);
  });

  it('read-only file system, missing permission and a full disk, from the errno when the path does not say', () => {
    const dir = tmp(); // exists and is writable here, so only the errno can tell
    const err = (code: string) => Object.assign(new Error(`${code}: something, mkdir '${dir}'`), { code });
    expect(explainDataDirError(dir, err('EROFS'), 'creating it').message).toBe(`data dir ${dir}: it is on a read-only file system; choose a data dir on a writable file system with --data-dir (or ORCHARD_DATA_DIR)`);
    expect(explainDataDirError(dir, err('EACCES'), 'writing a file in it').message).toMatch(new RegExp(`^data dir ${dir}: user \\S+ may not write there \\(writing a file in it\\); give it write permission \\(chown/chmod\\)`));
    expect(explainDataDirError(dir, err('ENOSPC'), 'writing a file in it').message).toMatch(/no space left on its file system \(writing a file in it\); free some space/);
  });

  const root = process.getuid?.() === 0;
  it.skipIf(!root)('a read-only mount (as root): named as read-only, whatever errno the file system gives', () => {
    const mnt = join(tmp(), 'ro');
    mkdirSync(mnt);
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro', 'tmpfs', mnt], { stdio: 'ignore' });
    } catch {
      return; // no mount permission in this container
    }
    try {
      const e = failure(join(mnt, 'orchard'));
      expect(e.message).toBe(`data dir ${mnt}/orchard: ${mnt} is on a read-only file system; choose a data dir on a writable file system with --data-dir (or ORCHARD_DATA_DIR)`);
    } finally {
      execFileSync('umount', [mnt]);
    }
  });

  it.skipIf(root)('a directory this user may not write (as non-root)', () => {
    const parent = tmp();
    chmodSync(parent, 0o500);
    const e = failure(join(parent, 'orchard'));
    expect(e.message).toMatch(/may not write to .*; give it write permission/);
    chmodSync(parent, 0o700);
  });

  describe('orchard start', () => {
    afterEach(() => vi.restoreAllMocks());

    it('exits 1 with the sentence (no stack, no raw errno) for a data dir that is a file', async () => {
      const file = join(tmp(), 'not-a-dir');
      writeFileSync(file, 'x');
      let stderr = '';
      vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
        stderr += String(chunk);
        return true;
      });
      const code = await main(['start', '--data-dir', file, '--api-port', '0', '--no-mdns', '--listen', '/ip4/127.0.0.1/tcp/0']);
      expect(code).toBe(1);
      expect(stderr).toBe(`orchard: data dir ${file}: it is a file, not a directory; move the file away, or choose another data dir with --data-dir (or ORCHARD_DATA_DIR)\n`);
      expect(existsSync(file)).toBe(true);
    });
  });
});
