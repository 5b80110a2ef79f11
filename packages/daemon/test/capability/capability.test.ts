import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { measureCapability, readCachedCapability } from '../../src/capability/cache.js';
import { measureMatmulGflops, measureMemoryBandwidth } from '../../src/capability/microbench.js';

describe('capability micro-benchmark', () => {
  it('measures positive, finite figures', () => {
    const bw = measureMemoryBandwidth(8 * 2 ** 20, 50);
    const gf = measureMatmulGflops(null, 50);
    expect(bw).toBeGreaterThan(0);
    expect(Number.isFinite(bw)).toBe(true);
    expect(gf).toBeGreaterThan(0);
  });

  it('is cached per machine and re-run on demand or when the machine differs', async () => {
    const dir = mkdtempSync(join(os.tmpdir(), 'orchard-cap-'));
    const bench = { budgetMs: 40, copyBytes: 4 * 2 ** 20 };
    const first = await measureCapability(dir, { bench, machine: 'm1' });
    expect(first.cached).toBe(false);
    const second = await measureCapability(dir, { bench, machine: 'm1' });
    expect(second).toEqual({ capability: first.capability, cached: true });
    expect(readCachedCapability(dir, 'another-machine')).toBeNull();
    const forced = await measureCapability(dir, { bench, machine: 'm1', force: true });
    expect(forced.cached).toBe(false);
    expect(forced.capability.measuredAt).toBeGreaterThanOrEqual(first.capability.measuredAt);
    const file = JSON.parse(readFileSync(join(dir, 'capability.json'), 'utf8'));
    expect(file.machine).toBe('m1');
    writeFileSync(join(dir, 'capability.json'), JSON.stringify({ ...file, version: 1 }));
    expect(readCachedCapability(dir, 'm1')).toBeNull(); // figures from an older benchmark are not reused
  });

  it("uses the engine's fastest CPU backend", async () => {
    const { loadEngineBackend } = await import('../../src/capability/microbench.js');
    const backend = await loadEngineBackend();
    expect(backend?.name).toMatch(/^(wasm|reference)$/);
    const gflops = measureMatmulGflops(backend, 100);
    backend?.dispose?.();
    expect(gflops).toBeGreaterThan(0);
  });
});
