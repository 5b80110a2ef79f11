/**
 * The data-plane process environment: merged with the caller's, and (where the C library is glibc)
 * letting a process that seals 64 KiB pieces reuse the freed output memory instead of faulting in
 * fresh pages for every piece.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { DATA_PLANE_MALLOC_TUNABLES, dataPlaneProcessEnv } from '../src/process-env.js';

const glibc = Boolean((process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header?.glibcVersionRuntime);

describe('data-plane process environment', () => {
  it('adds the malloc settings and keeps the caller’s own GLIBC_TUNABLES last (they win)', () => {
    expect(dataPlaneProcessEnv({ A: '1' })).toEqual({ A: '1', GLIBC_TUNABLES: DATA_PLANE_MALLOC_TUNABLES });
    expect(dataPlaneProcessEnv({ GLIBC_TUNABLES: 'glibc.malloc.trim_threshold=1' }).GLIBC_TUNABLES).toBe(`${DATA_PLANE_MALLOC_TUNABLES}:glibc.malloc.trim_threshold=1`);
  });

  it.skipIf(!glibc)('a process sealing 64 KiB pieces in it reuses heap memory (few page faults per round)', () => {
    // 16 MiB per round in 64 KiB pieces, as a connection seals a large frame (4096 pages of output).
    // Measured here: without the settings nearly every round faults all 4096 pages in again once the
    // heap settles; with them the last rounds fault a few dozen pages in all.
    const script = `
      const { createCipheriv } = require('node:crypto');
      const key = Buffer.alloc(32, 1), iv = Buffer.alloc(12), data = Buffer.alloc(16 << 20, 2);
      const faults = [];
      for (let round = 0; round < 12; round++) {
        const f0 = process.resourceUsage().minorPageFault;
        const c = createCipheriv('aes-256-gcm', key, iv);
        for (let at = 0; at < data.length; at += 65536) c.update(data.subarray(at, at + 65536));
        c.final();
        faults.push(process.resourceUsage().minorPageFault - f0);
      }
      process.stdout.write(JSON.stringify(faults));`;
    const r = spawnSync(process.execPath, ['-e', script], { env: dataPlaneProcessEnv(process.env), encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    const faults = JSON.parse(r.stdout) as number[];
    const settled = faults.slice(-5).reduce((a, b) => a + b, 0);
    expect(settled, `faults per round: ${faults.join(' ')}`).toBeLessThan(4096);
  });
});
