/**
 * Decode row-block matvec forms (wgsl.ts matvecFastShader) compared on one device in one run, at the
 * bench model's MLP and attention shapes: the fused gate+up with SwiGLU and the folded RMSNorm, the
 * same split back into rmsnorm + gate + up + SiLU gate (and the fused SwiGLU after a separate norm),
 * down_proj and o_proj. Rounds interleave the variants so a busy machine's noise hits each alike; each
 * keeps its best ms per dispatch (one token, wall and process CPU time) and the median over rounds of
 * its CPU time against the first variant of its kind in the same round (the ratio column). With `--base DIR` (a checkout of another tree, e.g. a
 * detached worktree of main) that tree's matvecFastShader is timed beside this one's, same buffers.
 * On lavapipe (a CPU driver) the numbers are only a proxy for a GPU.
 * With `--w8`, matvec8Shader's path (separate norm, gate, up, SiLU gate; the formats without a row-block decoder
 * took it) is timed first of each kind. With `--norm`, q_proj and the LM head with the folded RMSNorm at 4, 8
 * 16 and 32 rows per workgroup.
 *   pnpm exec tsx packages/engine/bench/gpu-rowblock.ts [--dtypes q4_0,q8_0,f16,q4_k] [--rounds 25] [--base /path/to/main] [--w8]
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { DType } from '../src/kernels/backend.js';
import { Readback, createStorage, rowBytes, uploadWeight, type GpuWeight } from '../src/kernels/gpu/buffers.js';
import { openBenchGpu } from './gpu-lines.js';
import { GpuKernels, MATVEC_MAX_BATCH, StepUniform, oneTokenForm, recordPass, type Dispatch } from '../src/kernels/gpu/ops.js';
import { MATVEC_ROWS, matvec8Shader, matvecFastShader, type MatvecLayout, type RowBlockOptions } from '../src/kernels/gpu/wgsl.js';

const { values } = parseArgs({
  options: { dtypes: { type: 'string', default: 'q4_0,q8_0' }, rounds: { type: 'string', default: '25' }, base: { type: 'string' }, repeat: { type: 'string', default: '4' }, only: { type: 'string' }, w8: { type: 'boolean', default: false }, norm: { type: 'boolean', default: false } },
});
if (process.platform === 'linux') {
  const icd = '/usr/share/vulkan/icd.d/lvp_icd.json';
  if (!process.env.VK_ICD_FILENAMES && existsSync(icd)) process.env.VK_ICD_FILENAMES = icd;
  if (!process.env.XDG_RUNTIME_DIR) process.env.XDG_RUNTIME_DIR = mkdtempSync(join(tmpdir(), 'orchard-xdg-'));
}
const HIDDEN = 1024;
const FFN = 3328;
const VOCAB = 8192;
const rounds = Number(values.rounds);
const repeat = Number(values.repeat);
if (!Number.isInteger(repeat) || repeat < 1) throw new Error(`--repeat: ${values.repeat} is not a positive integer`);
if (!Number.isInteger(rounds) || rounds < 2) throw new Error(`--rounds: ${values.rounds} is not an integer >= 2`);

/** Kernel forms of this tree timed beside the default one. */
const EXTRA: [string, RowBlockOptions][] = [
  ['4 rows', {}],
  ['halves', { halves: true }],
  ['8 rows', { rows: 8 }],
  ['8 rows, halves', { rows: 8, halves: true }],
  ['16 rows', { rows: 16 }],
];

type Shader = (dtype: DType, layout: MatvecLayout, o?: RowBlockOptions) => string;

async function baseShader(): Promise<Shader | null> {
  if (!values.base) return null;
  const file = resolve(values.base, 'packages/engine/src/kernels/gpu/wgsl.ts');
  if (!existsSync(file)) throw new Error(`--base: ${file} does not exist`);
  return ((await import(pathToFileURL(file).href)) as { matvecFastShader: Shader }).matvecFastShader;
}

async function main() {
  const { ctx, reason } = await openBenchGpu(true);
  if (!ctx) throw new Error(`no adapter: ${reason}`);
  const K = new GpuKernels(ctx);
  const step = new StepUniform(ctx);
  step.write(ctx, 0, 1);
  const tick = new Readback(ctx, 4, 't');
  const src = await createStorage(ctx, 16, 't');
  const base = await baseShader();
  const shaders: [string, Shader][] = [...(base ? ([['main', base]] as [string, Shader][]) : []), ['this', matvecFastShader]];
  const only = values.only ? new Set(values.only.split(',')) : null;
  console.log(`row-block forms, one token, best of ${rounds - 1}, ${repeat} passes per submission; ${K.matvec.lanes} lanes, subgroups ${K.matvec.subgroups}; load ${loadavg()[0].toFixed(2)}`);
  for (const dtype of values.dtypes!.split(',') as DType[]) {
    const weight = (rows: number, cols: number, label: string): Promise<GpuWeight> =>
      uploadWeight(ctx, { dtype, rows, cols, bytes: new Uint8Array(rows * rowBytes(dtype, cols)) }, label);
    const [gate, up, down, o] = [await weight(FFN, HIDDEN, 'gate'), await weight(FFN, HIDDEN, 'up'), await weight(HIDDEN, FFN, 'down'), await weight(HIDDEN, HIDDEN, 'o')];
    // The bench model's LM head (vocabulary 8192), with --norm
    const head = values.norm ? await weight(VOCAB, HIDDEN, 'head') : null;
    const x = await createStorage(ctx, FFN * 4, 'x');
    const xn = await createStorage(ctx, FFN * 4, 'xn');
    const nw = await createStorage(ctx, HIDDEN * 4, 'nw');
    const h = await createStorage(ctx, Math.max(FFN, VOCAB) * 4, 'h');
    const h2 = await createStorage(ctx, FFN * 4, 'h2');
    const params = (w: GpuWeight) => K.params('p', [['u32', w.rows], ['u32', w.cols], ['u32', 0], ['u32', w.rows], ['u32', w.cols], ['u32', 0], ['f32', 1e-5]]);
    const rowBlock = (name: string, shader: Shader, w: GpuWeight, o: RowBlockOptions, input: GPUBuffer, out: GPUBuffer, w2?: GpuWeight): Dispatch => {
      const p = K.pipeline(`bench_${name}_${dtype}`, () => shader(dtype, K.matvec, o));
      const buffers = [params(w), step.buffer, w.chunks[0].buffer, input, out, K.dummy(), w2?.chunks[0].buffer ?? null, o.norm ? nw : null];
      return { label: name, pipeline: p, bindGroup: K.bind(name, p, buffers), grid: () => [Math.ceil(w.rows / (o.rows ?? MATVEC_ROWS)), 1, 1] };
    };
    // kind: the ratio column compares each variant with the first of its kind in the same round (main's, with --base).
    const variants: { name: string; kind: string; ds: Dispatch[] }[] = [];
    const add = (kind: string, name: string, ds: Dispatch[]) => variants.push({ name, kind, ds });
    if (values.w8) {
      // The decode path of the formats without a row-block decoder (main's for Q4_K): matvec8Shader per
      // projection, a separate norm and SiLU gate. First of each kind, so the ratios are against it.
      const m8 = (w: GpuWeight, input: GPUBuffer, out: GPUBuffer): Dispatch => {
        const p = K.pipeline(`bench_m8_${dtype}_${w.cols}`, () => matvec8Shader(dtype, w.cols, K.matvec));
        return { label: 'matvec8', pipeline: p, bindGroup: K.bind('m8', p, [params(w), step.buffer, w.chunks[0].buffer, input, out, K.dummy()]), grid: () => [Math.ceil(w.rows / MATVEC_ROWS), 1, 1] };
      };
      add('glu', 'matvec8: norm, gate, up, silu', [K.rmsnorm(x, nw, xn, HIDDEN, 1, 1e-5, step), m8(gate, xn, h), m8(up, xn, h2), K.siluGate(h, h2, FFN, step)]);
      add('down', 'matvec8: down_proj', [m8(down, h, x)]);
      add('o', 'matvec8: o_proj', [m8(o, xn, x)]);
      if (values.norm) {
        add('q', 'matvec8: norm, q_proj', [K.rmsnorm(x, nw, xn, HIDDEN, 1, 1e-5, step), m8(o, xn, h)]);
        add('head', 'matvec8: norm, lm_head', [K.rmsnorm(x, nw, xn, HIDDEN, 1, 1e-5, step), m8(head!, xn, h)]);
      }
    }
    for (const [tree, shader] of shaders) {
      try {
        shader(dtype, K.matvec, {});
      } catch {
        console.log(`  ${dtype}: no row-block kernel in ${tree}`);
        continue;
      }
      // The form this tree records for one decode token, for both trees (main has had per-dtype forms since gpuf40).
      const gluForm = oneTokenForm(dtype, { glu: true, norm: true });
      add('glu', `${tree}: gate+up fused, folded norm`, [rowBlock(`${tree}_glu_norm`, shader, gate, gluForm, x, h, up)]);
      if (tree === 'this') {
        for (const [tag, form] of EXTRA) add('glu', `${tree}: gate+up fused, folded norm, ${tag}`, [rowBlock(`${tree}_glu_norm_${tag}`, shader, gate, { glu: true, norm: true, ...form }, x, h, up)]);
      }
      add('glu', `${tree}: norm, then gate+up fused`, [K.rmsnorm(x, nw, xn, HIDDEN, 1, 1e-5, step), rowBlock(`${tree}_glu`, shader, gate, tree === 'this' ? oneTokenForm(dtype, { glu: true }) : { glu: true }, xn, h, up)]);
      add('glu', `${tree}: norm, gate, up, silu (unfused)`, [
        K.rmsnorm(x, nw, xn, HIDDEN, 1, 1e-5, step),
        rowBlock(`${tree}_mv`, shader, gate, {}, xn, h),
        rowBlock(`${tree}_mv`, shader, up, {}, xn, h2),
        K.siluGate(h, h2, FFN, step),
      ]);
      add('glu', `${tree}: gate, up (folded norms), silu`, [rowBlock(`${tree}_mvn`, shader, gate, { norm: true }, x, h), rowBlock(`${tree}_mvn`, shader, up, { norm: true }, x, h2), K.siluGate(h, h2, FFN, step)]);
      add('down', `${tree}: down_proj`, [rowBlock(`${tree}_mv`, shader, down, oneTokenForm(dtype, {}), h, x)]);
      if (tree === 'this') for (const [tag, form] of EXTRA) add('down', `${tree}: down_proj, ${tag}`, [rowBlock(`${tree}_mv_${tag}`, shader, down, form, h, x)]);
      add('o', `${tree}: o_proj`, [rowBlock(`${tree}_mv`, shader, o, {}, xn, x)]);
      if (values.norm) {
        // q_proj and the LM head with the folded RMSNorm (hidden-wide rows: few steps per lane), by rows per workgroup
        for (const rows of [4, 8, 16, 32]) {
          add('q', `${tree}: q_proj, folded norm, ${rows} rows`, [rowBlock(`${tree}_mvn_r${rows}`, shader, o, { norm: true, rows }, x, h)]);
          add('head', `${tree}: lm_head, folded norm, ${rows} rows`, [rowBlock(`${tree}_mvn_r${rows}`, shader, head!, { norm: true, rows }, x, h)]);
        }
      }
    }
    const chosen = variants.filter(({ name }) => !only || [...only].some((s) => name.includes(s)));
    const best = new Map<string, number>();
    // Process CPU time (lavapipe's threads are this process's): less disturbed by other processes than wall time.
    const bestCpu = new Map<string, number>();
    const ratios = new Map<string, number[]>();
    for (let r = 0; r < rounds; r++) {
      const cpuOf = new Map<string, number>();
      for (const { name, ds } of chosen) {
        const a = performance.now();
        const c = process.cpuUsage();
        const enc = ctx.device.createCommandEncoder();
        for (let i = 0; i < repeat; i++) recordPass(enc, ds, 1);
        tick.encodeCopy(enc, src, 4);
        ctx.device.queue.submit([enc.finish()]);
        await tick.read(4);
        const u = process.cpuUsage(c);
        cpuOf.set(name, (u.user + u.system) / 1000 / repeat);
        // round 0 compiles the pipelines (llvmpipe compiles at first dispatch)
        if (r > 0) {
          best.set(name, Math.min(best.get(name) ?? Infinity, (performance.now() - a) / repeat));
          bestCpu.set(name, Math.min(bestCpu.get(name) ?? Infinity, cpuOf.get(name)!));
        }
      }
      if (r === 0) continue;
      for (const { name, kind } of chosen) {
        const ref = chosen.find((v) => v.kind === kind)!.name;
        ratios.set(name, [...(ratios.get(name) ?? []), cpuOf.get(name)! / cpuOf.get(ref)!]);
      }
    }
    const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
    for (const { name } of chosen) {
      console.log(
        `  ${dtype.padEnd(5)} ${name.padEnd(52)} ${best.get(name)!.toFixed(2).padStart(7)} ms wall ${bestCpu.get(name)!.toFixed(2).padStart(7)} ms CPU ${median(ratios.get(name)!).toFixed(2).padStart(6)}x`,
      );
    }
    for (const b of [gate, up, down, o]) b.destroy();
    head?.destroy();
    for (const b of [x, xn, nw, h, h2]) b.destroy();
  }
  console.log(`load ${loadavg()[0].toFixed(2)} (decode rows: up to ${MATVEC_MAX_BATCH})`);
  K.destroy();
  ctx.destroy();
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
