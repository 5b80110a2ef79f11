/**
 * The engine's house plan: its rooms stand on floors, and an import only ever points down (or
 * across one floor). Built from the sources with TypeScript's own pre-processor, so type imports,
 * re-exports and dynamic imports all count. A new circle or a new upward arrow fails here; the few
 * that remain are listed below, each with its reason.
 */
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const SRC = join(dirname(fileURLToPath(import.meta.url)), '../src');

/**
 * Floors, lowest first. A file belongs to the floor of the longest prefix that matches its path
 * under src/. Where a room's files stand on different floors (gguf/, kernels/, format/), the
 * prefixes say which.
 */
const FLOORS: readonly (readonly [string, readonly string[]])[] = [
  // Numbers, errors and the plain shapes everything else speaks in.
  ['numeric', ['numeric/', 'errors.ts', 'shard.ts', 'open-model-file.ts', 'kernels/backend.ts', 'kernels/wasm/formats.ts']],
  // Container files: safetensors and GGUF bytes in and out, no model knowledge.
  ['readers', ['safetensors/', 'gguf/read.ts', 'gguf/read-split.ts', 'gguf/write.ts', 'gguf/write-split.ts', 'gguf/pre-tokenizers.ts']],
  ['tokenizer', ['tokenizer/']],
  ['config', ['config/']],
  // GGUF metadata read as a ModelConfig and a tokenizer.
  ['gguf-read', ['gguf/read-model.ts', 'gguf/read-moe.ts', 'gguf/read-tokenizer.ts']],
  ['quant', ['quant/']],
  // CPU kernels and the reference backend (dequantizing through quant/).
  ['kernels', ['kernels/reference.ts', 'kernels/wasm/']],
  // Fixtures that write real-format checkpoints for tests and benches.
  ['testing', ['testing/']],
  // HF -> GGUF export: quantizes through quant/ and kernels/wasm.
  ['gguf-convert', ['gguf/convert', 'gguf/index.ts']],
  // Choosing a model's file format and tokenizer; the model loads through it.
  ['format', ['format/']],
  ['model', ['model/']],
  // Describing a model is running its weights plan (model/weights.ts) without reading, so
  // format/describe.ts stands above model/, unlike the rest of format/.
  ['describe', ['format/describe.ts']],
  ['layout', ['layout.ts']],
  ['drivers', ['drivers/']],
  // The WebGPU backend runs whole models (drivers, model plans), so it stands above them.
  ['gpu', ['kernels/gpu/']],
  ['generate', ['generate/']],
  ['index', ['index.ts']],
];

/** Upward arrows that remain, each with its reason. */
const UPWARD_EXCEPTIONS: Record<string, string> = {};

/** Circles that remain (as their sorted files), each with its reason. */
const CIRCLE_EXCEPTIONS: Record<string, string> = {};

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return e.name.endsWith('.ts') ? [relative(SRC, p)] : [];
  });
}

function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sources(SRC)) {
    const info = ts.preProcessFile(readFileSync(join(SRC, file), 'utf8'), true, true);
    const targets = info.importedFiles
      .map((f) => f.fileName)
      .filter((f) => f.startsWith('.'))
      .map((f) => {
        const target = relative(SRC, join(SRC, dirname(file), f.replace(/\.js$/, '.ts')));
        if (existsSync(join(SRC, target))) return target;
        const index = relative(SRC, join(SRC, dirname(file), f, 'index.ts'));
        if (existsSync(join(SRC, index))) return index;
        throw new Error(`${file}: import ${f} resolves to no source file`);
      });
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

function floorOf(file: string): number {
  let best = -1;
  let bestLen = -1;
  FLOORS.forEach(([, prefixes], i) => {
    for (const p of prefixes) if (file.startsWith(p) && p.length > bestLen) [best, bestLen] = [i, p.length];
  });
  if (best < 0) throw new Error(`${file} stands on no floor: add it to FLOORS in test/house.test.ts`);
  return best;
}

/** Strongly connected components with more than one file (Tarjan). */
function circles(graph: Map<string, string[]>): string[] {
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

describe('engine house plan', () => {
  const graph = importGraph();

  it('reads the real import graph', () => {
    expect(graph.get('index.ts')?.length).toBeGreaterThan(10);
    expect(graph.get('quant/fp8.ts')).toContain('quant/read-scratch.ts');
  });

  it('has no import circles beyond the listed ones', () => {
    expect(circles(graph)).toEqual(Object.keys(CIRCLE_EXCEPTIONS).sort());
  });

  it('has no arrow from a lower floor to a higher one beyond the listed ones', () => {
    const upward: string[] = [];
    for (const [from, targets] of graph) {
      for (const to of targets) {
        if (floorOf(to) > floorOf(from)) upward.push(`${from} -> ${to}`);
      }
    }
    expect(upward.sort()).toEqual(Object.keys(UPWARD_EXCEPTIONS).sort());
  });

  it('keeps quant/ and kernels/ free of model/', () => {
    const offending = [...graph].flatMap(([from, targets]) =>
      /^(quant|kernels\/wasm|kernels\/reference)/.test(from) ? targets.filter((t) => t.startsWith('model/')).map((t) => `${from} -> ${t}`) : [],
    );
    expect(offending).toEqual([]);
  });
});
