/**
 * Where a GPU prompt batch spends its time, per kernel kind: the bench:gpu model's prefill program
 * (one GGUF, `--prompt` tokens) is run once, then each kind of dispatch (q_proj (matmul), attention,
 * ...) is recorded alone — all layers' dispatches of that kind in one submission, with the batch's Step
 * uniform left as the real prefill wrote it — and timed to completion; the whole program is timed the
 * same way, wall and CPU time (shares are of the CPU times' sum; each submission also pays one round trip, shown).
 *
 *   pnpm exec tsx packages/engine/bench/gpu-prefill-profile.ts [--dtype f16] [--prompt 64] [--reps 1]
 *
 * Uses Mesa's lavapipe when no hardware adapter exists (its numbers are a CPU driver's: a proxy only).
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadModelConfig } from '../src/format/model-files.js';
import { Readback, createStorage } from '../src/kernels/gpu/buffers.js';
import { openBenchGpu } from './gpu-lines.js';
import { describeAdapter } from '../src/kernels/gpu/context.js';
import { recordPass, type Dispatch } from '../src/kernels/gpu/ops.js';
import { GpuShard } from '../src/kernels/gpu/shard.js';
import { loadShard } from '../src/model/forward.js';
import { benchPrompt } from './llama-cpp.js';
import { DTYPES, generatedModel, type Dtype } from './models.js';
import { GPU_BENCH_MODEL } from './gpu.js';

const { values } = parseArgs({ options: { dtype: { type: 'string', default: 'f16' }, prompt: { type: 'string', default: '64' }, reps: { type: 'string', default: '1' } } });
const dtype = values.dtype as Dtype;
if (!DTYPES.includes(dtype)) throw new Error(`--dtype: one of ${DTYPES.join(', ')}`);
const n = Number(values.prompt);
const reps = Number(values.reps);

if (process.platform === 'linux') {
  const icd = '/usr/share/vulkan/icd.d/lvp_icd.json';
  if (!process.env.VK_ICD_FILENAMES && existsSync(icd)) process.env.VK_ICD_FILENAMES = icd;
  if (!process.env.XDG_RUNTIME_DIR) process.env.XDG_RUNTIME_DIR = mkdtempSync(join(tmpdir(), 'orchard-xdg-'));
}

async function main(): Promise<void> {
  const { ctx, reason } = await openBenchGpu(true);
  if (!ctx) throw new Error(`no adapter: ${reason}`);
  const model = generatedModel(GPU_BENCH_MODEL, (l) => console.error(l), [dtype]);
  const gguf = model.ggufs[dtype];
  const config = loadModelConfig(gguf);
  const spec = { layers: [0, config.numLayers] as [number, number], tensor: { rank: 0, size: 1 }, embed: true, head: true };
  const cpu = loadShard(gguf, spec, { config, maxBatch: 1, maxSeqLen: 1 });
  const shard = await GpuShard.create(ctx, { config, spec, slice: cpu.slice, weights: cpu.weights, maxBatch: n, maxSeqLen: n + 8 });
  const cache = await shard.newCache(n + 8);
  const prompt = benchPrompt(n, config.vocabSize);
  const t0 = performance.now();
  await shard.forward({ tokens: prompt }, cache); // warm-up: compiles the batch pipelines
  console.error(`warm-up prefill ${(performance.now() - t0).toFixed(0)} ms`);
  const c2 = await shard.newCache(n + 8);
  const s = performance.now();
  await shard.forward({ tokens: prompt }, c2);
  const prefillMs = performance.now() - s;
  const dispatchCount = shard.lastCall.dispatches;
  // The Step uniform now holds this prefill's (pos0 0, n tokens): the kinds below replay it.

  // The head's kinds (gather_rows, lm_head) replay n rows here where a prefill runs 1: an upper bound.
  const all = shard.dispatchesOf(c2).filter((d) => !d.when || d.when(n));
  const kinds = new Map<string, Dispatch[]>();
  for (const d of all) kinds.set(d.label, [...(kinds.get(d.label) ?? []), d]);
  const src = await createStorage(ctx, 16, 'tick');
  const tick = new Readback(ctx, 4, 'tick');
  // Wall time and this process's CPU time (lavapipe runs the kernels on this process's threads: on a
  // shared machine CPU time is the steadier figure; on a hardware GPU only wall time means anything).
  const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;
  const timeOf = async (ds: Dispatch[]): Promise<[number, number]> => {
    const t: number[] = [];
    const c: number[] = [];
    for (let r = 0; r < reps; r++) {
      const c0 = process.cpuUsage();
      const a = performance.now();
      const enc = ctx.device.createCommandEncoder();
      if (ds.length) recordPass(enc, ds, n);
      tick.encodeCopy(enc, src, 4);
      ctx.device.queue.submit([enc.finish()]);
      await tick.read(4);
      t.push(performance.now() - a);
      c.push(cpuMs(process.cpuUsage(c0)));
    }
    const mid = (v: number[]) => v.sort((x, y) => x - y)[v.length >> 1];
    return [mid(t), mid(c)];
  };
  const [empty, emptyCpu] = await timeOf([]);
  const [whole, wholeCpu] = await timeOf(all);
  const rows: [string, number, number, number][] = [];
  for (const [label, ds] of kinds) {
    const [w, c] = await timeOf(ds);
    rows.push([label, ds.length, w - empty, c - emptyCpu]);
  }
  const sum = rows.reduce((a, r) => a + r[3], 0);
  rows.sort((a, b) => b[3] - a[3]);
  console.log(`adapter ${describeAdapter(ctx.adapter)}; ${dtype}, ${n} prompt tokens; load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  console.log(`prefill through forward(): ${prefillMs.toFixed(1)} ms (${((n * 1000) / prefillMs).toFixed(1)} tok/s), ${dispatchCount} dispatches`);
  console.log(`program replayed in one submission: ${whole.toFixed(1)} ms wall, ${wholeCpu.toFixed(0)} ms CPU; empty submission + readback ${empty.toFixed(2)} ms`);
  console.log(`  ${'kind'.padEnd(28)} ${'count'.padStart(5)} ${'wall ms'.padStart(9)} ${'CPU ms'.padStart(9)} ${'CPU %'.padStart(6)} ${'CPU µs each'.padStart(12)}`);
  for (const [label, count, ms, cms] of rows) console.log(`  ${label.padEnd(28)} ${String(count).padStart(5)} ${ms.toFixed(1).padStart(9)} ${cms.toFixed(0).padStart(9)} ${((cms / sum) * 100).toFixed(1).padStart(6)} ${((cms / count) * 1000).toFixed(0).padStart(12)}`);
  src.destroy();
  tick.destroy();
  cache.destroy();
  c2.destroy();
  shard.dispose();
  ctx.destroy();
}

main().catch((err) => {
  console.error(`gpu-prefill-profile: ${(err as Error).stack}`);
  process.exit(1);
});
