/**
 * Which models this node can serve and where their files are: the bundled demo model (always,
 * offline, id "orchard-demo") and complete models in the store (`orchard pull ORG/NAME`).
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeModel } from './describe.js';
import type { ModelDescription } from './description.js';

export const DEMO_MODEL_ID = 'orchard-demo';
export const BUNDLED_DEMO_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../models/orchard-demo');

export class UnknownModelError extends Error {
  override name = 'UnknownModelError';
}

const REPO_ID = /^[A-Za-z0-9][\w.-]{0,95}\/[A-Za-z0-9][\w.-]{0,95}$/;

export class ModelCatalog {
  readonly #storeRoot: string;
  readonly #demoDir: string;
  readonly #cache = new Map<string, { dir: string; described: Promise<ModelDescription> }>();

  constructor(dataDir: string, demoDir = BUNDLED_DEMO_DIR) {
    this.#storeRoot = resolve(dataDir, 'models');
    this.#demoDir = demoDir;
  }

  /** The directory of `id` on this node, or null when this node does not have it. */
  dirOf(id: string): string | null {
    if (id === DEMO_MODEL_ID) return existsSync(join(this.#demoDir, 'config.json')) ? this.#demoDir : null;
    if (!REPO_ID.test(id) || id.includes('..')) return null;
    const dir = join(this.#storeRoot, ...id.split('/'));
    return existsSync(join(dir, 'config.json')) ? dir : null;
  }

  has(id: string): boolean {
    return this.dirOf(id) !== null;
  }

  /** Ids of the models this node holds. */
  list(): string[] {
    const out: string[] = [];
    if (this.has(DEMO_MODEL_ID)) out.push(DEMO_MODEL_ID);
    for (const org of safeDir(this.#storeRoot)) {
      for (const name of safeDir(join(this.#storeRoot, org))) {
        const id = `${org}/${name}`;
        if (this.has(id)) out.push(id);
      }
    }
    return out;
  }

  /** When the files of `id` last changed here (newest modification time, ms), or null when it is not here. */
  filesAt(id: string): number | null {
    const dir = this.dirOf(id);
    if (!dir) return null;
    return Math.max(0, ...safeDir(dir).map((f) => statSync(join(dir, f), { throwIfNoEntry: false })?.mtimeMs ?? 0));
  }

  /** What planning needs to know about `id` (read once per directory). */
  describe(id: string): Promise<ModelDescription> {
    const dir = this.dirOf(id);
    if (!dir) return Promise.reject(new UnknownModelError(`model '${id}' is not on this node (the bundled '${DEMO_MODEL_ID}' or one pulled with \`orchard pull ORG/NAME\`)`));
    const hit = this.#cache.get(id);
    if (hit && hit.dir === dir) return hit.described;
    const described = describeModel(dir, { name: id });
    described.catch(() => this.#cache.delete(id));
    this.#cache.set(id, { dir, described });
    return described;
  }
}

function safeDir(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
}
