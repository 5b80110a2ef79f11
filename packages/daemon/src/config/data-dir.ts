/**
 * The data dir (identity, caches, models, logs) made ready before anything else touches it, with
 * one clear sentence when it cannot be: what is wrong with which path and what to do, instead of a
 * raw "EEXIST: file already exists, mkdir ...". The cause is read from the path itself (a file in
 * the way, a dangling symbolic link, a read-only or full file system, missing permission), since the
 * errno alone can mislead (some file systems answer ENOENT for a read-only mount).
 */
import { accessSync, constants, lstatSync, mkdirSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, parse, resolve } from 'node:path';

export class DataDirError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
    this.name = 'DataDirError';
  }
}

const ELSEWHERE = 'or choose another data dir with --data-dir (or ORCHARD_DATA_DIR)';
const WRITABLE = 'choose a data dir on a writable file system with --data-dir (or ORCHARD_DATA_DIR)';

function errno(err: unknown): string {
  return (err as NodeJS.ErrnoException)?.code ?? 'EUNKNOWN';
}

/** The path and each of its ancestors, root first. */
function chain(path: string): string[] {
  const out: string[] = [];
  for (let p = resolve(path); ; p = dirname(p)) {
    out.unshift(p);
    if (p === parse(p).root) return out;
  }
}

function whoami(): string {
  try {
    return os.userInfo().username;
  } catch {
    return `uid ${process.getuid?.() ?? '?'}`;
  }
}

/** Why `dir` cannot be a writable directory, read from the path; `err` is what the failing call said. */
export function explainDataDirError(dir: string, err: unknown, doing: string): DataDirError {
  const code = errno(err);
  const make = (what: string, todo: string) => new DataDirError(`data dir ${dir}: ${what}; ${todo}`, code);
  if (code === 'ENOSPC' || code === 'EDQUOT') return make(`no space left on its file system (${doing})`, `free some space, ${ELSEWHERE}`);
  let deepestDir = parse(resolve(dir)).root;
  for (const p of chain(dir)) {
    let st;
    try {
      st = lstatSync(p);
    } catch {
      break; // p does not exist: everything before it does
    }
    if (st.isSymbolicLink()) {
      let target = '?';
      try {
        target = readlinkSync(p);
        st = statSync(p);
      } catch {
        return make(`${p} is a symbolic link to ${target}, which does not exist`, `create ${target}, remove the link, ${ELSEWHERE}`);
      }
    }
    if (!st.isDirectory()) {
      return p === resolve(dir)
        ? make('it is a file, not a directory', `move the file away, ${ELSEWHERE}`)
        : make(`${p} is a file, not a directory, so nothing can be created under it`, `move the file away, ${ELSEWHERE}`);
    }
    deepestDir = p;
  }
  try {
    accessSync(deepestDir, constants.W_OK);
  } catch (e) {
    const c = errno(e);
    if (c === 'EROFS') return make(`${deepestDir} is on a read-only file system`, WRITABLE);
    if (c === 'EACCES' || c === 'EPERM') return make(`user ${whoami()} may not write to ${deepestDir}`, `give it write permission there (chown/chmod), ${ELSEWHERE}`);
  }
  if (code === 'EROFS') return make('it is on a read-only file system', WRITABLE);
  if (code === 'EACCES' || code === 'EPERM') return make(`user ${whoami()} may not write there (${doing})`, `give it write permission (chown/chmod), ${ELSEWHERE}`);
  // Every directory that exists is writable, yet the call failed: report it as it came, with what was attempted.
  return make(`${doing} failed: ${(err as Error)?.message ?? String(err)}`, `check the path and its file system, ${ELSEWHERE}`);
}

/**
 * Creates the data dir (owner-only) if needed and proves it writable by writing and removing a
 * small file. Throws DataDirError with one actionable sentence otherwise.
 */
export function prepareDataDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw explainDataDirError(dir, err, 'creating it');
  }
  const probe = join(dir, `.write-test-${process.pid}`);
  try {
    writeFileSync(probe, 'orchard');
  } catch (err) {
    throw explainDataDirError(dir, err, 'writing a file in it');
  } finally {
    rmSync(probe, { force: true });
  }
}
