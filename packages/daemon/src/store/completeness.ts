/**
 * Whether a model directory in the store holds everything its pull set out to fetch, read from the
 * disk alone (the manifest and the chunk logs), so the catalog lists and places only complete models
 * and names what an incomplete one lacks.
 *
 * Incomplete means any of: a file the manifest still has pending (written before a pull's first
 * byte), a file the manifest records that is gone from the directory, or a file with a chunk log the
 * manifest does not record as finished (a pull from before `pending` was kept, cut off mid-file).
 * A pipeline stage's file, finished with only its tensors, is complete for that stage.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CHUNK_DIR } from './chunked/chunk-file.js';
import { MANIFEST_FILE, type ModelManifest } from './store.js';

export interface Completeness {
  complete: boolean;
  /** Files still to come, in the pull's order. */
  missing: string[];
  /** Some file holds only a pipeline stage's tensors: the directory serves that stage, not the whole model. */
  stage: boolean;
}

export function completenessOf(dir: string): Completeness {
  let manifest: ModelManifest | undefined;
  try {
    manifest = JSON.parse(readFileSync(join(dir, MANIFEST_FILE), 'utf8')) as ModelManifest;
  } catch {
    manifest = undefined;
  }
  const missing = new Set<string>(Array.isArray(manifest?.pending) ? manifest.pending : []);
  for (const file of Object.keys(manifest?.files ?? {})) if (!existsSync(join(dir, file))) missing.add(file);
  let logs: string[] = [];
  try {
    logs = readdirSync(join(dir, CHUNK_DIR)).filter((f) => f.endsWith('.log'));
  } catch {
    /* no chunk logs: nothing was pulled chunk by chunk here */
  }
  for (const log of logs) {
    const file = log.slice(0, -'.log'.length);
    const f = manifest?.files?.[file];
    if (!f || (!f.complete && !f.tensors)) missing.add(file);
  }
  // A header read before the check (no tensors kept) is not a stage's file.
  const stage = Object.values(manifest?.files ?? {}).some((f) => !f.complete && !!f.tensors?.length);
  return { complete: missing.size === 0, missing: [...missing], stage };
}

/** What an incomplete model tells the person who asked for it: what is missing and the command that finishes it. */
export function incompleteMessage(id: string, c: Completeness): string {
  const shown = c.missing.slice(0, 4).join(', ') + (c.missing.length > 4 ? ` and ${c.missing.length - 4} more` : '');
  return `model '${id}' is incomplete on this node (a pull did not finish): missing ${shown}; run \`orchard pull ${id}\` to finish it`;
}
