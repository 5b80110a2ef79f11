/**
 * Tile shapes of the prefill matmul (wgsl-matmul.ts) compared on one device in one run: best ms of 4
 * rounds per [rows x cols] x tokens product and tile, rounds interleaving the tiles. For retuning
 * MATMUL_TILES on a real GPU; on lavapipe (a CPU driver) the numbers are only a proxy.
 *   pnpm exec tsx packages/engine/bench/gpu-matmul-tiles.ts [--dtype f16] [--tokens 64] [--tiles 64x64/8x8,...]
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { DType } from '../src/kernels/backend.js';
import { Readback, createStorage, rowBytes, uploadWeight } from '../src/kernels/gpu/buffers.js';
import { openBenchGpu } from './gpu-lines.js';
import { GpuKernels, StepUniform, recordPass, type Dispatch } from '../src/kernels/gpu/ops.js';
import { tiledMatmulShader, type MatmulTile } from '../src/kernels/gpu/wgsl-matmul.js';

const { values } = parseArgs({ options: { dtype: { type: 'string', default: 'f16' }, tokens: { type: 'string', default: '64' }, tiles: { type: 'string' } } });
if (process.platform === 'linux') {
  const icd = '/usr/share/vulkan/icd.d/lvp_icd.json';
  if (!process.env.VK_ICD_FILENAMES && existsSync(icd)) process.env.VK_ICD_FILENAMES = icd;
  if (!process.env.XDG_RUNTIME_DIR) process.env.XDG_RUNTIME_DIR = mkdtempSync(join(tmpdir(), 'orchard-xdg-'));
}
const dtype = values.dtype as DType;
const n = Number(values.tokens);
/** "64x64/8x8": rows x tokens per workgroup / rows x tokens per invocation. */
function parseTile(spec: string): MatmulTile {
  const m = /^(\d+)x(\d+)\/(\d+)x(\d+)$/.exec(spec);
  if (!m) throw new Error(`--tiles: ${JSON.stringify(spec)} is not like 64x64/8x8`);
  return { rows: +m[1], tokens: +m[2], rowsPer: +m[3], tokensPer: +m[4] };
}
const DEFAULT_TILES = '64x8/4x4,64x16/8x4,64x32/8x4,64x64/8x4,64x64/8x8,64x64/16x8';

async function main() {
  const { ctx } = await openBenchGpu(true);
  if (!ctx) throw new Error('no adapter');
  const K = new GpuKernels(ctx);
  const step = new StepUniform(ctx);
  step.write(ctx, 0, n);
  const tick = new Readback(ctx, 4, 't');
  const src = await createStorage(ctx, 16, 't');
  const names = (values.tiles ?? DEFAULT_TILES).split(',');
  console.log(`${dtype}, ${n} tokens; load ${loadavg()[0].toFixed(2)}`);
  for (const [rows, cols] of [[1024, 1024], [3328, 1024]]) {
    const w = await uploadWeight(ctx, { dtype, rows, cols, bytes: new Uint8Array(rows * rowBytes(dtype, cols)) }, 'w');
    const x = await createStorage(ctx, n * cols * 4, 'x');
    const out = await createStorage(ctx, n * rows * 4, 'out');
    const params = K.params('p', [['u32', rows], ['u32', cols], ['u32', 0], ['u32', rows], ['u32', cols], ['u32', 0], ['f32', 0]]);
    const variants: [string, Dispatch][] = [];
    for (const name of names) {
      const t = parseTile(name);
      const p = K.pipeline(`tile_${dtype}_${name}`, () => tiledMatmulShader(dtype, 'step', t));
      variants.push([name, { label: name, pipeline: p, bindGroup: K.bind(name, p, [params, step.buffer, w.chunks[0].buffer, x, out, K.dummy()]), grid: () => [Math.ceil(rows / t.rows), Math.ceil(n / t.tokens), 1] }]);
    }
    // Rounds interleave the variants so a busy machine's noise hits each alike; each keeps its fastest.
    const best = new Map<string, number>();
    for (let r = 0; r < 5; r++) {
      for (const [name, d] of variants) {
        const a = performance.now();
        const enc = ctx.device.createCommandEncoder();
        recordPass(enc, [d], n);
        tick.encodeCopy(enc, src, 4);
        ctx.device.queue.submit([enc.finish()]);
        await tick.read(4);
        if (r > 0) best.set(name, Math.min(best.get(name) ?? Infinity, performance.now() - a));
      }
    }
    for (const [name] of variants) {
      const ms = best.get(name)!;
      console.log(`  [${rows}x${cols}] ${name.padEnd(28)} ${ms.toFixed(2).padStart(8)} ms  ${((2 * rows * cols * n) / ms / 1e6).toFixed(2)} GFLOP/s`);
    }
    w.destroy();
    x.destroy();
    out.destroy();
  }
  console.log(`load ${loadavg()[0].toFixed(2)}`);
  K.destroy();
  ctx.destroy();
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
