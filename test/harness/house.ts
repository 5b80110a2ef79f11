/**
 * A package drawn as a house: every source file a room, every relative import an arrow (TypeScript's
 * own pre-processor reads them, so type imports, re-exports and dynamic imports all count), floors
 * given as path prefixes. The engine's and the daemon's house tests (packages/{engine,daemon}/test/
 * house.test.ts) hold their floors and exceptions; the drawing is here, once.
 */
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import ts from 'typescript';

/** Floors, lowest first: a name and the path prefixes (under src/) of the files standing on it. */
export type Floors = readonly (readonly [string, readonly string[]])[];

function sources(src: string, dir = src): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sources(src, p);
    return e.name.endsWith('.ts') ? [relative(src, p)] : [];
  });
}

/** Each .ts file under `src` (relative path) with the files it imports. `.mjs` scripts run in child processes and are no part of the plan. */
export function importGraph(src: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sources(src)) {
    const info = ts.preProcessFile(readFileSync(join(src, file), 'utf8'), true, true);
    const targets = info.importedFiles
      .map((f) => f.fileName)
      .filter((f) => f.startsWith('.') && !f.endsWith('.mjs'))
      .map((f) => {
        const target = relative(src, join(src, dirname(file), f.replace(/\.js$/, '.ts')));
        if (existsSync(join(src, target))) return target;
        const index = relative(src, join(src, dirname(file), f, 'index.ts'));
        if (existsSync(join(src, index))) return index;
        throw new Error(`${file}: import ${f} resolves to no source file`);
      });
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** The floor a file stands on: the one with the longest prefix of its path. */
export function floorOf(floors: Floors, file: string): number {
  let best = -1;
  let bestLen = -1;
  floors.forEach(([, prefixes], i) => {
    for (const p of prefixes) if (file.startsWith(p) && p.length > bestLen) [best, bestLen] = [i, p.length];
  });
  if (best < 0) throw new Error(`${file} stands on no floor: add it to FLOORS in its package's test/house.test.ts`);
  return best;
}

/** Every arrow from a lower floor to a higher one, as `from -> to`, sorted. */
export function upwardArrows(graph: Map<string, string[]>, floors: Floors): string[] {
  const upward: string[] = [];
  for (const [from, targets] of graph) {
    for (const to of targets) if (floorOf(floors, to) > floorOf(floors, from)) upward.push(`${from} -> ${to}`);
  }
  return upward.sort();
}

/** Strongly connected components with more than one file (Tarjan), each as its sorted files joined by spaces. */
export function circles(graph: Map<string, string[]>): string[] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1) found.push(scc.sort().join(' '));
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found.sort();
}
