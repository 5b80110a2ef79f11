/**
 * A backend dropped without dispose() must not leave its worker threads (and so its memory) alive.
 * Needs --expose-gc, hence a child process.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const backendUrl = new URL('../../src/kernels/wasm/backend.ts', import.meta.url).href;

const script = `
import { createWasmBackend } from ${JSON.stringify(backendUrl)};
let be = createWasmBackend({ threads: 2, initialBytes: 1 << 20 });
const sab = be.allocF32(1).buffer;             // keeps the memory, not the backend
const ctl = new Int32Array(sab, 64, 16);       // job descriptor; field 13 = stop
const before = Atomics.load(ctl, 13);
be = undefined;
for (let i = 0; i < 50 && Atomics.load(ctl, 13) === 0; i++) {
  globalThis.gc();
  await new Promise((r) => setTimeout(r, 20));
}
console.log(JSON.stringify({ before, after: Atomics.load(ctl, 13) }));
`;

describe('worker threads of an abandoned backend', () => {
  it('stop once the backend is garbage-collected', () => {
    const dir = mkdtempSync(join(tmpdir(), 'orchard-wasm-reaper-'));
    try {
      const file = join(dir, 'reap.mts');
      writeFileSync(file, script);
      const out = execFileSync(process.execPath, ['--expose-gc', '--import', 'tsx', file], {
        cwd: fileURLToPath(new URL('../../', import.meta.url)),
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(JSON.parse(out.trim().split('\n').pop()!)).toEqual({ before: 0, after: 1 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
