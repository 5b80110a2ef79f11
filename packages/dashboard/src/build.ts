/**
 * Bundles the dashboard (web/: Preact + TSX + CSS) with esbuild into three assets, cached on disk by
 * a hash of the sources and the tool versions, so a daemon builds it once per source change and a
 * fresh clone needs no separate build step. Nothing here runs at install time.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const WEB_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../web');
const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULT_CACHE = resolve(dirname(fileURLToPath(import.meta.url)), '../dist');
const require = createRequire(import.meta.url);

export interface DashboardAsset {
  body: Buffer;
  type: string;
}

export interface DashboardBuild {
  /** Keyed by URL path: "/", "/dashboard/app.js", "/dashboard/app.css". */
  assets: Map<string, DashboardAsset>;
  hash: string;
  /** Whether this call ran esbuild (false: read from the cache). */
  built: boolean;
}

const ASSETS = [
  { path: '/', file: 'index.html', type: 'text/html; charset=utf-8' },
  { path: '/dashboard/app.js', file: 'app.js', type: 'text/javascript; charset=utf-8' },
  { path: '/dashboard/app.css', file: 'app.css', type: 'text/css; charset=utf-8' },
] as const;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? sourceFiles(join(dir, e.name)) : /\.(tsx?|css|html)$/.test(e.name) ? [join(dir, e.name)] : []))
    .sort();
}

function versionOf(pkg: string): string {
  return (JSON.parse(readFileSync(require.resolve(`${pkg}/package.json`), 'utf8')) as { version: string }).version;
}

/** Hash of everything that decides the output. */
export function sourceHash(webDir = WEB_DIR): string {
  const h = createHash('sha256');
  h.update(`esbuild ${versionOf('esbuild')} preact ${versionOf('preact')}\0`);
  for (const f of sourceFiles(webDir)) h.update(f.slice(webDir.length)).update('\0').update(readFileSync(f)).update('\0');
  return h.digest('hex').slice(0, 16);
}

export async function buildDashboard(options: { cacheDir?: string; webDir?: string } = {}): Promise<DashboardBuild> {
  const webDir = options.webDir ?? WEB_DIR;
  const cacheDir = options.cacheDir ?? DEFAULT_CACHE;
  const hash = sourceHash(webDir);
  const dir = join(cacheDir, hash);
  const read = () => new Map(ASSETS.map((a) => [a.path, { body: readFileSync(join(dir, a.file)), type: a.type }]));
  if (ASSETS.every((a) => existsSync(join(dir, a.file)))) return { assets: read(), hash, built: false };

  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    entryPoints: { app: join(webDir, 'main.tsx'), 'app-style': join(webDir, 'style.css') },
    bundle: true,
    minify: true,
    format: 'esm',
    target: ['es2020', 'chrome100', 'safari15', 'firefox100'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    write: false,
    outdir: '/out',
    logLevel: 'silent',
    legalComments: 'none',
    // Preact comes from this package's dependencies, wherever the sources are.
    nodePaths: [join(PACKAGE_DIR, 'node_modules')],
  });
  const pick = (suffix: string) => {
    const f = result.outputFiles.find((o) => o.path.endsWith(suffix));
    if (!f) throw new Error(`dashboard build produced no ${suffix}`);
    return Buffer.from(f.contents);
  };
  const out = { 'index.html': readFileSync(join(webDir, 'index.html')), 'app.js': pick('/app.js'), 'app.css': pick('/app-style.css') };
  // Several daemons on one machine may build at once: write to a private folder, then rename it into place.
  // A read-only install still serves the page: the bundle is then kept in memory only.
  try {
    mkdirSync(cacheDir, { recursive: true });
    const tmp = join(cacheDir, `.tmp-${hash}-${process.pid}-${Date.now()}`);
    mkdirSync(tmp);
    for (const [name, body] of Object.entries(out)) writeFileSync(join(tmp, name), body);
    try {
      renameSync(tmp, dir);
    } catch {
      rmSync(tmp, { recursive: true, force: true }); // another process won the race: its files are the same
    }
  } catch {
    /* no cache this time */
  }
  return { assets: new Map(ASSETS.map((a) => [a.path, { body: out[a.file], type: a.type }])), hash, built: true };
}
