/**
 * A GPU decode step of B sequences: one forward per sequence (what a GPU rank did before
 * GpuShard.forwardBatch) against one forwardBatch, with the kernels each sequence takes alone
 * (batchKernels 'sequence': the grouped row-block matvec, bit-exact) and with those the step's rows take
 * ('step': tiled matmul). Prints dispatches and submissions per step (lastCall), the median step's
 * wall time as a ratio to the one-by-one step measured in the same run, and how far each batched
 * form's logits are from the one-by-one ones.
 *
 *   pnpm exec tsx packages/engine/bench/gpu-batch-step.ts [--sequences 8] [--rounds 5] [--layers 6] [--hidden 512]
 *
 * Uses Mesa's lavapipe when no hardware adapter exists: a CPU driver, so the times say little about a GPU.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { openBenchGpu } from './gpu-lines.js';
import { describeAdapter } from '../src/kernels/gpu/context.js';
import { GpuShard, type GpuKVCache } from '../src/kernels/gpu/shard.js';
import { loadShard } from '../src/model/forward.js';
import { writeRandomModel } from '../src/testing/index.js';

const { values } = parseArgs({
  options: { sequences: { type: 'string', default: '8' }, rounds: { type: 'string', default: '5' }, layers: { type: 'string', default: '6' }, hidden: { type: 'string', default: '512' } },
});
const B = Number(values.sequences);
const rounds = Number(values.rounds);
const layers = Number(values.layers);
const hidden = Number(values.hidden);

if (process.platform === 'linux') {
  const icd = '/usr/share/vulkan/icd.d/lvp_icd.json';
  if (!process.env.VK_ICD_FILENAMES && existsSync(icd)) process.env.VK_ICD_FILENAMES = icd;
  if (!process.env.XDG_RUNTIME_DIR) process.env.XDG_RUNTIME_DIR = mkdtempSync(join(tmpdir(), 'orchard-xdg-'));
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Largest |a - b| over the logit scale of b. */
function logitError(a: Float32Array, b: Float32Array): number {
  let d = 0;
  let scale = 1;
  for (let i = 0; i < b.length; i++) {
    d = Math.max(d, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(b[i]));
  }
  return d / scale;
}

async function main(): Promise<void> {
  const { ctx, reason } = await openBenchGpu(true);
  if (!ctx) throw new Error(`no adapter: ${reason}`);
  const dir = mkdtempSync(join(tmpdir(), 'orchard-gpu-batch-step-'));
  try {
    writeRandomModel(dir, { hiddenSize: hidden, intermediateSize: Math.round((hidden * 8) / 3 / 64) * 64, numLayers: layers, numHeads: 8, numKvHeads: 4, dtype: 'f16', seed: 1 });
    const spec = { layers: [0, layers] as [number, number], tensor: { rank: 0, size: 1 }, embed: true, head: true };
    const cpu = loadShard(dir, spec, { maxBatch: 1, maxSeqLen: 1 });
    const make = (batchKernels: 'sequence' | 'step') => GpuShard.create(ctx, { config: cpu.config, spec, slice: cpu.slice, weights: cpu.weights, maxBatch: Math.max(16, B), maxSeqLen: 128, batchKernels });
    const exact = await make('sequence');
    const tiled = await make('step');
    const prompt = (s: number) => [1 + s, 2, 3, 4, 5, 6, 7, 8];
    const caches = async (shard: GpuShard): Promise<GpuKVCache[]> => {
      const cs: GpuKVCache[] = [];
      for (let s = 0; s < B; s++) {
        cs.push(await shard.newCache(128));
        await shard.forward({ tokens: prompt(s) }, cs[s]);
      }
      return cs;
    };
    const alone = await caches(exact);
    const batched = await caches(exact);
    const stepped = await caches(tiled);
    const token = (round: number, s: number) => (round * 31 + s * 7 + 3) % 200;

    const modes = {
      'one by one': { ms: [] as number[], dispatches: 0, submissions: 0, error: 0 },
      "forwardBatch, 'sequence' kernels": { ms: [] as number[], dispatches: 0, submissions: 0, error: 0 },
      "forwardBatch, 'step' kernels": { ms: [] as number[], dispatches: 0, submissions: 0, error: 0 },
    };
    const [one, seq, step] = Object.values(modes);
    // Round 0 warms the pipelines (compiled at first dispatch) and is not timed.
    for (let r = 0; r <= rounds; r++) {
      let t = performance.now();
      const ref: Float32Array[] = [];
      one.dispatches = one.submissions = 0;
      for (let s = 0; s < B; s++) {
        ref.push(Float32Array.from(await exact.forward({ tokens: [token(r, s)] }, alone[s])));
        one.dispatches += exact.lastCall.dispatches;
        one.submissions += exact.lastCall.submissions;
      }
      if (r > 0) one.ms.push(performance.now() - t);
      for (const [mode, shard, cs] of [[seq, exact, batched], [step, tiled, stepped]] as const) {
        t = performance.now();
        const outs = await shard.forwardBatch(cs.map((cache, s) => ({ input: { tokens: [token(r, s)] }, cache })));
        if (r > 0) mode.ms.push(performance.now() - t);
        mode.dispatches = shard.lastCall.dispatches;
        mode.submissions = shard.lastCall.submissions;
        outs.forEach((o, s) => (mode.error = Math.max(mode.error, logitError(o, ref[s]))));
      }
    }
    const base = median(one.ms);
    console.log(`adapter: ${describeAdapter(ctx.adapter)}; random llama f16, ${layers} layers, hidden ${hidden}, ${B} sequences, ${rounds} timed rounds; load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    for (const [name, m] of Object.entries(modes)) {
      const ms = median(m.ms);
      console.log(
        `${name.padEnd(34)} ${String(m.dispatches).padStart(5)} dispatches ${String(m.submissions).padStart(3)} submissions per step; median step ${ms.toFixed(1)} ms = ${(ms / base).toFixed(2)}x one by one; logits vs one by one: max error ${m.error.toExponential(2)} of the logit scale`,
      );
    }
    exact.dispose();
    tiled.dispose();
  } finally {
    ctx.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
