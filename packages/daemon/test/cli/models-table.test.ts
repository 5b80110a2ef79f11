import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { supportedArchitectures } from '@orchard/engine';
import { renderModelsTable, TABLE_BEGIN, TABLE_END, withTable } from '../../src/cli/models-table.js';
import { readCatalog } from '../../src/cli/catalog.js';

const DOC = new URL('../../../../docs/models.md', import.meta.url);

describe('docs/models.md', () => {
  it('holds the table generated from the architecture registry and the catalog (run scripts/models-table.ts --write when this fails)', () => {
    const text = readFileSync(DOC, 'utf8');
    expect(withTable(text, renderModelsTable())).toBe(text);
  });

  it('lists every registered architecture and every catalog model', () => {
    const table = renderModelsTable();
    for (const a of supportedArchitectures()) expect(table).toContain(`| \`${a}\` |`);
    for (const m of readCatalog()) expect(table).toContain(`| \`${m.name}\` | ${m.repo} |`);
    expect(table.startsWith(TABLE_BEGIN) && table.endsWith(TABLE_END)).toBe(true);
    // A registry change shows up: a catalog without Qwen3 leaves its row without models.
    expect(renderModelsTable(readCatalog().filter((m) => m.architecture !== 'Qwen3ForCausalLM'))).toMatch(/\| `Qwen3ForCausalLM` \| [^|]+ \| – \|/);
  });
});
