/**
 * Builds the installable Orchard: one npm tarball (`dist/orchard-VERSION.tgz`) that `npm i -g` installs
 * with no checkout and no pnpm, and beside it `orchard.rb`, the Homebrew formula for that tarball
 * (packaging/homebrew/orchard.rb filled in). Run by scripts/pack.sh.
 *
 * The TypeScript sources ship as they are and run through tsx (a dependency), as in the checkout; no
 * bundler rewrites them, so the relative paths the sources use (the daemon's ../../../../models, the
 * engine's wasm/, the dashboard's web/) keep working. Layout inside the tarball:
 *   packages/daemon/           bin/orchard.js (the `orchard` command) and src/, at the same depth as here
 *   models/                    the demo model and catalog.json
 *   node_modules/@orchard/*    engine, transport, partitioner, dashboard (bundled: npm ships them inside)
 * Every outside dependency is a dependency of the tarball's root at the exact version installed here.
 * The dashboard's assets are built now (its dist/ cache), so an installed copy never writes into its
 * own folder; the RDMA addon is built by the root's postinstall where a compiler is (never failing).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = resolve(process.argv[2] ?? join(ROOT, 'dist'));

interface Manifest {
  name: string;
  version: string;
  type?: string;
  exports?: Record<string, string>;
  dependencies?: Record<string, string>;
  bin?: Record<string, string>;
}

const read = (file: string): Manifest => JSON.parse(readFileSync(file, 'utf8')) as Manifest;

/** The bundled workspace packages: what of each is copied besides package.json (bench/: `orchard bench`). */
const BUNDLED: Record<string, { dir: string; copy: string[] }> = {
  '@orchard/engine': { dir: 'packages/engine', copy: ['src', 'bench', 'wasm/kernels.wasm', 'wasm/kernels-relaxed.wasm', 'README.md'] },
  '@orchard/transport': { dir: 'packages/transport', copy: ['src', 'bench', 'native/binding.gyp', 'native/src', 'native/install.mjs', 'README.md'] },
  '@orchard/partitioner': { dir: 'packages/partitioner', copy: ['src', 'README.md'] },
  '@orchard/dashboard': { dir: 'packages/dashboard', copy: ['src', 'web', 'dist', 'README.md'] },
};
const DAEMON = 'packages/daemon';

/** The version of `dep` that `fromDir`'s package resolves to in this install. */
function installedVersion(dep: string, fromDir: string): string {
  const require = createRequire(join(ROOT, fromDir, 'package.json'));
  let dir = dirname(require.resolve(dep, { paths: [join(ROOT, fromDir)] }));
  // Walk up from the resolved entry to the dependency's own package.json.
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file) && read(file).name === dep) return read(file).version;
    const up = dirname(dir);
    if (up === dir) throw new Error(`pack: cannot find ${dep}'s package.json from ${fromDir}`);
    dir = up;
  }
}

/** A package's name → version from package.json, for packages whose main entry cannot be resolved (types only, exports without "."). */
function versionOf(dep: string, fromDir: string): string {
  const direct = join(ROOT, fromDir, 'node_modules', dep, 'package.json');
  if (existsSync(direct)) return read(direct).version;
  return installedVersion(dep, fromDir);
}

function copy(from: string, to: string): void {
  if (!existsSync(from)) throw new Error(`pack: ${from} is missing (run pnpm install first)`);
  mkdirSync(dirname(to), { recursive: true });
  cpSync(from, to, { recursive: true, dereference: true });
}

const daemon = read(join(ROOT, DAEMON, 'package.json'));
const version = daemon.version;
const stage = join(mkdtempSync(join(os.tmpdir(), 'orchard-pack-')), 'package');
const dependencies: Record<string, string> = {};
const addDeps = (m: Manifest, dir: string) => {
  for (const dep of Object.keys(m.dependencies ?? {})) {
    if (dep in BUNDLED) continue;
    const v = versionOf(dep, dir);
    if (dependencies[dep] && dependencies[dep] !== v) throw new Error(`pack: ${dep} is ${dependencies[dep]} in one package and ${v} in ${dir}`);
    dependencies[dep] = v;
  }
};

// The dashboard's assets, built into its dist/ cache now.
execFileSync(process.execPath, ['--import', 'tsx', join(ROOT, 'packages/dashboard/src/build-cli.ts')], { cwd: ROOT, stdio: 'inherit' });

// The daemon, at the depth its relative paths expect.
for (const part of ['bin', 'src', 'README.md']) copy(join(ROOT, DAEMON, part), join(stage, DAEMON, part));
writeFileSync(join(stage, DAEMON, 'package.json'), `${JSON.stringify({ name: daemon.name, version, private: true, type: 'module', bin: daemon.bin }, null, 2)}\n`);
addDeps(daemon, DAEMON);
for (const part of ['models/catalog.json', 'models/orchard-demo']) copy(join(ROOT, part), join(stage, part));

for (const [name, b] of Object.entries(BUNDLED)) {
  const m = read(join(ROOT, b.dir, 'package.json'));
  const target = join(stage, 'node_modules', name);
  for (const part of b.copy) copy(join(ROOT, b.dir, part), join(target, part));
  writeFileSync(join(target, 'package.json'), `${JSON.stringify({ name, version: m.version, type: 'module', exports: m.exports }, null, 2)}\n`);
  addDeps(m, b.dir);
  // npm packs a bundled package only when it is a dependency too; installing takes the bundled copy.
  dependencies[name] = m.version;
}
// What the RDMA addon's build needs (binding.gyp asks node-addon-api for its headers).
for (const dep of ['node-gyp', 'node-addon-api']) dependencies[dep] ??= versionOf(dep, BUNDLED['@orchard/transport']!.dir);
rmSync(join(stage, 'node_modules/@orchard/transport/native/build'), { recursive: true, force: true });

const root = {
  name: 'orchard',
  version,
  description: 'Turn the Macs and Linux boxes on a desk into one inference machine.',
  type: 'module',
  license: 'MIT',
  engines: { node: '>=20.11' },
  bin: { orchard: `${DAEMON}/bin/orchard.js` },
  files: ['packages', 'models'],
  scripts: { postinstall: 'node node_modules/@orchard/transport/native/install.mjs' },
  dependencies: Object.fromEntries(Object.entries(dependencies).sort(([a], [b]) => a.localeCompare(b))),
  bundleDependencies: Object.keys(BUNDLED),
};
writeFileSync(join(stage, 'package.json'), `${JSON.stringify(root, null, 2)}\n`);
writeFileSync(
  join(stage, 'README.md'),
  `# orchard ${version}\n\nThe Orchard daemon and CLI, packed by scripts/pack.sh from the Orchard repository.\n\n` +
    '```sh\nnpm install -g ./orchard-' + version + '.tgz\norchard start          # serves the bundled demo model on http://127.0.0.1:52415\norchard service install\n```\n',
);

mkdirSync(OUT, { recursive: true });
const packed = join(OUT, execFileSync('npm', ['pack', '--pack-destination', OUT, '--silent'], { cwd: stage, encoding: 'utf8' }).trim().split('\n').at(-1)!);
rmSync(dirname(stage), { recursive: true, force: true });

// The Homebrew formula for this very tarball (packaging/homebrew/orchard.rb with its URL and checksum).
const sha256 = createHash('sha256').update(readFileSync(packed)).digest('hex');
const formula = readFileSync(join(ROOT, 'packaging/homebrew/orchard.rb'), 'utf8').replace('url "@URL@"', `url "${pathToFileURL(packed).href}"`).replace('sha256 "@SHA256@"', `sha256 "${sha256}"`);
writeFileSync(join(OUT, 'orchard.rb'), formula);
console.log(packed);
