/**
 * GPU backend overhead and bandwidth, printed as a table: `pnpm exec tsx packages/engine/bench/gpu-overhead.ts`
 * (add `--software` to accept lavapipe/llvmpipe; with `--lavapipe` it also points Vulkan at Mesa's
 * lavapipe ICD itself). On a software adapter only the overhead lines mean anything: the kernels run on
 * the CPU. On a real GPU the bandwidth lines are the point; effective GB/s is weight bytes streamed per
 * second, against the copy-bandwidth baseline measured in the same run.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createReferenceBackend } from '../src/kernels/reference.js';
import { createInProcessAllReduce } from '../src/drivers/all-reduce.js';
import { loadShard } from '../src/model/forward.js';
import { writeRandomModel } from '../src/testing/random-model.js';
import { Readback, createStorage, uploadWeight } from '../src/kernels/gpu/buffers.js';
import { createGpuContext, describeAdapter, type GpuContext } from '../src/kernels/gpu/context.js';
import { GpuKernels, StepUniform, recordPass } from '../src/kernels/gpu/ops.js';
import { GpuShard } from '../src/kernels/gpu/shard.js';

const args = new Set(process.argv.slice(2));
if (args.has('--lavapipe') && process.platform === 'linux') {
  const icd = '/usr/share/vulkan/icd.d/lvp_icd.json';
  if (!process.env.VK_ICD_FILENAMES && existsSync(icd)) process.env.VK_ICD_FILENAMES = icd;
  if (!process.env.XDG_RUNTIME_DIR) process.env.XDG_RUNTIME_DIR = mkdtempSync(join(tmpdir(), 'orchard-xdg-'));
}
const quick = args.has('--quick');

/** Median seconds of `reps` runs of `fn` after one warm-up. */
async function time(reps: number, fn: () => Promise<void>): Promise<number> {
  await fn();
  const t: number[] = [];
  for (let i = 0; i < reps; i++) {
    const s = performance.now();
    await fn();
    t.push((performance.now() - s) / 1000);
  }
  t.sort((a, b) => a - b);
  return t[Math.floor(t.length / 2)];
}

const rows: [string, string][] = [];
const line = (what: string, value: string) => {
  rows.push([what, value]);
  console.log(`${what.padEnd(58)} ${value}`);
};
const us = (s: number) => `${(s * 1e6).toFixed(0)} µs`;
const gbs = (bytes: number, s: number) => `${(bytes / s / 1e9).toFixed(2)} GB/s`;

async function waitIdle(ctx: GpuContext, tick: Readback, src: GPUBuffer): Promise<void> {
  // A 4-byte map is the one completion signal every Dawn backend delivers promptly to Node.
  const enc = ctx.device.createCommandEncoder();
  tick.encodeCopy(enc, src, 4);
  ctx.device.queue.submit([enc.finish()]);
  await tick.read(4);
}

async function main(): Promise<void> {
  const ctx = await createGpuContext({ allowSoftware: args.has('--software') || args.has('--lavapipe') });
  console.log(`adapter: ${describeAdapter(ctx.adapter)}; maxStorageBufferBindingSize ${ctx.limits.maxStorageBufferBindingSize}, maxBufferSize ${ctx.limits.maxBufferSize}`);
  const dev = ctx.device;
  const small = await createStorage(ctx, 4096, 'small');
  const rb = new Readback(ctx, 4 << 20, 'bench readback');
  const tick = new Readback(ctx, 4, 'bench completion');

  // 1. Round trip: an empty submission plus a 4-byte readback (the floor of any token).
  line('submit + 4-byte readback round trip', us(await time(quick ? 10 : 50, () => waitIdle(ctx, tick, small))));

  // 2. Readback cost by size (copy into a mappable buffer, map, copy out).
  for (const bytes of [4 << 10, 256 << 10, 4 << 20]) {
    const src = await createStorage(ctx, bytes, 'src');
    const t = await time(quick ? 5 : 15, async () => {
      const enc = dev.createCommandEncoder();
      rb.encodeCopy(enc, src, bytes);
      dev.queue.submit([enc.finish()]);
      await rb.read(bytes);
    });
    line(`readback ${bytes >> 10} KiB`, `${us(t)} (${gbs(bytes, t)})`);
    src.destroy();
  }

  // 3. Copy bandwidth baseline: buffer-to-buffer on the device (read + write counted).
  const copyBytes = Math.min(64 << 20, ctx.limits.maxStorageBufferBindingSize);
  const a = await createStorage(ctx, copyBytes, 'copy a');
  const b = await createStorage(ctx, copyBytes, 'copy b');
  const copies = quick ? 2 : 8;
  const tCopy = await time(quick ? 2 : 4, async () => {
    const enc = dev.createCommandEncoder();
    for (let i = 0; i < copies; i++) enc.copyBufferToBuffer(i % 2 ? b : a, 0, i % 2 ? a : b, 0, copyBytes);
    dev.queue.submit([enc.finish()]);
    await waitIdle(ctx, tick, small);
  });
  const copyBw = (2 * copyBytes * copies) / tCopy;
  line(`copy bandwidth (${copyBytes >> 20} MiB x ${copies}, read+write)`, gbs(2 * copyBytes * copies, tCopy));
  a.destroy();
  b.destroy();

  // 4. Dispatch overhead: k tiny dispatches in one submission, per dispatch.
  const kernels = new GpuKernels(ctx);
  const step = new StepUniform(ctx);
  step.write(ctx, 0, 1);
  const g = await createStorage(ctx, 256, 'g');
  const u = await createStorage(ctx, 256, 'u');
  const tiny = kernels.siluGate(g, u, 64, step);
  const k = 200;
  const tOne = await time(quick ? 5 : 15, async () => {
    const enc = dev.createCommandEncoder();
    recordPass(enc, [tiny], 1);
    dev.queue.submit([enc.finish()]);
    await waitIdle(ctx, tick, small);
  });
  const tMany = await time(quick ? 3 : 9, async () => {
    const enc = dev.createCommandEncoder();
    recordPass(enc, new Array(k).fill(tiny), 1);
    dev.queue.submit([enc.finish()]);
    await waitIdle(ctx, tick, small);
  });
  line(`per dispatch inside one submission (${k} tiny dispatches)`, us((tMany - tOne) / (k - 1)));

  // 5. Matvec weight streaming (decode-shaped), f16 and q8_0, against the copy baseline.
  const [R, C] = quick ? [1024, 1024] : [2048, 2048];
  for (const dtype of ['f16', 'q8_0'] as const) {
    const bytesPerRow = dtype === 'f16' ? C * 2 : (C / 32) * 34;
    const w = await uploadWeight(ctx, { dtype, rows: R, cols: C, bytes: new Uint8Array(R * bytesPerRow) }, `bench ${dtype}`);
    const x = await createStorage(ctx, C * 4, 'x');
    const out = await createStorage(ctx, R * 4, 'out');
    const d = kernels.linear('bench', w, x, out, step, { only: 'matvec' });
    const reps = 10;
    const t = await time(quick ? 2 : 4, async () => {
      const enc = dev.createCommandEncoder();
      for (let i = 0; i < reps; i++) recordPass(enc, d, 1);
      dev.queue.submit([enc.finish()]);
      await waitIdle(ctx, tick, small);
    });
    const bw = (w.bytes * reps) / t;
    line(`matvec ${dtype} [${R}x${C}] weight streaming`, `${gbs(w.bytes * reps, t)} (${((bw / copyBw) * 100).toFixed(0)}% of copy)`);
    w.destroy();
    x.destroy();
    out.destroy();
  }

  // 6. Whole-model decode: a random Llama model, GPU (token picked on the GPU) vs the CPU reference backend.
  const dir = mkdtempSync(join(tmpdir(), 'orchard-gpu-bench-'));
  try {
    const layers = quick ? 2 : 4;
    writeRandomModel(dir, { hiddenSize: 256, intermediateSize: 688, numLayers: layers, numHeads: 8, numKvHeads: 4, dtype: 'f16', seed: 1 });
    const spec = { layers: [0, layers] as [number, number], tensor: { rank: 0, size: 1 }, embed: true, head: true };
    const cpu = loadShard(dir, spec, { backend: createReferenceBackend(), maxBatch: 16, maxSeqLen: 256 });
    const gshard = await GpuShard.create(ctx, { config: cpu.config, spec, slice: cpu.slice, weights: cpu.weights, maxBatch: 16, maxSeqLen: 256 });
    const tokens = quick ? 16 : 48;
    const cache = await gshard.newCache(256);
    let t = await gshard.forwardSample([1, 2, 3, 4], cache);
    const s = performance.now();
    for (let i = 0; i < tokens; i++) t = await gshard.forwardSample([t], cache);
    const gpuTokS = tokens / ((performance.now() - s) / 1000);
    const cc = cpu.newCache(256);
    await cpu.forward({ tokens: [1, 2, 3, 4] }, cc);
    const s2 = performance.now();
    for (let i = 0; i < tokens; i++) await cpu.forward({ tokens: [i + 5] }, cc);
    const cpuTokS = tokens / ((performance.now() - s2) / 1000);
    const perToken = gshard.weightBytes;
    line(`decode, random llama ${layers}L d256 f16: GPU (${gshard.lastCall.submissions} submission, ${gshard.lastCall.readbackBytes} B back)`, `${gpuTokS.toFixed(1)} tok/s (${gbs(perToken * gpuTokS, 1)} weights)`);
    line(`decode, same model: CPU reference backend, 1 thread`, `${cpuTokS.toFixed(1)} tok/s (GPU/CPU ${(gpuTokS / cpuTokS).toFixed(2)}x)`);
    gshard.dispose();

    // Tensor split across 2 in-process ranks: every all-reduce ends a submission and reads back n·hidden floats.
    const reduces = createInProcessAllReduce(2);
    const ranks = await Promise.all(
      [0, 1].map(async (rank) => {
        const rspec = { ...spec, tensor: { rank, size: 2 } };
        const c = loadShard(dir, rspec, { allReduce: reduces[rank], maxBatch: 1, maxSeqLen: 1 });
        return GpuShard.create(ctx, { config: c.config, spec: rspec, slice: c.slice, weights: c.weights, allReduce: reduces[rank], maxBatch: 16, maxSeqLen: 256 });
      }),
    );
    const rcaches = await Promise.all(ranks.map((r) => r.newCache(256)));
    // Rank 0 embeds and both ranks take its rows, as the runners do.
    const step = async (ids: number[]) => {
      const rows = await ranks[0].embed(ids);
      await Promise.all(ranks.map((r, j) => r.forward({ hidden: rows, n: ids.length }, rcaches[j])));
    };
    await step([1, 2, 3, 4]);
    const s3 = performance.now();
    for (let i = 0; i < tokens; i++) await step([i + 5]);
    const tpTokS = tokens / ((performance.now() - s3) / 1000);
    const lc = ranks[0].lastCall;
    line(`decode, same model, tensor split 2 ranks in-process (${lc.submissions} submissions, ${lc.readbackBytes} B back/rank)`, `${tpTokS.toFixed(1)} tok/s`);
    ranks.forEach((r) => r.dispose());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  kernels.destroy();
  step.destroy();
  rb.destroy();
  tick.destroy();
  ctx.destroy();
  if (ctx.adapter.software) console.log('software adapter: kernels ran on the CPU; only the overhead lines are meaningful.');
}

main().catch((err) => {
  console.error(`gpu bench: ${(err as Error).message}`);
  process.exitCode = 1;
});


