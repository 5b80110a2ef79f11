import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MACS_BEGIN, MACS_END, machineSpeeds, renderMachinesTable, withMachinesTable } from '../../src/cli/machines-table.js';
import { readCatalog } from '../../src/cli/catalog.js';

const DOC = new URL('../../../../docs/quickstart-macs.md', import.meta.url);
const model = (name: string) => readCatalog().find((m) => m.name === name)!;

describe('docs/quickstart-macs.md: catalog models x common Macs', () => {
  it('holds the table the planner generates (run node --import tsx scripts/machines-table.ts --write when this fails)', async () => {
    const text = readFileSync(DOC, 'utf8');
    expect(withMachinesTable(text, await renderMachinesTable())).toBe(text);
  });

  it("answers from the planner: memory decides what fits, bandwidth how fast", async () => {
    // 17 GB of Qwen3-30B-A3B: not in the GPU's share of 16 GB, fits 32 GB; an M4 Max outruns an M4
    const [mini16, mini32, max128] = await machineSpeeds(model('qwen3-30b-a3b'), ['mac-mini-m4-16', 'mac-mini-m4-32', 'm4-max-128']);
    expect(mini16).toBeNull();
    expect(max128!).toBeGreaterThan(mini32! * 1.3);
    // 377 GB of DeepSeek V3.1: one 512 GB Ultra, not one 256 GB Ultra nor two 128 GB M4 Max
    expect((await machineSpeeds(model('deepseek-v3.1'), ['m3-ultra-256', 'm3-ultra-512', 'm4-max-128x2'])).map((s) => s !== null)).toEqual([false, true, false]);
    const table = await renderMachinesTable(readCatalog(), ['m3-ultra-512', 'm3-ultra-512x2']);
    expect(table.startsWith(MACS_BEGIN) && table.endsWith(MACS_END)).toBe(true);
    // Kimi K2 (577 GB) needs two 512 GB Macs; dense catalog models (no config here) are not rows
    expect(table).toMatch(/\| `kimi-k2` \| 1T \(32B active\) \| ≈577 GB \| – \| \d+ \|/);
    expect(table).not.toContain('`qwen2.5-0.5b`');
  });
});
