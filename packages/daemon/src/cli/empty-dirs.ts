/**
 * Undo the folders a failed command made and left empty (a pull that never got a byte), without ever
 * touching one that holds anything: a partial download stays, so the next pull resumes it.
 */
import { readdirSync, rmdirSync } from 'node:fs';
import { dirname, relative, sep } from 'node:path';

/** The folders from `dir` up to (not including) `root` that do not exist now, nearest last. */
export function missingFolders(dir: string, root: string, exists: (path: string) => boolean): string[] {
  const rel = relative(root, dir);
  if (!rel || rel.startsWith('..') || rel.split(sep).includes('..')) return [];
  const missing: string[] = [];
  for (let d = dir; d !== root && d !== dirname(d); d = dirname(d)) {
    if (exists(d)) break;
    missing.unshift(d);
  }
  return missing;
}

/** Removes those of `folders` (made by this process) that are empty now, deepest first. */
export function removeEmptyFolders(folders: readonly string[]): void {
  for (const d of [...folders].reverse()) {
    try {
      if (readdirSync(d).length > 0) return;
      rmdirSync(d);
    } catch {
      return;
    }
  }
}
