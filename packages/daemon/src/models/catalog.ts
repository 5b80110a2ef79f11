/**
 * Which models this node can serve and where their files are: the bundled demo model (always,
 * offline, id "orchard-demo") and complete models in the store (`orchard pull ORG/NAME`). A model
 * whose pull did not finish is not listed and says what it lacks; one whose files cannot be loaded
 * (checked here, or reported by a runner) is refused with the reason until its files change.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ggufSplitNames, parseGgufSplitName } from '@orchard/engine/gguf';
import { completenessOf, incompleteMessage } from '../store/completeness.js';
import { describeModel } from './describe.js';
import type { ModelDescription } from './description.js';
import { filesFingerprint, loadProblem, ModelFilesError } from './load-check.js';

export const DEMO_MODEL_ID = 'orchard-demo';
export const BUNDLED_DEMO_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../models/orchard-demo');

export class UnknownModelError extends Error {
  override name = 'UnknownModelError';
}

const REPO_ID = /^[A-Za-z0-9][\w.-]{0,95}\/[A-Za-z0-9][\w.-]{0,95}$/;

export interface CatalogOptions {
  /** A model was found unloadable (once per state of its files): for the log. */
  onRefused?(id: string, reason: string): void;
}

export class ModelCatalog {
  readonly #storeRoot: string;
  readonly #demoDir: string;
  readonly #o: CatalogOptions;
  readonly #cache = new Map<string, { dir: string; fingerprint: string; described: Promise<ModelDescription> }>();
  /** Models whose files failed to load, with the state of the files they failed in. */
  readonly #failed = new Map<string, { fingerprint: string; reason: string }>();

  constructor(dataDir: string, demoDir = BUNDLED_DEMO_DIR, o: CatalogOptions = {}) {
    this.#storeRoot = resolve(dataDir, 'models');
    this.#demoDir = demoDir;
    this.#o = o;
  }

  /**
   * The directory of `id` on this node (a Hugging Face directory, or a GGUF repo's directory holding
   * its .gguf file), or null when this node does not have it.
   */
  dirOf(id: string): string | null {
    if (id === DEMO_MODEL_ID) return existsSync(join(this.#demoDir, 'config.json')) ? this.#demoDir : null;
    if (!REPO_ID.test(id) || id.includes('..')) return null;
    const dir = join(this.#storeRoot, ...id.split('/'));
    return existsSync(join(dir, 'config.json')) || ggufIn(dir) ? dir : null;
  }

  /** What the engine loads for `id`: its directory, or the .gguf file in it; null when this node does not have it. */
  pathOf(id: string): string | null {
    const dir = this.dirOf(id);
    return dir && modelPathIn(dir);
  }

  has(id: string): boolean {
    return this.dirOf(id) !== null;
  }

  /**
   * Whether list() holds `id`, reading only that model's files (and the names of its org and the store
   * root, so an id spelled unlike its directory counts as list() counts it): a request's model check,
   * which list() made read every model's manifest in the store.
   */
  holds(id: string): boolean {
    if (id === DEMO_MODEL_ID) return this.has(DEMO_MODEL_ID);
    const dir = this.dirOf(id);
    if (!dir) return false;
    const [org, name] = id.split('/');
    return safeDir(this.#storeRoot).includes(org) && safeDir(join(this.#storeRoot, org)).includes(name) && completenessOf(dir).complete;
  }

  /** Ids of the complete models this node holds. */
  list(): string[] {
    const out: string[] = [];
    if (this.has(DEMO_MODEL_ID)) out.push(DEMO_MODEL_ID);
    for (const org of safeDir(this.#storeRoot)) {
      for (const name of safeDir(join(this.#storeRoot, org))) {
        const id = `${org}/${name}`;
        const dir = this.dirOf(id);
        if (dir && completenessOf(dir).complete) out.push(id);
      }
    }
    return out;
  }

  /**
   * Why `id` cannot be served from this node's files now, without reading them again: its pull did
   * not finish (UnknownModelError naming the missing files and `orchard pull`), or its files failed
   * to load and have not changed since (ModelFilesError). Null when nothing is known against it.
   */
  refusal(id: string): UnknownModelError | ModelFilesError | null {
    const dir = this.dirOf(id);
    if (!dir) return null;
    const c = completenessOf(dir);
    if (!c.complete) return new UnknownModelError(incompleteMessage(id, c));
    const failed = this.#failed.get(id);
    if (!failed) return null;
    if (failed.fingerprint === filesFingerprint(dir)) return new ModelFilesError(id, failed.reason);
    this.#failed.delete(id);
    return null;
  }

  /** Why `id` is not listed although its directory is here (its pull did not finish), or null. */
  unlisted(id: string): string | null {
    const dir = this.dirOf(id);
    if (!dir) return null;
    const c = completenessOf(dir);
    return c.complete ? null : incompleteMessage(id, c);
  }

  /**
   * Whether this node holds only a pipeline stage's tensors of `id` (a stage pull's copy): another
   * placement must fetch what it lacks first (a partial GGUF's missing bytes read as zeros).
   */
  stageCopy(id: string): boolean {
    const dir = this.dirOf(id);
    return !!dir && completenessOf(dir).stage;
  }

  /** Marks `id` failed (a runner could not load it) until its files change. */
  markFailed(id: string, reason: string): void {
    const dir = this.dirOf(id);
    if (dir) this.#failed.set(id, { fingerprint: filesFingerprint(dir), reason });
  }

  /** When the files of `id` last changed here (newest modification time, ms), or null when it is not here. */
  filesAt(id: string): number | null {
    const dir = this.dirOf(id);
    if (!dir) return null;
    return Math.max(0, ...safeDir(dir).map((f) => statSync(join(dir, f), { throwIfNoEntry: false })?.mtimeMs ?? 0));
  }

  /**
   * What planning needs to know about `id` (read once per state of its files). Rejects with
   * UnknownModelError for a model not here or incomplete, ModelFilesError for files that cannot load.
   */
  describe(id: string): Promise<ModelDescription> {
    const dir = this.dirOf(id);
    const path = dir && modelPathIn(dir);
    if (!dir || !path) return Promise.reject(new UnknownModelError(`model '${id}' is not on this node (the bundled '${DEMO_MODEL_ID}' or one pulled with \`orchard pull ORG/NAME\`)`));
    const refused = this.refusal(id);
    if (refused) return Promise.reject(refused);
    const fingerprint = filesFingerprint(dir);
    const hit = this.#cache.get(id);
    if (hit && hit.dir === dir && hit.fingerprint === fingerprint) return hit.described;
    // A pipeline stage's copy holds only some tensors: it is described as before and loaded by its runner alone.
    if (completenessOf(dir).stage) {
      const described = describeModel(path, { name: id });
      described.catch(() => this.#cache.delete(id));
      this.#cache.set(id, { dir, fingerprint, described });
      return described;
    }
    const fail = (reason: string) => {
      this.#failed.set(id, { fingerprint, reason });
      this.#o.onRefused?.(id, reason);
      return new ModelFilesError(id, reason);
    };
    const problem = loadProblem(path);
    const described = problem !== null ? Promise.reject(fail(problem)) : describeModel(path, { name: id, refuseDamaged: true }).catch((err: Error) => Promise.reject(fail(err.message)));
    described.catch(() => this.#cache.delete(id));
    this.#cache.set(id, { dir, fingerprint, described });
    return described;
  }
}

/**
 * The GGUF models in a GGUF repo's directory (a directory without config.json), as the paths the engine
 * opens: each .gguf file, or the first part of a whole split set (the engine opens the set from it), at
 * the top or one folder down (large repos keep each quantisation in a folder). A part of a set whose
 * other parts are not all here is not a model; vision projectors (mmproj-*) are not either.
 */
export function ggufModelsIn(dir: string): string[] {
  const candidates: string[] = [];
  for (const entry of safeDir(dir)) {
    const p = join(dir, entry);
    if (entry.toLowerCase().endsWith('.gguf')) candidates.push(p);
    else if (!entry.startsWith('.') && statSync(p, { throwIfNoEntry: false })?.isDirectory()) {
      for (const f of safeDir(p)) if (f.toLowerCase().endsWith('.gguf')) candidates.push(join(p, f));
    }
  }
  return candidates.filter((p) => {
    const name = basename(p);
    if (/^mmproj/i.test(name)) return false;
    const split = parseGgufSplitName(name);
    if (!split) return true;
    return split.no === 0 && (ggufSplitNames(name) ?? []).every((n) => existsSync(join(dirname(p), n)));
  });
}

/**
 * The GGUF model a GGUF repo's directory serves: the one there, or the newest when several
 * quantisations were pulled (the last `orchard pull ORG/NAME:QUANT` wins).
 */
export function ggufIn(dir: string): string | null {
  const models = ggufModelsIn(dir);
  if (models.length === 0) return null;
  const at = (f: string) => statSync(f, { throwIfNoEntry: false })?.mtimeMs ?? 0;
  return models.reduce((a, b) => (at(b) > at(a) ? b : a));
}

/** What the engine loads from a model directory: the directory (config.json there), or its .gguf file. */
function modelPathIn(dir: string): string | null {
  return existsSync(join(dir, 'config.json')) ? dir : ggufIn(dir);
}

function safeDir(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
}
