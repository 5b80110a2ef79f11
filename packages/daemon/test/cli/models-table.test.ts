import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { supportedArchitectures } from '@orchard/engine';
import { catalogFits, renderModelsTable, TABLE_BEGIN, TABLE_END, withTable } from '../../src/cli/models-table.js';
import { expandShortName, readCatalog } from '../../src/cli/catalog.js';

const DOC = new URL('../../../../docs/models.md', import.meta.url);

describe('docs/models.md', () => {
  it('holds the table generated from the architecture registry and the catalog (run scripts/models-table.ts --write when this fails)', async () => {
    const text = readFileSync(DOC, 'utf8');
    expect(withTable(text, renderModelsTable(readCatalog(), await catalogFits()))).toBe(text);
  });

  it("lists the example clusters each mixture-of-experts model fits, from the planner", async () => {
    const fits = await catalogFits();
    // 1T parameters at 4.5 bits (~578 GB) need the four 512 GB M3 Ultras; a 30B fits every example.
    expect(fits.get('kimi-k2')).toEqual(['4x-m3-ultra-tb5-rdma', '4x-m3-ultra-tb5-tcp']);
    expect(fits.get('qwen3-30b-a3b')).toContain('4x-mac-mini-m4-pro-ethernet');
    expect(fits.get('qwen2.5-0.5b')).toBeNull();
    // a short name is the MLX 4-bit conversion; NAME:QUANT (or NAME:gguf) its GGUF repo
    expect(expandShortName('kimi-k2')).toBe('mlx-community/Kimi-K2-Instruct-4bit');
    expect(expandShortName('gpt-oss-20b:gguf')).toBe('ggml-org/gpt-oss-20b-GGUF:MXFP4');
    expect(expandShortName('qwen3-30b-a3b:Q8_0')).toBe('unsloth/Qwen3-30B-A3B-GGUF:Q8_0');
    expect(renderModelsTable(readCatalog(), fits)).toMatch(/\| `deepseek-v3\.1` \| mlx-community\/DeepSeek-V3\.1-4bit \|.*\| 4x-m3-ultra-tb5-rdma, 4x-m3-ultra-tb5-tcp \|/);
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
