/** Importing the engine never loads Dawn; with no Vulkan driver on Linux even a GPU probe does not. */
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const exec = promisify(execFile);
const root = resolve(import.meta.dirname, '../../../..');

describe('Dawn is loaded only when a GPU context is asked for', () => {
  it.runIf(process.platform === 'linux')('import costs nothing; no driver means no Dawn at all', async () => {
    const env = { ...process.env, VK_ICD_FILENAMES: '/nonexistent/orchard-icd.json' };
    const r = await exec(join(root, 'node_modules/.bin/tsx'), [join(import.meta.dirname, 'dawn-loaded.ts')], { cwd: root, env, timeout: 60_000 });
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out).toMatchObject({ afterImport: false, afterProbe: false });
    expect(out.reason).toMatch(/no Vulkan driver/);
    expect(r.stderr).toBe('');
  });
});
