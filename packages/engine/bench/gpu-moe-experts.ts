/**
 * The MoE decode experts' kernel forms compared on one device in one run, on layer 0 of the bench:gpu
 * MoE model (bench/moe-quant-model.ts `--size full`: 16 experts of 768x768, top-4; one token, 4 fixed
 * slots): gate+up as the per-slot chain (expertRowsShader for gate, then up, then the SiLU gate) against
 * the fused kernel (wgsl-moe-decode.ts expertGluShader) in its forms, and down + the weighted combine
 * against expertDownShader's forms. Rounds interleave the variants; each keeps its best wall and process
 * CPU time per dispatch group and the median over rounds of its CPU time against the first variant of
 * its kind in the same round (the ratio column), as bench/gpu-rowblock.ts does. Lavapipe is a CPU: a proxy.
 *   pnpm exec tsx packages/engine/bench/gpu-moe-experts.ts [--moe mlx4,fp8,int4] [--rounds 25] [--repeat 4]
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadModelConfig } from '../src/format/model-files.js';
import { Readback, createStorage, uploadF32 } from '../src/kernels/gpu/buffers.js';
import { allocateMoeActivations, decodeDown, decodeGlu, uploadMoeLayer, type GpuMoeLayer } from '../src/kernels/gpu/moe.js';
import { GpuKernels, StepUniform, layoutKey, recordPass, split, type Dispatch } from '../src/kernels/gpu/ops.js';
import { expertFactored8 } from '../src/kernels/gpu/quant-wgsl.js';
import { COMBINE, expertRowsShader } from '../src/kernels/gpu/wgsl-moe.js';
import { MATVEC_ROWS, WG } from '../src/kernels/gpu/wgsl.js';
import { loadShard } from '../src/model/forward.js';
import type { MoeWeights } from '../src/model/weights-moe.js';
import { openBenchGpu } from './gpu-lines.js';
import { moeQuantModel, type MoeQuantFormat } from './moe-quant-model.js';

const { values } = parseArgs({ options: { moe: { type: 'string', default: 'mlx4,fp8,int4' }, rounds: { type: 'string', default: '25' }, repeat: { type: 'string', default: '4' } } });
const rounds = Number(values.rounds);
const repeat = Number(values.repeat);
if (!Number.isInteger(rounds) || rounds < 2) throw new Error(`--rounds: ${values.rounds} is not an integer >= 2`);
if (!Number.isInteger(repeat) || repeat < 1) throw new Error(`--repeat: ${values.repeat} is not a positive integer`);
if (process.platform === 'linux') {
  const icd = '/usr/share/vulkan/icd.d/lvp_icd.json';
  if (!process.env.VK_ICD_FILENAMES && existsSync(icd)) process.env.VK_ICD_FILENAMES = icd;
  if (!process.env.XDG_RUNTIME_DIR) process.env.XDG_RUNTIME_DIR = mkdtempSync(join(tmpdir(), 'orchard-xdg-'));
}
const SLOTS = [3, 7, 11, 14];
const WEIGHTS = [0.4, 0.3, 0.2, 0.1];

async function main(): Promise<void> {
  const { ctx, reason } = await openBenchGpu(true);
  if (!ctx) throw new Error(`no adapter: ${reason}`);
  const K = new GpuKernels(ctx);
  const st = new StepUniform(ctx);
  st.write(ctx, 0, 1);
  const tick = new Readback(ctx, 4, 'tick');
  const formats = values.moe!.split(',') as MoeQuantFormat[];
  const model = moeQuantModel('full', formats, (l) => console.error(l));
  console.log(`MoE decode expert forms, one token, best of ${rounds - 1}, ${repeat} passes per submission; ${K.matvec.lanes} lanes, subgroups ${K.matvec.subgroups}; load ${loadavg()[0].toFixed(2)}`);
  for (const f of formats) {
    const dir = model.dirs[f]!;
    const config = loadModelConfig(dir);
    const moe = config.moe!;
    const D = config.hiddenSize;
    const cpu = loadShard(dir, { layers: [0, 1], tensor: { rank: 0, size: 1 }, embed: false, head: false }, { config, maxBatch: 1, maxSeqLen: 1 });
    const L: GpuMoeLayer = await uploadMoeLayer(ctx, cpu.weights.layers[0].mlp as MoeWeights, 'bench moe');
    const act = await allocateMoeActivations(ctx, moe, D, 0, 1);
    ctx.device.queue.writeBuffer(act.ids, 0, Uint32Array.from(SLOTS));
    ctx.device.queue.writeBuffer(act.weights, 0, Float32Array.from(WEIGHTS));
    const x = await uploadF32(ctx, Float32Array.from({ length: D }, (_, i) => Math.sin(i * 0.37)), 'x');
    const out = await createStorage(ctx, D * 4, 'out');
    const k = moe.topK;
    const I = moe.expertIntermediate;
    // The per-slot chain these kernels replaced: expertRowsShader per projection, the SiLU gate, COMBINE.
    const rowsKernel = (s: GpuMoeLayer['gate'], input: GPUBuffer, output: GPUBuffer, perSlotX: boolean): Dispatch => {
      const p = K.pipeline(`bench_moe_rows_${s.weight.dtype}_${s.cols}_${layoutKey(K.matvec)}`, () => expertRowsShader(s.weight.dtype, s.cols, K.matvec));
      const part = s.parts[0];
      const params = K.params('p', [['u32', s.rows], ['u32', s.cols], ['u32', k], ['u32', part.e0], ['u32', part.e1], ['u32', perSlotX ? 1 : 0], ['u32', 0]]);
      return { label: 'rows', pipeline: p, bindGroup: K.bind('rows', p, [params, st.buffer, part.buffer, input, act.ids, output, K.dummy()]), grid: (n) => [Math.ceil(s.rows / MATVEC_ROWS), n * k, 1] };
    };
    const combine = K.pipeline('moe_combine', () => COMBINE);
    const combineParams = K.params('p', [['u32', D], ['u32', k], ['u32', L.e0], ['u32', L.e1], ['u32', 1]]);
    const variants: { name: string; kind: string; ds: Dispatch[] }[] = [
      { name: 'per-slot gate, up, silu gate', kind: 'glu', ds: [rowsKernel(L.gate, x, act.gate, false), rowsKernel(L.up, x, act.up, false), K.siluGate(act.gate, act.up, k * I, st)] },
      { name: 'fused, w8', kind: 'glu', ds: decodeGlu(K, L, moe, act, x, st, { factored: false, rows: 4 }) },
      { name: 'fused, w8, 8 rows', kind: 'glu', ds: decodeGlu(K, L, moe, act, x, st, { factored: false, rows: 8 }) },
      { name: 'per-slot down, combine', kind: 'down', ds: [rowsKernel(L.down, act.gate, act.y, true), { label: 'combine', pipeline: combine, bindGroup: K.bind('c', combine, [combineParams, st.buffer, out, act.y, act.ids, act.weights]), grid: (n) => split(Math.ceil((n * D) / WG)) }] },
      { name: 'fused, w8, 4 rows', kind: 'down', ds: decodeDown(K, L, moe, act, out, true, st, { factored: false, rows: 4 }) },
      { name: 'fused, w8, 8 rows', kind: 'down', ds: decodeDown(K, L, moe, act, out, true, st, { factored: false, rows: 8 }) },
    ];
    if (expertFactored8(L.gate.weight.dtype, D)) {
      variants.splice(2, 0, { name: 'fused, factored scale', kind: 'glu', ds: decodeGlu(K, L, moe, act, x, st, { factored: true, rows: 4 }) });
      variants.push({ name: 'fused, factored scale, 4 rows', kind: 'down', ds: decodeDown(K, L, moe, act, out, true, st, { factored: true, rows: 4 }) });
      variants.push({ name: 'fused, factored scale, 8 rows', kind: 'down', ds: decodeDown(K, L, moe, act, out, true, st, { factored: true, rows: 8 }) });
    }
    const best = new Map<string, [number, number]>();
    const ratios = new Map<string, number[]>();
    const key = (v: { name: string; kind: string }) => `${v.kind}: ${v.name}`;
    for (let r = 0; r < rounds; r++) {
      const cpuOf = new Map<string, number>();
      for (const v of variants) {
        const a = performance.now();
        const c = process.cpuUsage();
        const enc = ctx.device.createCommandEncoder();
        for (let i = 0; i < repeat; i++) recordPass(enc, v.ds, 1);
        tick.encodeCopy(enc, out, 4);
        ctx.device.queue.submit([enc.finish()]);
        await tick.read(4);
        const u = process.cpuUsage(c);
        const cpuMs = (u.user + u.system) / 1000 / repeat;
        cpuOf.set(key(v), cpuMs);
        // round 0 compiles the pipelines (llvmpipe compiles at first dispatch)
        if (r > 0) {
          const [w0, c0] = best.get(key(v)) ?? [Infinity, Infinity];
          best.set(key(v), [Math.min(w0, (performance.now() - a) / repeat), Math.min(c0, cpuMs)]);
        }
      }
      if (r === 0) continue;
      for (const v of variants) {
        const ref = key(variants.find((u) => u.kind === v.kind)!);
        ratios.set(key(v), [...(ratios.get(key(v)) ?? []), cpuOf.get(key(v))! / cpuOf.get(ref)!]);
      }
    }
    const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
    for (const v of variants) {
      const [w, c] = best.get(key(v))!;
      console.log(`  ${f.padEnd(5)} ${key(v).padEnd(40)} ${w.toFixed(2).padStart(7)} ms wall ${c.toFixed(2).padStart(7)} ms CPU ${median(ratios.get(key(v))!).toFixed(2).padStart(6)}x`);
    }
    L.uploads.destroy();
    for (const b of [x, out, ...Object.values(act)]) b.destroy();
  }
  console.log(`load ${loadavg()[0].toFixed(2)}`);
  tick.destroy();
  st.destroy();
  K.destroy();
  ctx.destroy();
}

main().catch((err) => {
  console.error(`gpu-moe-experts: ${(err as Error).stack}`);
  process.exit(1);
});
