/**
 * Loads @mlc-ai/web-xgrammar (xgrammar compiled to WebAssembly: JSON schema and EBNF grammars, token
 * masks over a vocabulary).
 *
 * Why not a plain import: the package ships a UMD bundle in a `"type": "module"` package, and its
 * Emscripten loader reads `require` and `__filename` as free variables and calls `import('module')`,
 * none of which works from an ES module (or inside vitest). The bundle is evaluated here as the
 * CommonJS script it is, with those given, and its error printer routed to us: xgrammar reports a bad
 * schema or grammar by printing "[FATAL] ..." and aborting the WebAssembly instance, which is then
 * dead — so the caller keeps the printed reason and loads a fresh instance.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type * as Xgrammar from '@mlc-ai/web-xgrammar';

export type XgrammarModule = typeof Xgrammar;

export interface XgrammarInstance {
  xg: XgrammarModule;
  /** Lines the instance printed as errors since the last call, cleared by reading. */
  takeErrors(): string[];
}

/** The two places the bundle reaches for Node by itself; each must occur exactly once. */
const PATCHES: [string, string][] = [
  ["import('module')", "__orchardImport('module')"],
  ['console.error.bind(console)', '__orchardPrintErr'],
];

let source: string | null = null;

function bundle(): { code: string; file: string; require: NodeJS.Require } {
  const require = createRequire(import.meta.url);
  const file = require.resolve('@mlc-ai/web-xgrammar');
  if (source === null) {
    let code = readFileSync(file, 'utf8');
    for (const [from, to] of PATCHES) {
      const n = code.split(from).length - 1;
      if (n !== 1) throw new Error(`@mlc-ai/web-xgrammar at ${file}: expected one ${from} in the bundle, found ${n} (a different version than 0.1.27?)`);
      code = code.replace(from, to);
    }
    source = code;
  }
  return { code: source, file, require };
}

/** A fresh xgrammar instance (its own WebAssembly memory). */
export function loadXgrammar(): XgrammarInstance {
  const { code, file, require } = bundle();
  const errors: string[] = [];
  const module = { exports: {} as XgrammarModule };
  const params = ['exports', 'module', 'require', '__filename', '__dirname', '__orchardImport', '__orchardPrintErr'];
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- see the module comment
  new Function(...params, code)(module.exports, module, require, file, file, (id: string) => Promise.resolve(require(id)), (line: string) => errors.push(String(line)));
  return { xg: module.exports, takeErrors: () => errors.splice(0) };
}
