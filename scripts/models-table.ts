/**
 * Regenerates the supported-models tables in docs/models.md from the engine's architecture registry and
 * models/catalog.json. `node --import tsx scripts/models-table.ts --write` writes it; without --write it
 * exits 1 when the file is stale (packages/daemon/test/cli/models-table.test.ts does the same check).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { catalogFits, renderModelsTable, withTable } from '../packages/daemon/src/cli/models-table.js';
import { readCatalog } from '../packages/daemon/src/cli/catalog.js';

const file = new URL('../docs/models.md', import.meta.url);
const text = readFileSync(file, 'utf8');
const catalog = readCatalog();
const fresh = withTable(text, renderModelsTable(catalog, await catalogFits(catalog)));
if (process.argv.includes('--write')) {
  writeFileSync(file, fresh);
  console.log(fresh === text ? 'docs/models.md was fresh' : 'docs/models.md updated');
} else if (fresh !== text) {
  console.error('docs/models.md is stale: run node --import tsx scripts/models-table.ts --write');
  process.exit(1);
}
