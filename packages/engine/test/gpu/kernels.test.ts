/**
 * Every WGSL kernel against the plain CPU loops in cpu-ref.ts, on odd shapes. Runs on whatever
 * WebGPU adapter exists (lavapipe here); skips with the reason when there is none.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { DType } from '../../src/kernels/backend.js';
import { readF32, uploadF32, uploadWeight, createStorage, Readback } from '../../src/kernels/gpu/buffers.js';
import type { GpuContext } from '../../src/kernels/gpu/context.js';
import { ATTN_TILED_MIN_TOKENS, GpuKernels, StepUniform, submit, type Dispatch, type LinearOptions } from '../../src/kernels/gpu/ops.js';
import { ropeCosSin, ropeInvFreq } from '../../src/kernels/gpu/rope.js';
import { ATTN_TILED_MAX_HEAD_DIM, matvecLayout, vectorWidth } from '../../src/kernels/gpu/wgsl.js';
import { TILE_K, matmulLoader, matmulTileFor } from '../../src/kernels/gpu/wgsl-matmul.js';
import { Prng } from '../../src/numeric/prng.js';
import {
  attentionRef,
  matmulRef,
  maxAbsDiff,
  randomF32,
  randomWeight,
  rmsnormRef,
  ropeRef,
  softmaxRef,
  widen,
} from './cpu-ref.js';
import { openTestGpu } from './gpu-env.js';

const gpu = await openTestGpu();
const ctx = gpu.ctx as GpuContext;
const defaultKernels = gpu.ctx ? new GpuKernels(ctx) : (null as unknown as GpuKernels);
const kernels = defaultKernels;
// The decode matvec's fallback without subgroups, with the 32 lanes a hardware GPU would get.
const sharedMemKernels = gpu.ctx ? new GpuKernels(ctx, { matvec: { lanes: 32, subgroups: false } }) : (null as unknown as GpuKernels);
const step = gpu.ctx ? new StepUniform(ctx) : (null as unknown as StepUniform);
afterAll(() => {
  kernels?.destroy();
  sharedMemKernels?.destroy();
  step?.destroy();
  gpu.ctx?.destroy();
});

async function run(dispatches: Dispatch[], n: number, pos0 = 0, seed = 0): Promise<void> {
  step.write(ctx, pos0, n, seed);
  submit(ctx, dispatches, n);
}

/** GPU result within `tol` of the exact sum relative to Σ|w·x| (f32 accumulation in another order). */
function expectClose(got: Float32Array, want: Float32Array, mag: Float32Array, tol: number) {
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i] - want[i]) / (mag[i] + 1e-6);
    if (!(err <= worst)) worst = Number.isNaN(err) ? Infinity : err;
  }
  expect(worst).toBeLessThanOrEqual(tol);
}

/**
 * `linear` with `opts` on a random [rows x cols] `dtype` weight and n random tokens, plain and with bias +
 * accumulate into random prior outputs, against matmulRef; `labels`: the dispatches a batch of n records.
 */
async function checkLinear(k: GpuKernels, dtype: DType, [rows, cols, n]: [number, number, number], seed: number, opts: LinearOptions, labels?: string[]): Promise<void> {
  const rng = new Prng(seed);
  const w = randomWeight(dtype, rows, cols, rng);
  const x = randomF32(n * cols, rng);
  const bias = randomF32(rows, rng);
  const prior = randomF32(n * rows, rng);
  const gw = await uploadWeight(ctx, w, 'w');
  const gx = await uploadF32(ctx, x, 'x');
  const gb = await uploadF32(ctx, bias, 'bias');
  const plain = await createStorage(ctx, n * rows * 4, 'plain');
  const acc = await uploadF32(ctx, prior, 'acc');
  const ds = [...k.linear('plain', gw, gx, plain, step, opts), ...k.linear('acc', gw, gx, acc, step, { ...opts, bias: gb, accumulate: true })];
  if (labels) expect(ds.filter((d) => !d.when || d.when(n)).map((d) => d.label)).toEqual(labels);
  await run(ds, n);
  const { out, mag } = matmulRef(widen(w), rows, cols, x, n);
  expectClose(await readF32(ctx, plain, n * rows), out, mag, 1e-5);
  expectClose(await readF32(ctx, acc, n * rows), out.map((v, i) => v + bias[i % rows] + prior[i]), mag, 1e-5);
  for (const b of [gx, gb, plain, acc]) b.destroy();
  gw.destroy();
}

/**
 * The fused row-block kernels (SwiGLU, folded norm) of the GGUF formats are the largest shaders: llvmpipe
 * compiles them at first dispatch, up to about a minute each on a busy 2-core machine (Mesa caches them
 * in ~/.cache for later runs).
 */
const COLD_COMPILE_MS = 300_000;

const DTYPES: DType[] = ['f32', 'f16', 'bf16', 'q8_0', 'q4_0'];
const SHAPES: Record<'float' | 'quant', [number, number, number][]> = {
  // [rows, cols, tokens]
  float: [
    [1, 1, 1],
    [7, 13, 1],
    [33, 65, 2],
    [64, 100, 17],
    [130, 257, 5],
    [9, 64, 1],
    [70, 136, 3],
    [67, 40, 45],
  ],
  quant: [
    [5, 32, 1],
    [37, 96, 3],
    [64, 160, 19],
    [70, 64, 40],
  ],
};

describe.skipIf(!gpu.ctx)(`WGSL kernels vs CPU reference${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  it('reports the adapter and its limits', () => {
    expect(ctx.adapter.description.length + ctx.adapter.device.length).toBeGreaterThan(0);
    expect(ctx.limits.maxStorageBufferBindingSize).toBeGreaterThanOrEqual(128 * 1024 * 1024);
    expect(ctx.limits.maxBufferSize).toBeGreaterThanOrEqual(ctx.limits.maxStorageBufferBindingSize);
  });

  it('opens shader-f16 and subgroups when offered, and sizes the decode matvec workgroup to one subgroup', () => {
    expect(ctx.features.subgroups).toBe(ctx.device.features.has('subgroups'));
    expect(ctx.features.f16).toBe(ctx.device.features.has('shader-f16'));
    const { lanes, subgroups } = defaultKernels.matvec;
    expect(subgroups).toBe(ctx.features.subgroups && ctx.features.subgroupMinSize > 0);
    if (ctx.features.subgroupMinSize > 0) expect(lanes).toBeLessThanOrEqual(ctx.features.subgroupMinSize);
    expect(matvecLayout({ subgroups: false, subgroupMinSize: 0 })).toEqual({ lanes: 32, subgroups: false });
    expect(matvecLayout({ subgroups: true, subgroupMinSize: 32 })).toEqual({ lanes: 32, subgroups: true });
    expect(matvecLayout({ subgroups: true, subgroupMinSize: 128 })).toEqual({ lanes: 64, subgroups: true });
  });

  for (const dtype of DTYPES) {
    const quant = dtype === 'q8_0' || dtype === 'q4_0';
    for (const [rows, cols, n] of SHAPES[quant ? 'quant' : 'float']) {
      const vectorised = cols % vectorWidth(dtype) === 0;
      const rowBlock = vectorised ? (['matvec (row-block)', 'matvec (row-block, 32 lanes, workgroup-memory sums)'] as const) : [];
      for (const mode of ['matvec', ...rowBlock, 'matmul'] as const) {
        const only = mode === 'matmul' ? 'matmul' : 'matvec';
        const generic = mode === 'matvec';
        const kernels = mode.includes('32 lanes') ? sharedMemKernels : defaultKernels;
        it(`${mode} ${dtype} [${rows}x${cols}] x ${n} tokens, with bias and accumulate`, async () => {
          await checkLinear(kernels, dtype, [rows, cols, n], rows * 1000 + cols * 10 + n, { only, generic });
        });
      }
    }
  }

  // The prefill matmul's tiles (MATMUL_TILES, picked by batch size; TILE_K columns): shapes ending inside a
  // tile on every axis, for each tile, through both weight loaders (whole 16-byte steps or GGUF blocks; per element).
  const OFF_TILE: [DType, number, number, number][] = [
    ['f16', 130, 72, 37],
    ['f16', 130, 72, 7],
    ['f16', 67, 13, 13],
    ['q8_0', 70, 96, 11],
    ['q4_0', 65, 160, 5],
    ['f16', 67, 13, 33],
    ['f32', 66, 36, 34],
    ['bf16', 129, 40, 65],
    ['bf16', 3, 7, 3],
    ['q8_0', 70, 96, 35],
    ['q4_0', 65, 160, 33],
    ['q4_0', 1, 32, 63],
  ];
  for (const [dtype, rows, cols, n] of OFF_TILE) {
    const tile = matmulTileFor(n);
    it(`tiled matmul ${dtype} [${rows}x${cols}] x ${n} tokens (${tile.rows}x${tile.tokens} tile, ${matmulLoader(dtype, cols)} loader), plain and with bias + accumulate`, async () => {
      expect(rows % tile.rows || cols % TILE_K || n % tile.tokens).toBeTruthy();
      // Default routing (no `only`): a batch of more than MATVEC_MAX_BATCH tokens takes the tiled matmul.
      await checkLinear(kernels, dtype, [rows, cols, n], rows * 7 + cols * 3 + n, {}, ['plain (matmul)', 'acc (matmul)']);
    });
  }

  it('LM head form (lastToken): only the batch\'s last token, into output row 0, with one grid layer (f16 row-block, f16 odd cols)', async () => {
    for (const [rows, cols, n] of [
      [70, 64, 9],
      [37, 13, 4],
    ]) {
      const rng = new Prng(rows + cols + n);
      const w = randomWeight('f16', rows, cols, rng);
      const x = randomF32(n * cols, rng);
      const gw = await uploadWeight(ctx, w, 'head');
      const gx = await uploadF32(ctx, x, 'x');
      const out = await uploadF32(ctx, new Float32Array(n * rows).fill(7), 'logits');
      const ds = kernels.linear('head', gw, gx, out, step, { lastToken: true });
      expect(ds.filter((d) => !d.when || d.when(n)).map((d) => d.grid(n)[2])).toEqual([1]);
      await run(ds, n);
      const ref = matmulRef(widen(w), rows, cols, x.subarray((n - 1) * cols), 1);
      const got = await readF32(ctx, out, n * rows);
      expectClose(got.subarray(0, rows), ref.out, ref.mag, 1e-5);
      expect([...got.subarray(rows)].every((v) => v === 7)).toBe(true);
      gx.destroy();
      out.destroy();
      gw.destroy();
    }
  });

  it('splits weights larger than the binding limit by rows and still matches (f16 odd cols, q4_0)', async () => {
    const small = { ...ctx, limits: { ...ctx.limits, maxStorageBufferBindingSize: 1000 } };
    for (const [dtype, rows, cols] of [
      ['f16', 97, 33],
      ['q4_0', 150, 64],
      ['f32', 41, 50],
      ['q8_0', 60, 32],
      ['f16', 97, 16],
    ] as [DType, number, number][]) {
      const rng = new Prng(rows);
      const w = randomWeight(dtype, rows, cols, rng);
      const gw = await uploadWeight(small, w, `big_${dtype}`);
      expect(gw.chunks.length).toBeGreaterThan(2);
      expect(gw.chunks.every((c) => c.buffer.size <= 1000)).toBe(true);
      for (const n of [1, 6]) {
        const x = randomF32(n * cols, rng);
        const gx = await uploadF32(ctx, x, 'x');
        const out = await createStorage(ctx, n * rows * 4, 'out');
        await run(kernels.linear('big', gw, gx, out, step), n);
        const ref = matmulRef(widen(w), rows, cols, x, n);
        expectClose(await readF32(ctx, out, n * rows), ref.out, ref.mag, 1e-5);
        gx.destroy();
        out.destroy();
      }
      gw.destroy();
    }
  });

  it('rejects a weight whose byte length does not match its shape, naming it', async () => {
    const w = randomWeight('f16', 4, 8, new Prng(1));
    await expect(uploadWeight(ctx, { ...w, rows: 5 }, 'model.layers.0.mlp.up_proj.weight')).rejects.toThrow(
      /model\.layers\.0\.mlp\.up_proj\.weight: 64 bytes but \[5, 8\] f16 needs 80/,
    );
    const notBlocks = { ...randomWeight('f32', 2, 40, new Prng(1)), dtype: 'q8_0' as const };
    await expect(uploadWeight(ctx, notBlocks, 'qw')).rejects.toThrow(/qw: q8_0 needs columns in whole 32-element blocks, got 40/);
  });

  it('embedding gather over a split table (bf16)', async () => {
    const small = { ...ctx, limits: { ...ctx.limits, maxStorageBufferBindingSize: 512 } };
    const rng = new Prng(5);
    const [vocab, dim] = [37, 20];
    const w = randomWeight('bf16', vocab, dim, rng);
    const gw = await uploadWeight(small, w, 'embed');
    expect(gw.chunks.length).toBeGreaterThan(1);
    const toks = new Uint32Array([0, 36, 5, 17, 17, 30]);
    const gt = await uploadF32(ctx, new Float32Array(toks.buffer), 'tokens');
    const out = await createStorage(ctx, toks.length * dim * 4, 'out');
    await run(kernels.embed(gw, gt, out, step), toks.length);
    const wf = widen(w);
    const want = new Float32Array(toks.length * dim);
    toks.forEach((t, b) => want.set(wf.subarray(t * dim, (t + 1) * dim), b * dim));
    expect(maxAbsDiff(await readF32(ctx, out, want.length), want)).toBe(0);
  });

  it('RMSNorm: separate output and in place per head (odd dims)', async () => {
    const rng = new Prng(9);
    for (const [dim, groups, n] of [
      [67, 1, 3],
      [200, 1, 1],
      [10, 5, 4],
    ]) {
      const x = randomF32(n * groups * dim, rng, 3);
      const nw = randomF32(dim, rng);
      const gx = await uploadF32(ctx, x, 'x');
      const gw = await uploadF32(ctx, nw, 'nw');
      const out = await createStorage(ctx, x.length * 4, 'out');
      await run([kernels.rmsnorm(gx, gw, out, dim, groups, 1e-5, step)], n);
      const want = rmsnormRef(x, nw, dim, 1e-5);
      expect(maxAbsDiff(await readF32(ctx, out, x.length), want)).toBeLessThan(2e-6 * 3);
      await run([kernels.rmsnorm(gx, gw, null, dim, groups, 1e-5, step)], n);
      expect(maxAbsDiff(await readF32(ctx, gx, x.length), want)).toBeLessThan(2e-6 * 3);
      for (const b of [gx, gw, out]) b.destroy();
    }
  });

  it('RoPE rotate-half at positions far from 0, with llama3 scaling', async () => {
    const rng = new Prng(11);
    const [heads, headDim, n, pos0] = [3, 12, 5, 1000];
    for (const scaling of [null, { type: 'llama3' as const, factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 64 }]) {
      const inv = ropeInvFreq(headDim, 500000, scaling);
      const x = randomF32(n * heads * headDim, rng);
      const gx = await uploadF32(ctx, x, 'x');
      const cs = await uploadF32(ctx, ropeCosSin(pos0, n, inv), 'cs');
      await run([kernels.rope(gx, cs, heads, headDim, step)], n, pos0);
      expect(maxAbsDiff(await readF32(ctx, gx, x.length), ropeRef(x, heads, headDim, pos0, inv))).toBeLessThan(1e-6);
      gx.destroy();
      cs.destroy();
    }
  });

  it('RoPE of q and k with the k/v append in one dispatch (GQA 6:2, behind cached positions)', async () => {
    const rng = new Prng(22);
    const [heads, kvHeads, headDim, n, pos0, maxSeq] = [6, 2, 10, 3, 7, 16];
    const kvDim = kvHeads * headDim;
    const inv = ropeInvFreq(headDim, 10000, null);
    const [q, k, v] = [randomF32(n * heads * headDim, rng), randomF32(n * kvDim, rng), randomF32(n * kvDim, rng)];
    const past = randomF32(maxSeq * kvDim, rng);
    const [gq, gk, gv] = [await uploadF32(ctx, q, 'q'), await uploadF32(ctx, k, 'k'), await uploadF32(ctx, v, 'v')];
    const [kc, vc] = [await uploadF32(ctx, past, 'kc'), await uploadF32(ctx, past, 'vc')];
    const cs = await uploadF32(ctx, ropeCosSin(pos0, n, inv), 'cs');
    await run([kernels.ropeStore(gq, gk, gv, kc, vc, cs, { heads, kvHeads, headDim }, step)], n, pos0);
    expect(maxAbsDiff(await readF32(ctx, gq, q.length), ropeRef(q, heads, headDim, pos0, inv))).toBeLessThan(1e-6);
    // Positions before pos0 and after the batch keep their rows; the batch's rows hold rotated k and v.
    const [wantK, wantV] = [new Float32Array(past), new Float32Array(past)];
    wantK.set(ropeRef(k, kvHeads, headDim, pos0, inv), pos0 * kvDim);
    wantV.set(v, pos0 * kvDim);
    expect(maxAbsDiff(await readF32(ctx, kc, past.length), wantK)).toBeLessThan(1e-6);
    expect(maxAbsDiff(await readF32(ctx, vc, past.length), wantV)).toBe(0);
    for (const b of [gq, gk, gv, kc, vc, cs]) b.destroy();
  });

  it('SiLU gate', async () => {
    const rng = new Prng(12);
    const [width, n] = [75, 3];
    const g = randomF32(width * n, rng, 8);
    const u = randomF32(width * n, rng);
    const gg = await uploadF32(ctx, g, 'g');
    const gu = await uploadF32(ctx, u, 'u');
    await run([kernels.siluGate(gg, gu, width, step)], n);
    const want = g.map((v, i) => (v / (1 + Math.exp(-v))) * u[i]);
    expect(maxAbsDiff(await readF32(ctx, gg, g.length), want)).toBeLessThan(1e-5);
  });

  for (const dtype of ['f16', 'q4_0', 'f32'] as const) {
    it(`SwiGLU ${dtype}: fused row-block for 1-2 tokens, gate/up + gate kernel for batches, both reductions, split weights`, async () => {
      const rng = new Prng(21);
      const [ffn, dim] = [37, 96];
      const small = { ...ctx, limits: { ...ctx.limits, maxStorageBufferBindingSize: 2048 } };
      const gw = randomWeight(dtype, ffn, dim, rng);
      const uw = randomWeight(dtype, ffn, dim, rng);
      const [gate, up] = [await uploadWeight(small, gw, 'gate'), await uploadWeight(small, uw, 'up')];
      expect(gate.chunks.length).toBeGreaterThan(1);
      for (const n of [1, 2, 3, 12]) {
        const x = randomF32(n * dim, rng);
        const gx = await uploadF32(ctx, x, 'x');
        const g = matmulRef(widen(gw), ffn, dim, x, n);
        const u = matmulRef(widen(uw), ffn, dim, x, n);
        const want = g.out.map((v, i) => (v / (1 + Math.exp(-v))) * u.out[i]);
        const mag = g.mag.map((m, i) => m * (Math.abs(u.out[i]) + 1) + u.mag[i] * Math.abs(g.out[i]));
        for (const k of [defaultKernels, sharedMemKernels]) {
          const out = await createStorage(ctx, n * ffn * 4, 'out');
          const tmp = await createStorage(ctx, n * ffn * 4, 'tmp');
          const ds = k.glu('mlp', gate, up, gx, out, tmp, step);
          await run(ds, n);
          expectClose(await readF32(ctx, out, n * ffn), want, mag, 1e-5);
          out.destroy();
          tmp.destroy();
        }
        gx.destroy();
      }
      gate.destroy();
      up.destroy();
    }, COLD_COMPILE_MS);
  }

  for (const dtype of ['f16', 'q8_0'] as const) {
    it(`RMSNorm folded into the row-block matvec${dtype === 'f16' ? ' and SwiGLU' : ''} ${dtype}: 1-2 tokens without a norm dispatch, batches through one, both reductions`, async () => {
      const rng = new Prng(23);
      const [rows, dim, eps] = [37, 96, 1e-5];
      const [wq, wu] = [randomWeight(dtype, rows, dim, rng), randomWeight(dtype, rows, dim, rng)];
      const [gw, gu] = [await uploadWeight(ctx, wq, 'w'), await uploadWeight(ctx, wu, 'u')];
      const [nw, bias] = [randomF32(dim, rng), randomF32(rows, rng)];
      const [gnw, gbias] = [await uploadF32(ctx, nw, 'norm'), await uploadF32(ctx, bias, 'bias')];
      const norm = { weight: gnw, eps, dim };
      for (const n of [1, 2, 5]) {
        const x = randomF32(n * dim, rng, 3);
        const xn = rmsnormRef(x, nw, dim, eps);
        const g = matmulRef(widen(wq), rows, dim, xn, n);
        const u = matmulRef(widen(wu), rows, dim, xn, n);
        const wantLinear = g.out.map((v, i) => v + bias[i % rows]);
        const wantGlu = g.out.map((v, i) => (v / (1 + Math.exp(-v))) * u.out[i]);
        const magGlu = g.mag.map((m, i) => m * (Math.abs(u.out[i]) + 1) + u.mag[i] * Math.abs(g.out[i]));
        const gx = await uploadF32(ctx, x, 'x');
        for (const k of [defaultKernels, sharedMemKernels]) {
          const [xb, out, tmp] = [await createStorage(ctx, n * dim * 4, 'xb'), await createStorage(ctx, n * rows * 4, 'out'), await createStorage(ctx, n * rows * 4, 'tmp')];
          const ds = k.withNorm(gx, xb, norm, step, [gw], (input, fused) => k.linear('q_proj', gw, input, out, step, { bias: gbias, norm: fused }));
          const normDispatches = ds.filter((d) => d.label === 'rmsnorm' && (d.when?.(n) ?? true)).length;
          expect(normDispatches).toBe(n <= 2 ? 0 : 1);
          await run(ds, n);
          expectClose(await readF32(ctx, out, n * rows), wantLinear, g.mag, 1e-5);
          if (dtype === 'f16') {
            await run(k.withNorm(gx, xb, norm, step, [gw, gu], (input, fused) => k.glu('mlp', gw, gu, input, out, tmp, step, fused)), n);
            expectClose(await readF32(ctx, out, n * rows), wantGlu, magGlu, 1e-5);
          }
          for (const b of [xb, out, tmp]) b.destroy();
        }
        gx.destroy();
      }
      for (const b of [gw, gu, gnw, gbias]) b.destroy();
    }, COLD_COMPILE_MS);
  }

  it('softmax rows', async () => {
    const rng = new Prng(13);
    const [cols, groups, n] = [131, 2, 3];
    const x = randomF32(cols * groups * n, rng, 10);
    const gx = await uploadF32(ctx, x, 'x');
    await run([kernels.softmax(gx, cols, groups, step)], n);
    expect(maxAbsDiff(await readF32(ctx, gx, x.length), softmaxRef(x, cols))).toBeLessThan(1e-6);
  });

  type AttnCase = { name: string; heads: number; kvHeads: number; headDim: number; pos0: number; n: number; window: number; group?: number; headOffset?: number; kvOffset?: number; sink?: boolean };
  const attnCases: AttnCase[] = [
    { name: 'decode, GQA', heads: 4, kvHeads: 2, headDim: 8, pos0: 9, n: 1, window: 0 },
    { name: 'prefill from 0, MHA, odd head dim', heads: 3, kvHeads: 3, headDim: 6, pos0: 0, n: 7, window: 0 },
    { name: 'prefill continuing a cache, GQA 6:2, past one workgroup', heads: 6, kvHeads: 2, headDim: 16, pos0: 70, n: 5, window: 0 },
    { name: 'sliding window', heads: 2, kvHeads: 1, headDim: 4, pos0: 10, n: 4, window: 5 },
    // Prompt batches of the tiled kernel's size and beyond: partial query tiles, tiles starting mid-cache.
    { name: 'prompt of 37 from 0, head dim 128 (the tiled kernel\'s largest), GQA 4:2', heads: 4, kvHeads: 2, headDim: 128, pos0: 0, n: 37, window: 0 },
    { name: 'prompt of 8 continuing a cache of 13, head dim 72', heads: 2, kvHeads: 1, headDim: 72, pos0: 13, n: 8, window: 0 },
    { name: 'prompt of 21, sliding window 6 starting mid-tile', heads: 2, kvHeads: 2, headDim: 32, pos0: 5, n: 21, window: 6 },
    { name: 'prompt of 19 with sink logits (gpt-oss), head dim 64', heads: 4, kvHeads: 2, headDim: 64, pos0: 3, n: 19, window: 0, sink: true },
    { name: 'tensor-parallel slice: heads 2-3 of 8, KV head 1 of 4, prompt of 12', heads: 2, kvHeads: 1, headDim: 16, pos0: 2, n: 12, window: 0, group: 2, headOffset: 2, kvOffset: 1 },
  ];
  for (const c of attnCases) {
    it(`attention over the KV cache: ${c.name}`, async () => {
      const rng = new Prng(c.pos0 + c.n * 7 + c.heads);
      const maxSeq = c.pos0 + c.n + 3;
      const kvDim = c.kvHeads * c.headDim;
      const past = c.pos0 * kvDim;
      const kAll = randomF32((c.pos0 + c.n) * kvDim, rng);
      const vAll = randomF32((c.pos0 + c.n) * kvDim, rng);
      const q = randomF32(c.n * c.heads * c.headDim, rng, 2);
      // The cache holds positions < pos0 already; the batch's k/v rows are appended by kv_store.
      const kc = await createStorage(ctx, maxSeq * kvDim * 4, 'kc');
      const vc = await createStorage(ctx, maxSeq * kvDim * 4, 'vc');
      ctx.device.queue.writeBuffer(kc, 0, kAll.subarray(0, past));
      ctx.device.queue.writeBuffer(vc, 0, vAll.subarray(0, past));
      const gk = await uploadF32(ctx, kAll.subarray(past), 'k');
      const gv = await uploadF32(ctx, vAll.subarray(past), 'v');
      const gq = await uploadF32(ctx, q, 'q');
      const sc = await createStorage(ctx, c.n * c.heads * maxSeq * 4, 'scores');
      const out = await createStorage(ctx, q.length * 4, 'out');
      const sinks = c.sink ? randomF32(c.heads, rng, 3) : undefined;
      const gs = sinks ? await uploadF32(ctx, sinks, 'sinks') : null;
      const want = attentionRef(q, kAll, vAll, { ...c, sinks });
      // Both kernels where the tiled one takes the head size, and the one `auto` records for n.
      const kinds: ('per-token' | 'tiled' | 'auto')[] = ['per-token', ...(c.headDim <= ATTN_TILED_MAX_HEAD_DIM ? (['tiled'] as const) : []), 'auto'];
      for (const kind of kinds) {
        const ds = kernels.attention(gq, kc, vc, sc, out, { ...c, maxSeq, sinks: gs }, step, kind);
        if (kind === 'auto') {
          const used = ds.filter((d) => d.when?.(c.n) ?? true).map((d) => d.label);
          expect(used).toEqual([c.n >= ATTN_TILED_MIN_TOKENS ? 'attention_tiled' : 'attention']);
        }
        ctx.device.queue.writeBuffer(out, 0, new Float32Array(q.length).fill(NaN));
        await run([kernels.kvStore(gk, gv, kc, vc, kvDim, step), ...ds], c.n, c.pos0);
        expect(maxAbsDiff(await readF32(ctx, out, want.length), want), kind).toBeLessThan(1e-5);
      }
      expect(maxAbsDiff(await readF32(ctx, kc, kAll.length), kAll)).toBe(0);
    });
  }

  it('greedy pick is the argmax of the last row (ties: lowest index)', async () => {
    const rng = new Prng(14);
    const [vocab, n] = [1001, 3];
    const x = randomF32(vocab * n, rng);
    x[(n - 1) * vocab + 613] = 5;
    x[(n - 1) * vocab + 777] = 5;
    x[0] = 50; // a larger value in an earlier row must not win
    const gx = await uploadF32(ctx, x, 'logits');
    const res = await createStorage(ctx, 8, 'res');
    await run([kernels.sample(gx, res, vocab, 0, step)], n);
    const rb = new Readback(ctx, 8);
    const enc = ctx.device.createCommandEncoder();
    rb.encodeCopy(enc, res, 8);
    ctx.device.queue.submit([enc.finish()]);
    const r = new Uint32Array(await rb.read(8));
    expect(r[0]).toBe(613);
    expect(new Float32Array(r.buffer)[1]).toBe(5);
    rb.destroy();
  });

  it('temperature sampling follows softmax(logits / T) and is reproducible per seed', async () => {
    const logits = new Float32Array([1, 2, 0.5, -1, 1.5]);
    const T = 0.8;
    const gx = await uploadF32(ctx, logits, 'logits');
    const res = await createStorage(ctx, 8, 'res');
    const d = [kernels.sample(gx, res, logits.length, T, step)];
    const counts = new Array(logits.length).fill(0);
    const draws = 2000;
    const first: number[] = [];
    for (let s = 0; s < draws; s++) {
      await run(d, 1, 0, s + 1);
      const r = new Uint32Array((await readF32(ctx, res, 1)).buffer)[0];
      counts[r]++;
      if (s < 20) first.push(r);
    }
    const p = softmaxRef(logits.map((v) => v / T), logits.length);
    for (let i = 0; i < logits.length; i++) {
      const sd = Math.sqrt((p[i] * (1 - p[i])) / draws);
      expect(Math.abs(counts[i] / draws - p[i])).toBeLessThan(4 * sd + 1e-3);
    }
    const again: number[] = [];
    for (let s = 0; s < 20; s++) {
      await run(d, 1, 0, s + 1);
      again.push(new Uint32Array((await readF32(ctx, res, 1)).buffer)[0]);
    }
    expect(again).toEqual(first);
  });
});
