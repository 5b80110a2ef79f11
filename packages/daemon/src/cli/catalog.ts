/**
 * The curated model list for the CLI (models/curated.ts reads it): the same short names and entries,
 * with an unreadable catalog answered as a one-line CliError.
 */
import { CatalogFileError, expandShortName as expand, readCatalog as read, type CatalogModel } from '../models/curated.js';
import { CliError } from './errors.js';

export { CATALOG_FILE, type CatalogModel } from '../models/curated.js';

export function readCatalog(file?: URL | string): CatalogModel[] {
  try {
    return read(file);
  } catch (err) {
    if (err instanceof CatalogFileError) throw new CliError(err.message, 1);
    throw err;
  }
}

/** A short name ("qwen2.5-0.5b", optionally ":QUANT") → its hub reference; anything else as it is. */
export function expandShortName(ref: string, catalog = readCatalog()): string {
  return expand(ref, catalog);
}
