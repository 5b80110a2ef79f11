import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildDashboard, sourceHash, WEB_DIR } from '../src/build.js';

describe('dashboard build', () => {
  it('bundles the page offline (no external URLs), caches it, and rebuilds when a source changes', async () => {
    const web = mkdtempSync(join(os.tmpdir(), 'orchard-dash-web-'));
    cpSync(WEB_DIR, web, { recursive: true });
    const cacheDir = mkdtempSync(join(os.tmpdir(), 'orchard-dash-cache-'));
    const first = await buildDashboard({ webDir: web, cacheDir });
    expect(first.built).toBe(true);
    expect([...first.assets.keys()].sort()).toEqual(['/', '/dashboard/app.css', '/dashboard/app.js']);
    const js = first.assets.get('/dashboard/app.js')!.body.toString();
    const html = first.assets.get('/')!.body.toString();
    expect(js.length).toBeGreaterThan(5000);
    expect(js.length).toBeLessThan(200_000); // small bundle: Preact + our code
    // Nothing fetched from a CDN at run time: only same-origin paths.
    expect(html).not.toMatch(/https?:\/\//);
    expect(js).not.toMatch(/(src|href)=["']https?:/);
    expect(js).not.toMatch(/import\s*\(?["']https?:/);
    expect(html).toContain('/dashboard/app.js');

    const again = await buildDashboard({ webDir: web, cacheDir });
    expect(again.built).toBe(false);
    expect(again.hash).toBe(first.hash);
    expect(again.assets.get('/dashboard/app.js')!.body.equals(first.assets.get('/dashboard/app.js')!.body)).toBe(true);

    const css = join(web, 'style.css');
    writeFileSync(css, readFileSync(css, 'utf8') + '\n.added-by-test { color: red; }\n');
    expect(sourceHash(web)).not.toBe(first.hash);
    const changed = await buildDashboard({ webDir: web, cacheDir });
    expect(changed.built).toBe(true);
    expect(changed.assets.get('/dashboard/app.css')!.body.toString()).toContain('.added-by-test');
  }, 60_000);

  it('serves from memory when the cache folder cannot be written', async () => {
    const blocker = join(mkdtempSync(join(os.tmpdir(), 'orchard-dash-ro-')), 'file');
    writeFileSync(blocker, 'not a folder');
    const r = await buildDashboard({ cacheDir: join(blocker, 'cache') });
    expect(r.built).toBe(true);
    expect(r.assets.get('/dashboard/app.js')!.body.length).toBeGreaterThan(5000);
  }, 60_000);

  // esbuild strips types without checking them, and the workspace's typecheck has no DOM lib: check web/ here.
  it('the page sources type-check against the DOM', () => {
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    const out = (() => {
      try {
        return execFileSync(process.execPath, [tsc, '-p', join(WEB_DIR, 'tsconfig.json'), '--noEmit'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      } catch (err) {
        return String((err as { stdout?: string }).stdout ?? err);
      }
    })();
    expect(out).toBe('');
  }, 120_000);
});
