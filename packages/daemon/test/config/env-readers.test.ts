/**
 * Settings come from one place: `src/config/` reads the environment and hands the values on
 * (options.ts for the daemon, cli.ts for the client commands, hub.ts, terminal.ts). Outside it, only
 * code that hands the environment to a child process may touch `process.env`. The source is parsed
 * (TypeScript's own parser), so a mention in a comment or a string does not count and
 * `process['env']` or `const { env } = process` does.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

/** Files outside config/ that may touch process.env, each because it passes it to a child. */
const HAND_OFFS: Record<string, string> = {
  'runner/runner-process.ts': 'spawns the runner process with the environment',
  'backend/select.ts': 'runs the WebGPU adapter probe in a child with the environment',
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Lines (1-based) where `text` touches process.env. */
function envReads(text: string, fileName = 'x.ts'): number[] {
  const file = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const lines: number[] = [];
  const isProcess = (n: ts.Node) => ts.isIdentifier(n) && n.text === 'process';
  const visit = (n: ts.Node): void => {
    const hit =
      (ts.isPropertyAccessExpression(n) && isProcess(n.expression) && n.name.text === 'env') ||
      (ts.isElementAccessExpression(n) && isProcess(n.expression) && ts.isStringLiteralLike(n.argumentExpression) && n.argumentExpression.text === 'env') ||
      (ts.isVariableDeclaration(n) && n.initializer !== undefined && isProcess(n.initializer) && ts.isObjectBindingPattern(n.name) && n.name.elements.some((el) => ((el.propertyName ?? el.name) as ts.Identifier).text === 'env'));
    if (hit) lines.push(file.getLineAndCharacterOfPosition(n.getStart(file)).line + 1);
    ts.forEachChild(n, visit);
  };
  visit(file);
  return lines;
}

describe('who reads the environment', () => {
  const files = sourceFiles(SRC).map((path) => ({ rel: relative(SRC, path).split('\\').join('/'), reads: envReads(readFileSync(path, 'utf8'), path) }));

  it('finds every form of a read, and none in comments or strings', () => {
    expect(envReads('const a = process.env.X;\nconst b = process["env"];\nconst { env } = process;')).toEqual([1, 2, 3]);
    expect(envReads('// process.env.X\nconst s = "process.env.Y";\nconst o = other.env;')).toEqual([]);
    // The scan sees the tree: config/ reads the environment.
    expect(files.find((f) => f.rel === 'config/options.ts')?.reads.length).toBeGreaterThan(0);
  });

  it('only config/ and the child-process hand-offs touch process.env', () => {
    const outside = files.filter((f) => f.reads.length > 0 && !f.rel.startsWith('config/') && !(f.rel in HAND_OFFS));
    expect(outside.map((f) => `src/${f.rel}:${f.reads.join(',')}`), 'read the setting in src/config/ and hand the value to what needs it').toEqual([]);
  });

  it('each hand-off listed still passes the environment on (no stale allowance)', () => {
    for (const rel of Object.keys(HAND_OFFS)) expect(files.find((f) => f.rel === rel)?.reads.length, rel).toBeGreaterThan(0);
  });
});
