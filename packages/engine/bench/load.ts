/**
 * Load-time benchmark: loadShard of whole models on the WASM backend (1 thread), MB/s of the files
 * read, best of `reps`. Page cache warm after the first rep, so what it measures is the repacking and
 * conversion on the load path, not the disk.
 *   pnpm exec tsx packages/engine/bench/load.ts [--base <other checkout's packages/engine/src>] [--reps N] [model dir or gguf ...]
 * With --base, each rep loads the same model with that checkout's engine too (alternating, same
 * process and same load) and prints the ratio: a before/after comparison on one run.
 */
import { readdirSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  if (v === undefined) throw new Error(`${name} needs a value`);
  args.splice(i, 2);
  return v;
};
const base = flag('--base');
const reps = Number(flag('--reps') ?? 3);
if (!Number.isInteger(reps) || reps < 1) throw new Error(`--reps must be a positive integer`);

const moe = join(tmpdir(), 'orchard-bench-engine-moe-quant-v1');
const dense = join(tmpdir(), 'orchard-bench-engine-v1');
const defaults = [
  ...['mlx4', 'fp8', 'int4'].map((f) => join(moe, f)),
  ...['f16', 'q8_0', 'q4_0', 'q4_k', 'q4_k_m', 'q5_k_m'].map((f) => join(dense, `model-${f}.gguf`)),
  join(dense, 'mlx4'),
];
const models = args.length ? args : defaults;

interface Engine {
  label: string;
  load: (model: string) => () => void;
}

async function engine(label: string, src: string): Promise<Engine> {
  const { createWasmBackend } = await import(join(src, 'kernels/wasm/backend.ts'));
  const { loadModelConfig } = await import(join(src, 'format/model-files.ts'));
  const { loadShard } = await import(join(src, 'model/forward.ts'));
  return {
    label,
    load: (model: string) => {
      const L = loadModelConfig(model).numLayers;
      const backend = createWasmBackend({ threads: 1 });
      const shard = loadShard(model, { layers: [0, L], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend, maxSeqLen: 512 });
      return () => shard.dispose?.();
    },
  };
}

function bytesOf(model: string): number {
  const st = statSync(model);
  if (!st.isDirectory()) return st.size;
  return readdirSync(model)
    .filter((f) => f.endsWith('.safetensors'))
    .reduce((s, f) => s + statSync(join(model, f)).size, 0);
}

const engines = [await engine('this', resolve(import.meta.dirname, '../src'))];
if (base) engines.unshift(await engine('base', resolve(base)));

console.log(`load average ${loadavg().map((v) => v.toFixed(2)).join(' ')}; best of ${reps}, 1 thread`);
for (const model of models) {
  let mb: number;
  try {
    mb = bytesOf(model) / 1e6;
  } catch {
    console.log(`${model}: missing, skipped`);
    continue;
  }
  const best = engines.map(() => Infinity);
  for (let rep = 0; rep < reps; rep++) {
    engines.forEach((e, i) => {
      const t0 = performance.now();
      const dispose = e.load(model);
      best[i] = Math.min(best[i], (performance.now() - t0) / 1000);
      dispose();
      (globalThis as { gc?: () => void }).gc?.();
    });
  }
  const cells = engines.map((e, i) => `${e.label} ${best[i].toFixed(2)} s ${(mb / best[i]).toFixed(0)} MB/s`);
  const ratio = base ? `  x${(best[0] / best[1]).toFixed(2)}` : '';
  console.log(`${model.replace(tmpdir() + '/', '')}  ${mb.toFixed(0)} MB  ${cells.join('  |  ')}${ratio}`);
}
console.log(`load average ${loadavg().map((v) => v.toFixed(2)).join(' ')}`);
