/** The curated model list (models/catalog.json): short names for `orchard run/chat/pull`, shown by `orchard models --available`. */
import { readFileSync } from 'node:fs';

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
  /** The original release `repo` was converted from (mixture-of-experts entries: `repo` is its MLX 4-bit conversion). */
  original?: string;
  /** The model's config.json dimensions, a file in models/configs/: what the planner sizes it by. */
  config?: string;
  /** A GGUF repo of the model: `NAME:QUANT` pulls `repo:QUANT` (`NAME:gguf` its `quant`); `split`: its files are split in parts. */
  gguf?: { repo: string; quant: string; bytes: number; split: boolean };
}

export const CATALOG_FILE = new URL('../../../../models/catalog.json', import.meta.url);

/** The catalog file cannot be read (a broken install): named with the file. */
export class CatalogFileError extends Error {}

export function readCatalog(file: URL | string = CATALOG_FILE): CatalogModel[] {
  try {
    return (JSON.parse(readFileSync(file, 'utf8')) as { models: CatalogModel[] }).models;
  } catch (err) {
    throw new CatalogFileError(`cannot read the model catalog ${String(file)}: ${(err as Error).message}`);
  }
}

/**
 * A short name ("qwen2.5-0.5b", optionally ":QUANT") → its hub reference; anything else as it is. A
 * model with a GGUF repo takes `:QUANT` (or `:gguf`, its listed quantisation) from that repo.
 */
export function expandShortName(ref: string, catalog = readCatalog()): string {
  const [name, quant] = ref.split(':');
  const hit = catalog.find((m) => m.name === name.toLowerCase());
  if (!hit) return ref;
  if (quant && hit.gguf) return `${hit.gguf.repo}:${quant.toLowerCase() === 'gguf' ? hit.gguf.quant : quant}`;
  return `${hit.repo}${quant ? `:${quant}` : ''}`;
}
