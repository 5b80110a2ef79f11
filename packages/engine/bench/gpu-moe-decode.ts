/**
 * Where a GPU decode token of the bench:gpu MoE model (bench/moe-quant-model.ts, `--size full`) spends
 * its time, and what a decode token costs in process CPU time. Per format: the model is loaded, a short
 * prompt run, then `--tokens` greedy decode tokens are timed (wall and process CPU time per token; on
 * lavapipe the kernels run on this process's threads, so CPU time is the steadier figure on a shared
 * machine); then each kind of dispatch of the decode program (all layers' dispatches of that label in
 * one submission, replayed with the last decode's Step uniform) is timed alone, best of `--reps`.
 *
 *   pnpm exec tsx packages/engine/bench/gpu-moe-decode.ts [--moe mlx4,fp8,int4] [--tokens 8] [--reps 5] [--kinds] [--tree DIR]
 *
 * `--tree DIR` loads GpuShard and the loaders from another checkout (e.g. /work/main) instead of this one,
 * so two trees can be alternated process by process with the same script. Lavapipe is a CPU: a proxy only.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { openBenchGpu } from './gpu-lines.js';
import { benchPrompt } from './llama-cpp.js';
import { moeQuantModel, type MoeQuantFormat } from './moe-quant-model.js';

const { values } = parseArgs({
  options: {
    moe: { type: 'string', default: 'mlx4,fp8,int4' },
    tokens: { type: 'string', default: '8' },
    reps: { type: 'string', default: '5' },
    prompt: { type: 'string', default: '8' },
    kinds: { type: 'boolean', default: false },
    tree: { type: 'string' },
  },
});
const positive = (v: string | undefined, name: string): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be an integer >= 1, got ${JSON.stringify(v)}`);
  return n;
};
const tokens = positive(values.tokens, 'tokens');
const reps = positive(values.reps, 'reps');
const promptTokens = positive(values.prompt, 'prompt');
const formats = values.moe!.split(',') as MoeQuantFormat[];

if (process.platform === 'linux') {
  const icd = '/usr/share/vulkan/icd.d/lvp_icd.json';
  if (!process.env.VK_ICD_FILENAMES && existsSync(icd)) process.env.VK_ICD_FILENAMES = icd;
  if (!process.env.XDG_RUNTIME_DIR) process.env.XDG_RUNTIME_DIR = mkdtempSync(join(tmpdir(), 'orchard-xdg-'));
}

/** A module of the tree under test (this checkout, or --tree's). */
async function treeModule<T>(rel: string): Promise<T> {
  const root = values.tree ? resolve(values.tree) : resolve(import.meta.dirname, '../../..');
  const file = join(root, 'packages/engine/src', rel);
  if (!existsSync(file)) throw new Error(`${file} does not exist`);
  return (await import(pathToFileURL(file).href)) as T;
}

const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;
const argmax = (v: Float32Array) => v.reduce((b, x, i) => (x > v[b] ? i : b), 0);

async function main(): Promise<void> {
  const { GpuShard } = await treeModule<typeof import('../src/kernels/gpu/shard.js')>('kernels/gpu/shard.ts');
  const { loadShard } = await treeModule<typeof import('../src/model/forward.js')>('model/forward.ts');
  const { loadModelConfig } = await treeModule<typeof import('../src/format/model-files.js')>('format/model-files.ts');
  const { recordPass } = await treeModule<typeof import('../src/kernels/gpu/ops.js')>('kernels/gpu/ops.ts');
  const { Readback, createStorage } = await treeModule<typeof import('../src/kernels/gpu/buffers.js')>('kernels/gpu/buffers.ts');
  const { ctx, reason } = await openBenchGpu(true);
  if (!ctx) throw new Error(`no adapter: ${reason}`);
  const model = moeQuantModel('full', formats, (l) => console.error(l));
  console.log(`tree ${values.tree ?? 'this'}; load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  for (const f of formats) {
    const dir = model.dirs[f]!;
    const config = loadModelConfig(dir);
    const spec = { layers: [0, config.numLayers] as [number, number], tensor: { rank: 0, size: 1 }, embed: true, head: true };
    const cpu = loadShard(dir, spec, { config, maxBatch: 1, maxSeqLen: 1 });
    const maxSeq = promptTokens + 2 * tokens + 8;
    const shard = await GpuShard.create(ctx, { config, spec, slice: cpu.slice, weights: cpu.weights, maxBatch: promptTokens, maxSeqLen: maxSeq });
    const prompt = benchPrompt(promptTokens, config.vocabSize);
    const decode = async () => {
      const cache = await shard.newCache(maxSeq);
      let t = argmax(await shard.forward({ tokens: prompt }, cache));
      const out: number[] = [];
      const c0 = process.cpuUsage();
      const w0 = performance.now();
      for (let i = 0; i < tokens; i++) {
        t = argmax(await shard.forward({ tokens: [t] }, cache));
        out.push(t);
      }
      const r = { wall: (performance.now() - w0) / tokens, cpu: cpuMs(process.cpuUsage(c0)) / tokens, out, cache };
      return r;
    };
    (await decode()).cache.destroy(); // compiles the pipelines
    const run = await decode();
    const dispatches = shard.lastCall.dispatches;
    console.log(
      `${f}: decode ${run.wall.toFixed(1)} ms wall, ${run.cpu.toFixed(1)} ms CPU per token (${dispatches} dispatches/token); tokens ${run.out.join(',')}; load ${loadavg()[0].toFixed(2)}`,
    );
    if (values.kinds) {
      // The Step uniform holds the last decode's (n = 1): each kind replays it.
      const all = shard.dispatchesOf(run.cache).filter((d) => !d.when || d.when(1, 1));
      const kinds = new Map<string, typeof all>();
      for (const d of all) kinds.set(d.label, [...(kinds.get(d.label) ?? []), d]);
      const src = await createStorage(ctx, 16, 'tick');
      const tick = new Readback(ctx, 4, 'tick');
      const timeOf = async (ds: typeof all): Promise<[number, number]> => {
        let best: [number, number] = [Infinity, Infinity];
        for (let r = 0; r < reps; r++) {
          const c0 = process.cpuUsage();
          const a = performance.now();
          const enc = ctx.device.createCommandEncoder();
          if (ds.length) recordPass(enc, ds, 1);
          tick.encodeCopy(enc, src, 4);
          ctx.device.queue.submit([enc.finish()]);
          await tick.read(4);
          best = [Math.min(best[0], performance.now() - a), Math.min(best[1], cpuMs(process.cpuUsage(c0)))];
        }
        return best;
      };
      const [empty, emptyCpu] = await timeOf([]);
      const [whole, wholeCpu] = await timeOf(all);
      const rows: [string, number, number, number][] = [];
      for (const [label, ds] of kinds) {
        const [w, c] = await timeOf(ds);
        rows.push([label, ds.length, w - empty, c - emptyCpu]);
      }
      const sum = rows.reduce((s, r) => s + r[3], 0);
      rows.sort((a, b) => b[3] - a[3]);
      console.log(`  program replayed: ${whole.toFixed(1)} ms wall, ${wholeCpu.toFixed(1)} ms CPU; empty submission ${empty.toFixed(2)} ms`);
      console.log(`  ${'kind'.padEnd(28)} ${'count'.padStart(5)} ${'wall ms'.padStart(9)} ${'CPU ms'.padStart(9)} ${'CPU %'.padStart(6)}`);
      for (const [label, count, ms, cms] of rows) console.log(`  ${label.padEnd(28)} ${String(count).padStart(5)} ${ms.toFixed(2).padStart(9)} ${cms.toFixed(1).padStart(9)} ${((cms / sum) * 100).toFixed(1).padStart(6)}`);
      src.destroy();
      tick.destroy();
    }
    run.cache.destroy();
    shard.dispose();
  }
  ctx.destroy();
}

main().catch((err) => {
  console.error(`gpu-moe-decode: ${(err as Error).stack}`);
  process.exit(1);
});
