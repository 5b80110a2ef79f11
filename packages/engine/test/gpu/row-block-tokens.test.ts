/**
 * The row-block kernel's grouped form (ROW_BLOCK_TOKENS tokens per workgroup, taken by a step of
 * several sequences' decode rows) gives every row exactly the bits the one-token kernel gives that row
 * alone: plain, with the folded RMSNorm (+ bias and accumulate) and the fused SwiGLU for f32/f16/bf16,
 * plain and the fused SwiGLU with the folded norm for Q8_0/Q4_0 (whose one-token SwiGLU kernel has its
 * own shape), every form for Q4_K (8 or 16 rows one-token), on a row count off the 4-row block and token
 * counts off the group.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { DType, Weight } from '../../src/kernels/backend.js';
import { createStorage, readF32, uploadF32, uploadWeight, type GpuWeight } from '../../src/kernels/gpu/buffers.js';
import type { GpuContext } from '../../src/kernels/gpu/context.js';
import { GpuKernels, ROW_BLOCK_TOKENS, StepUniform, recordInto, type Dispatch } from '../../src/kernels/gpu/ops.js';
import { Prng } from '../../src/numeric/prng.js';
import { randomF32, randomWeight } from './cpu-ref.js';
import { openTestGpu } from './gpu-env.js';
import { quantizedWeight } from './quant-weight.js';

const gpu = await openTestGpu();
const ctx = gpu.ctx as GpuContext;
const kernels = gpu.ctx ? new GpuKernels(ctx) : (null as unknown as GpuKernels);
const step = gpu.ctx ? new StepUniform(ctx) : (null as unknown as StepUniform);
afterAll(() => {
  kernels?.destroy();
  step?.destroy();
  gpu.ctx?.destroy();
});

const ROWS = 37;
const COLS = 64;

/** Records `ds` for `n` rows with the kernels of one-token sequences (a step of decode rows) and waits. */
async function runStep(ds: Dispatch[], n: number, out: GPUBuffer, width: number): Promise<{ out: Float32Array; labels: string[] }> {
  step.write(ctx, 0, n);
  const enc = ctx.device.createCommandEncoder();
  const pass = enc.beginComputePass();
  recordInto(pass, ds, n, 1);
  pass.end();
  ctx.device.queue.submit([enc.finish()]);
  const labels = ds.filter((d) => !d.when || d.when(1, n)).map((d) => d.label);
  return { out: await readF32(ctx, out, n * width), labels };
}

type Form = 'plain' | 'norm, bias, accumulate' | 'glu with norm';
const FORMS: Form[] = ['plain', 'norm, bias, accumulate', 'glu with norm'];

/** Q4_K rows are whole 256-element super-blocks: two of them, so a row's steps cross a super-block. */
const colsOf = (dtype: DType): number => (dtype === 'q4_k' ? 512 : COLS);

/** A random weight; Q4_K's through the quantizer (random bytes would put NaN and Inf in its f16 scales). */
function weightOf(dtype: DType, rows: number, cols: number, rng: Prng): Weight {
  return dtype === 'q4_k' ? quantizedWeight(dtype, randomF32(rows * cols, rng), rows, cols) : randomWeight(dtype, rows, cols, rng);
}

/** The form's dispatches on x → out (gate/up share the weight shape). */
async function formOf(form: Form, w: GpuWeight, w2: GpuWeight, x: GPUBuffer, out: GPUBuffer, rng: Prng): Promise<Dispatch[]> {
  if (form === 'plain') return kernels.linear('plain', w, x, out, step, { only: 'matvec' });
  const norm = { weight: await uploadF32(ctx, randomF32(w.cols, rng), 'norm'), eps: 1e-5 };
  if (form === 'glu with norm') return kernels.glu('mlp', w, w2, x, out, await createStorage(ctx, 8 * ROWS * 4, 'tmp'), step, norm);
  return kernels.linear('q', w, x, out, step, { norm, bias: await uploadF32(ctx, randomF32(ROWS, rng), 'bias'), accumulate: true });
}

describe.skipIf(!gpu.ctx)(`row-block kernel, ${ROW_BLOCK_TOKENS} tokens per workgroup${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  for (const dtype of ['f32', 'f16', 'bf16', 'q8_0', 'q4_0', 'q4_k'] as DType[]) {
    // Q8_0/Q4_0/Q4_K: the fused SwiGLU's one-token kernel has its own shape (ops.ts oneTokenForm: 8 rows,
    // blocks decoded in halves), so its bits against the grouped form's are checked too.
    const COLS = colsOf(dtype);
    // Q4_K's folded-norm form has its own shape too (16 rows).
    const forms: Form[] = dtype.startsWith('q') && dtype !== 'q4_k' ? ['plain', 'glu with norm'] : FORMS;
    it(`${dtype}: every row's bits equal the one-token kernel's (${forms.join('; ')})`, async () => {
      for (const [f, form] of forms.entries()) {
        for (const n of [3, ROW_BLOCK_TOKENS + 2]) {
          const rng = new Prng(100 + f * 10 + n);
          const w = await uploadWeight(ctx, weightOf(dtype, ROWS, COLS, rng), 'w');
          const w2 = await uploadWeight(ctx, weightOf(dtype, ROWS, COLS, rng), 'w2');
          const x = randomF32(n * COLS, rng);
          const prior = randomF32(n * ROWS, rng);
          const grouped = await uploadF32(ctx, prior, 'grouped');
          const step0 = await runStep(await formOf(form, w, w2, await uploadF32(ctx, x, 'x'), grouped, new Prng(f)), n, grouped, ROWS);
          expect(step0.labels, `${form}, ${n} rows`).toEqual([`${form === 'glu with norm' ? 'mlp' : form === 'plain' ? 'plain' : 'q'} (matvec ×${ROW_BLOCK_TOKENS})`]);
          for (let b = 0; b < n; b++) {
            const alone = await uploadF32(ctx, prior.slice(b * ROWS, (b + 1) * ROWS), 'alone');
            const one = await runStep(await formOf(form, w, w2, await uploadF32(ctx, x.slice(b * COLS, (b + 1) * COLS), 'x row'), alone, new Prng(f)), 1, alone, ROWS);
            expect(one.labels).toEqual([`${form === 'glu with norm' ? 'mlp' : form === 'plain' ? 'plain' : 'q'} (matvec)`]);
            expect(step0.out.subarray(b * ROWS, (b + 1) * ROWS), `${form}, row ${b} of ${n}`).toEqual(one.out);
          }
        }
      }
    }, 300_000);
  }
});
