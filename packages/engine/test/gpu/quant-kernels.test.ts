/**
 * The WGSL accessors of the packed formats (kernels/gpu/quant-wgsl.ts: GGUF Q8_0/Q4_0, K-quants, MXFP4, MLX
 * affine, FP8) through the decode matvec (both reductions), the tiled matmul and the embedding lookup, and
 * every 8-wide accessor (`w8`, f32/f16/bf16 included) through matvec8Shader, against the plain-TS
 * dequantizer (the formats' reference) on odd shapes; then whole models on the GPU against the CPU
 * reference backend: Q8_0, Q4_0, Q4_K_M and MXFP4 GGUFs and an MLX 4-bit directory give the same greedy tokens.
 * Runs on lavapipe here; skips with the reason without an adapter.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { DType, Weight } from '../../src/kernels/backend.js';
import { createStorage, readF32, uploadF32, uploadWeight } from '../../src/kernels/gpu/buffers.js';
import type { GpuContext } from '../../src/kernels/gpu/context.js';
import { GpuKernels, StepUniform, submit, type Dispatch } from '../../src/kernels/gpu/ops.js';
import { weight8Accessor } from '../../src/kernels/gpu/quant-wgsl.js';
import { MATVEC_ROWS, matvec8Shader, type MatvecLayout } from '../../src/kernels/gpu/wgsl.js';
import { loadGpuModel } from '../../src/kernels/gpu/model.js';
import { dequantizeRow } from '../../src/kernels/wasm/quant-reference.js';
import { loadInProcessModel } from '../../src/drivers/in-process.js';
import { generate } from '../../src/generate/generate.js';
import { hfToGguf } from '../../src/gguf/convert.js';
import { Prng } from '../../src/numeric/prng.js';
import { writeFp8Model, writeInt4PackedModel, writeMlxModel, writeRandomModel } from '../../src/testing/index.js';
import { matmulRef, randomF32, rmsnormRef, widen } from './cpu-ref.js';
import { openTestGpu } from './gpu-env.js';
import { quantizedWeight } from './quant-weight.js';

const gpu = await openTestGpu();
const ctx = gpu.ctx as GpuContext;
const kernels = gpu.ctx ? new GpuKernels(ctx) : (null as unknown as GpuKernels);
// the decode matvec's workgroup-memory reduction (the device's layout may join lanes with subgroupAdd)
const treeKernels = gpu.ctx ? new GpuKernels(ctx, { matvec: { lanes: 32, subgroups: false } }) : (null as unknown as GpuKernels);
const step = gpu.ctx ? new StepUniform(ctx) : (null as unknown as StepUniform);
const root = mkdtempSync(join(tmpdir(), 'orchard-gpu-quant-'));
afterAll(() => {
  kernels?.destroy();
  treeKernels?.destroy();
  step?.destroy();
  gpu.ctx?.destroy();
  rmSync(root, { recursive: true, force: true });
});

function quantWeight(dtype: DType, rows: number, cols: number, rng: Prng): Weight {
  const v = Float32Array.from({ length: rows * cols }, (_, i) => rng.symmetric(1) * (1 + ((i >> 5) % 3)) + (((i >> 4) % 3) - 1) * 0.2);
  return quantizedWeight(dtype, v, rows, cols);
}

function dequantized(w: Weight): Float32Array {
  if (w.dtype === 'f32' || w.dtype === 'f16' || w.dtype === 'bf16') return widen(w);
  const out = new Float32Array(w.rows * w.cols);
  for (let r = 0; r < w.rows; r++) dequantizeRow(w.dtype, w.bytes, w.cols, r, out.subarray(r * w.cols, (r + 1) * w.cols));
  return out;
}

/** A quantized weight and its activations on the device, an output buffer and the float reference of w·x. */
async function matmulCase(dtype: DType, rows: number, cols: number, n: number, rng: Prng) {
  const w = quantWeight(dtype, rows, cols, rng);
  const x = randomF32(n * cols, rng);
  const gw = await uploadWeight(ctx, w, dtype);
  const gx = await uploadF32(ctx, x, 'x');
  const out = await createStorage(ctx, n * rows * 4, 'out');
  return { w, gw, gx, out, ref: matmulRef(dequantized(w), rows, cols, x, n) };
}

const FORMATS: Array<[DType, number]> = [
  // 34- and 18-byte blocks: odd rows of one block start on 2 bytes (the row-block decoder's shifted words)
  ['q8_0', 32],
  ['q4_0', 32],
  ['q4_k', 256],
  ['q5_k', 256],
  ['q6_k', 256],
  ['mxfp4', 32],
  // the MLX accessor is one code path over bits, group and scale dtype: a 2-byte read, a shift, a mask
  ['mlx4_g64_bf16', 64],
  ['mlx3_g32_f16', 32],
  ['mlx8_g128_f32', 128],
  // 128-column blocks; rows of 1.5 blocks (192 columns: a short last block, rows not 4-byte aligned)
  ['fp8_e4m3', 96],
];

describe.skipIf(!gpu.ctx)(`WGSL accessors of the packed formats vs the dequantizer${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  for (const [dtype, unit] of FORMATS) {
    it(`${dtype}: matvec, matmul (odd rows, 1 and 40 tokens) and embedding rows`, async () => {
      const rng = new Prng(unit + dtype.length);
      // 1-2 tokens take the decode matvec (the row-block kernel for Q8_0/Q4_0, matvec8Shader where
      // weight8Accessor decodes the other formats): row
      // counts with 1, 2 and 3 rows past a 4-row workgroup, 1-3 K-quant super-blocks (Q6_K's 210-byte
      // blocks start on 2 bytes in odd-block rows, on words in even ones); 40 tokens the tiled matmul.
      const shapes = [[5, unit, 1], [70, 2 * unit, 40], [11, 3 * unit, 2], [6, 2 * unit, 1]];
      for (const [rows, cols, n] of shapes) {
        const { w, gw, gx, out, ref } = await matmulCase(dtype, rows, cols, n, rng);
        for (const [how, k] of n <= 2 ? [['device layout', kernels], ['workgroup-memory sums', treeKernels]] as const : [['', kernels]] as const) {
          step.write(ctx, 0, n, 0);
          submit(ctx, k.linear(dtype, gw, gx, out, step), n);
          const got = await readF32(ctx, out, n * rows);
          let worst = 0;
          for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - ref.out[i]) / (ref.mag[i] + 1e-6));
          expect(worst, `${dtype} [${rows}x${cols}] x ${n} ${how}`).toBeLessThanOrEqual(2e-5);
        }
        // embedding rows: exactly the dequantized values (one f32 multiply-add per element)
        const toks = new Uint32Array([0, rows - 1, rows >> 1]);
        const gt = await uploadF32(ctx, new Float32Array(toks.buffer), 'tokens');
        const emb = await createStorage(ctx, toks.length * cols * 4, 'emb');
        step.write(ctx, 0, toks.length, 0);
        submit(ctx, kernels.embed(gw, gt, emb, step), toks.length);
        const rowsGot = await readF32(ctx, emb, toks.length * cols);
        const deq = dequantized(w);
        toks.forEach((t, b) => {
          for (let c = 0; c < cols; c++) {
            const want = deq[t * cols + c];
            expect(Math.abs(rowsGot[b * cols + c] - want), `${dtype} row ${t} col ${c}`).toBeLessThanOrEqual(Math.abs(want) * 2 ** -20 + 1e-30);
          }
        });
        for (const b of [gx, out, gt, emb]) b.destroy();
        gw.destroy();
      }
    }, 120_000);
  }
});

describe.skipIf(!gpu.ctx)(`Q4_K row-block forms (folded norm, fused SwiGLU) vs the dequantizer${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  // Decode's own shapes of the Q4_K row-block kernel (ops.ts oneTokenForm): rows off its 8-row (SwiGLU)
  // and 16-row (folded norm) workgroups (last workgroups of 3, 5 and 7 rows), 1-3 super-blocks (every
  // sub-block's scale unpack: j < 4 and j >= 4), 1 and 2 tokens, both reductions.
  const shapes = [[35, 256, 1], [21, 512, 2], [7, 768, 1]];
  it('norm-folded q_proj (with bias) and SwiGLU with the folded norm', async () => {
    const rng = new Prng(4141);
    for (const [rows, cols, n] of shapes) {
      const [wg, wu] = [quantWeight('q4_k', rows, cols, rng), quantWeight('q4_k', rows, cols, rng)];
      const [gg, gu] = [await uploadWeight(ctx, wg, 'gate'), await uploadWeight(ctx, wu, 'up')];
      const [nw, bias] = [randomF32(cols, rng), randomF32(rows, rng)];
      const [gnw, gbias] = [await uploadF32(ctx, nw, 'norm'), await uploadF32(ctx, bias, 'bias')];
      const norm = { weight: gnw, eps: 1e-5 };
      const x = randomF32(n * cols, rng, 3);
      const xn = rmsnormRef(x, nw, cols, 1e-5);
      const g = matmulRef(dequantized(wg), rows, cols, xn, n);
      const u = matmulRef(dequantized(wu), rows, cols, xn, n);
      const wantGlu = g.out.map((v, i) => (v / (1 + Math.exp(-v))) * u.out[i]);
      const magGlu = g.mag.map((m, i) => m * (Math.abs(u.out[i]) + 1) + u.mag[i] * Math.abs(g.out[i]));
      const gx = await uploadF32(ctx, x, 'x');
      for (const [how, k] of [['device layout', kernels], ['workgroup-memory sums', treeKernels]] as const) {
        const [out, tmp] = [await createStorage(ctx, n * rows * 4, 'out'), await createStorage(ctx, n * rows * 4, 'tmp')];
        const worst = (got: Float32Array, want: Float32Array, mag: Float32Array) => Math.max(...want.map((v, i) => Math.abs(got[i] - v) / (mag[i] + 1e-6)));
        step.write(ctx, 0, n, 0);
        submit(ctx, k.linear('q_proj', gg, gx, out, step, { bias: gbias, norm }), n);
        const lin = await readF32(ctx, out, n * rows);
        expect(worst(lin, g.out.map((v, i) => v + bias[i % rows]), g.mag), `q_proj [${rows}x${cols}] x ${n} ${how}`).toBeLessThanOrEqual(2e-5);
        step.write(ctx, 0, n, 0);
        submit(ctx, k.glu('mlp', gg, gu, gx, out, tmp, step, norm), n);
        const glu = await readF32(ctx, out, n * rows);
        expect(worst(glu, wantGlu, magGlu), `SwiGLU [${rows}x${cols}] x ${n} ${how}`).toBeLessThanOrEqual(2e-5);
        out.destroy();
        tmp.destroy();
      }
      for (const b of [gx, gnw, gbias]) b.destroy();
      gg.destroy();
      gu.destroy();
    }
  }, 300_000);
});

/** Every format with an 8-wide accessor (quant-wgsl.ts weight8Accessor), with its column unit (block, group). */
const FORMATS8: Array<[DType, number]> = [
  ['f32', 8],
  ['f16', 8],
  ['bf16', 8],
  ...FORMATS.filter(([d, unit]) => weight8Accessor(d, unit) !== null),
];

describe.skipIf(!gpu.ctx)(`8-wide accessors (w8) through matvec8Shader vs the dequantizer${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  it('covers Q8_0 and Q4_0 (and leaves out MLX 3-bit: no whole-word 8s)', () => {
    expect(FORMATS8.map(([d]) => d)).toEqual(expect.arrayContaining(['q8_0', 'q4_0', 'q4_k', 'q6_k', 'mxfp4', 'fp8_e4m3']));
    expect(weight8Accessor('mlx3_g32_f16', 64)).toBeNull();
  });
  const layouts: Array<[string, () => MatvecLayout]> = [
    ['device layout', () => kernels.matvec],
    ['workgroup-memory sums', () => ({ lanes: 32, subgroups: false })],
  ];
  for (const [dtype, unit] of FORMATS8) {
    it(`${dtype}: rows with 0-3 past a 4-row workgroup, 1-3 blocks, 1/2/40 tokens, both reductions`, async () => {
      const rng = new Prng(unit * 7 + dtype.length);
      // [rows, cols, tokens]: rows % 4 = 1, 2, 3, 0; one block rows start on 2 bytes (Q8_0/Q4_0/Q6_K) or any byte (MXFP4)
      const shapes = [[5, unit, 1], [6, 2 * unit, 2], [11, 3 * unit, 40], [8, unit, 2], [70, 2 * unit, 1]];
      for (const [rows, cols, n] of shapes) {
        const { w, gw, gx, out, ref } = await matmulCase(dtype, rows, cols, n, rng);
        for (const [how, layout] of layouts) {
          const l = layout();
          const pipeline = kernels.pipeline(`test_matvec8_${dtype}_${cols}_${l.lanes}_${l.subgroups}`, () => matvec8Shader(dtype, cols, l));
          const params = kernels.params('params', [['u32', rows], ['u32', cols], ['u32', 0], ['u32', rows], ['u32', cols], ['u32', 0], ['f32', 0]]);
          const d: Dispatch = { label: 'matvec8', pipeline, bindGroup: kernels.bind('matvec8', pipeline, [params, step.buffer, gw.chunks[0].buffer, gx, out, kernels.dummy()]), grid: () => [Math.ceil(rows / MATVEC_ROWS), 1, 1] };
          step.write(ctx, 0, n, 0);
          submit(ctx, [d], n);
          const got = await readF32(ctx, out, n * rows);
          let worst = 0;
          for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - ref.out[i]) / (ref.mag[i] + 1e-6));
          expect(worst, `${dtype} [${rows}x${cols}] x ${n} ${how}`).toBeLessThanOrEqual(2e-5);
        }
        for (const b of [gx, out]) b.destroy();
        gw.destroy();
      }
    }, 120_000);
  }
});

describe.skipIf(!gpu.ctx)(`GPU models in the packed formats: greedy tokens equal the CPU reference${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  const prompt = Array.from({ length: 21 }, (_, i) => (i * 37 + 11) % 256);
  const hf = join(root, 'hf');
  const deepseek = () => {
    const dir = join(root, 'deepseek');
    // 128 kv_b_proj rows per head: the absorbed keys stay FP8 (transposed in their blocks)
    writeRandomModel(dir, { variant: 'deepseek-v3', kimiLayout: true, hiddenSize: 64, numHeads: 4, numLayers: 2, moeIntermediateSize: 64, mlaDims: { nopeDim: 64, vDim: 64 }, dtype: 'bf16', seed: 17 });
    return dir;
  };
  writeRandomModel(hf, { variant: 'llama', hiddenSize: 256, intermediateSize: 512, numLayers: 2, numHeads: 4, numKvHeads: 2, dtype: 'bf16', seed: 13 });
  const cases: Array<[string, () => string]> = [
    // Q8_0/Q4_0: the row-block kernel's block decoder (decode) and its step loader (prompt matmul)
    ['GGUF Q8_0', () => (hfToGguf(hf, join(root, 'q8.gguf'), { dtype: 'q8_0' }), join(root, 'q8.gguf'))],
    ['GGUF Q4_0', () => (hfToGguf(hf, join(root, 'q4.gguf'), { dtype: 'q4_0' }), join(root, 'q4.gguf'))],
    ['GGUF Q4_K_M', () => (hfToGguf(hf, join(root, 'q4km.gguf'), { dtype: 'q4_k_m' }), join(root, 'q4km.gguf'))],
    ['GGUF MXFP4', () => (hfToGguf(hf, join(root, 'mxfp4.gguf'), { dtype: 'mxfp4' }), join(root, 'mxfp4.gguf'))],
    ['MLX 4-bit g64', () => (writeMlxModel(hf, join(root, 'mlx4'), { bits: 4, groupSize: 64 }), join(root, 'mlx4'))],
    // DeepSeek V3 as released (FP8 blocks) and Kimi-K2-Thinking (pack-quantized INT4 experts)
    ['DeepSeek-V3 FP8', () => (writeFp8Model(deepseek(), join(root, 'fp8')), join(root, 'fp8'))],
    ['Kimi-K2-Thinking INT4', () => (writeInt4PackedModel(deepseek(), join(root, 'int4')), join(root, 'int4'))],
  ];
  for (const [name, make] of cases) {
    it(`${name}: 16 greedy tokens after a 21-token prompt`, async () => {
      const path = make();
      const cpu = loadInProcessModel(path, { maxBatch: 32, maxSeqLen: 64 });
      const want = await generate(cpu, prompt, { maxTokens: 16, temperature: 0, stopTokenIds: [] });
      const model = await loadGpuModel(path, { context: ctx, maxBatch: 32, maxSeqLen: 64 });
      try {
        const got = await generate(model, prompt, { maxTokens: 16, temperature: 0, stopTokenIds: [] });
        expect(got.tokens).toEqual(want.tokens);
      } finally {
        model.dispose();
        cpu.dispose();
      }
    }, 180_000);
  }
});
