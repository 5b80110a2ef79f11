/** The curated model list (models/catalog.json): short names for `orchard run/chat/pull`, shown by `orchard models --available`. */
import { readFileSync } from 'node:fs';
import { CliError } from './errors.js';

export interface CatalogModel {
  name: string;
  repo: string;
  architecture: string;
  parameters: string;
  /** Weight files on the hub, in bytes (rounded, by hand). */
  bytes: number;
  context: number;
  /** Needs HF_TOKEN and an accepted licence. */
  gated: boolean;
}

export const CATALOG_FILE = new URL('../../../../models/catalog.json', import.meta.url);

export function readCatalog(file: URL | string = CATALOG_FILE): CatalogModel[] {
  try {
    return (JSON.parse(readFileSync(file, 'utf8')) as { models: CatalogModel[] }).models;
  } catch (err) {
    throw new CliError(`cannot read the model catalog ${String(file)}: ${(err as Error).message}`, 1);
  }
}

/** A short name ("qwen2.5-0.5b", optionally ":QUANT") → its hub reference; anything else as it is. */
export function expandShortName(ref: string, catalog = readCatalog()): string {
  const [name, quant] = ref.split(':');
  const hit = catalog.find((m) => m.name === name.toLowerCase());
  return hit ? `${hit.repo}${quant ? `:${quant}` : ''}` : ref;
}
