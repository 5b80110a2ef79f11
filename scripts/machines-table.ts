/**
 * Regenerates the "catalog models x common Macs" table in docs/quickstart-macs.md from the planner
 * (packages/daemon/src/cli/machines-table.ts). `node --import tsx scripts/machines-table.ts --write`
 * writes it; without --write it exits 1 when the file is stale (packages/daemon/test/cli/machines-table.test.ts
 * does the same check).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { renderMachinesTable, withMachinesTable } from '../packages/daemon/src/cli/machines-table.js';

const file = new URL('../docs/quickstart-macs.md', import.meta.url);
const text = readFileSync(file, 'utf8');
const fresh = withMachinesTable(text, await renderMachinesTable());
if (process.argv.includes('--write')) {
  writeFileSync(file, fresh);
  console.log(fresh === text ? 'docs/quickstart-macs.md was fresh' : 'docs/quickstart-macs.md updated');
} else if (fresh !== text) {
  console.error('docs/quickstart-macs.md is stale: run node --import tsx scripts/machines-table.ts --write');
  process.exit(1);
}
