/**
 * The MoE prompt-batch path (kernels/gpu/moe.ts: GROUP's counting sort by expert, then the grouped
 * tiled matmul per expert) against the per-(token, slot) gathered-expert matvec, on hand-written routes:
 * an expert every token chose, one no token chose, one chosen by one token, one by all but one, slots
 * whose experts another rank holds (this rank holds experts [1, 5) of 6), top-3, batches taking each
 * tile shape, every weight format the expert kernels take (both weight loaders), gpt-oss's biases and
 * clamped SwiGLU; then a whole qwen3-moe shard both ways, and the option's bad input. Each path gets its
 * own activations, so a slot the grouped path skipped cannot pass with the other path's values. Runs on lavapipe here; skips with the reason without an adapter.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { MoeConfig } from '../../src/config/moe-config.js';
import type { DType, Weight } from '../../src/kernels/backend.js';
import { createStorage, readF32, uploadF32 } from '../../src/kernels/gpu/buffers.js';
import type { GpuContext } from '../../src/kernels/gpu/context.js';
import { weight8Accessor } from '../../src/kernels/gpu/quant-wgsl.js';
import { allocateMoeActivations, moeDispatches, moeTileFor, uploadMoeLayer } from '../../src/kernels/gpu/moe.js';
import { GpuKernels, StepUniform, submit } from '../../src/kernels/gpu/ops.js';
import { GpuShard } from '../../src/kernels/gpu/shard.js';
import { loadShard } from '../../src/model/forward.js';
import { writeRandomModel } from '../../src/testing/index.js';
import { MATMUL_TILES, matmulLoader } from '../../src/kernels/gpu/wgsl-matmul.js';
import type { ExpertWeights, MoeWeights } from '../../src/model/weights-moe.js';
import { Prng } from '../../src/numeric/prng.js';
import { logitError, randomF32 } from './cpu-ref.js';
import { openTestGpu } from './gpu-env.js';
import { quantizedWeight } from './quant-weight.js';

const gpu = await openTestGpu();
const ctx = gpu.ctx as GpuContext;
const kernels = gpu.ctx ? new GpuKernels(ctx) : (null as unknown as GpuKernels);
// the per-slot row-block kernel's workgroup-memory reduction (the device's layout may join lanes with subgroupAdd)
const treeKernels = gpu.ctx ? new GpuKernels(ctx, { matvec: { lanes: 32, subgroups: false } }) : (null as unknown as GpuKernels);
const step = gpu.ctx ? new StepUniform(ctx) : (null as unknown as StepUniform);
const root = mkdtempSync(join(tmpdir(), 'orchard-gpu-moe-grouped-'));
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
  kernels?.destroy();
  treeKernels?.destroy();
  step?.destroy();
  gpu.ctx?.destroy();
});

const E = 6;
const K = 3;
const FIRST = 1; // this rank holds experts [1, 5)
const HELD = 4;
const MAX_BATCH = 64;
/** One batch per grouped tile shape (checked below). */
const BATCHES = [3, 12, 50];

function weight(dtype: DType, rows: number, cols: number, rng: Prng): Weight {
  return quantizedWeight(dtype, randomF32(rows * cols, rng), rows, cols);
}

/** [dtype, hidden, expert intermediate, gpt-oss biases + clamped SwiGLU]: odd row counts for the 64-row tiles. */
const CASES: [DType, number, number, boolean][] = [
  ['f32', 40, 52, false],
  // 44 columns of down_proj: not whole 16-byte steps, so down takes the per-element loader
  ['f16', 40, 44, false],
  ['bf16', 48, 72, true],
  ['q8_0', 64, 96, false],
  ['q4_0', 64, 96, false],
  ['q4_k', 256, 256, false],
  ['q6_k', 256, 256, false],
  ['mxfp4', 64, 96, true],
  ['mlx4_g64_bf16', 128, 192, false],
  // compressed-tensors INT4 loads as MLX 4-bit g32; 8-bit with f32 scales
  ['mlx4_g32_bf16', 64, 96, true],
  ['mlx8_g32_f32', 64, 96, false],
  ['fp8_e4m3', 96, 192, false],
];

/** Token b's experts: 1 for every token, 3 for token 0 only, 4 for the others, then 0/5 (another rank's); 2 for none. */
const routeOf = (b: number): number[] => [1, b === 0 ? 3 : 4, b % 2 ? 5 : 0];

describe.skipIf(!gpu.ctx)(`GPU MoE prompt batch: grouped matmul vs per-slot matvec${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  it('the batches below take every grouped tile shape', () => {
    const shapes = new Set(BATCHES.map((n) => moeTileFor(n, K, E)));
    expect(shapes.size).toBe(MATMUL_TILES.length);
  });

  for (const [dtype, D, I, biased] of CASES) {
    it(`${dtype} [hidden ${D}, intermediate ${I}]${biased ? ', biases, clamped SwiGLU' : ''}: loaders ${matmulLoader(dtype, D)}/${matmulLoader(dtype, I)}`, async () => {
      const rng = new Prng(D + I + dtype.length);
      const experts: ExpertWeights[] = Array.from({ length: HELD }, () => ({
        gate: weight(dtype, I, D, rng),
        up: weight(dtype, I, D, rng),
        down: weight(dtype, D, I, rng),
        gateBias: biased ? randomF32(I, rng) : null,
        upBias: biased ? randomF32(I, rng) : null,
        downBias: biased ? randomF32(D, rng) : null,
      }));
      const w: MoeWeights = { kind: 'moe', router: weight('f32', E, D, rng), routerBias: null, correctionBias: null, firstExpert: FIRST, experts, shared: null };
      const moe: MoeConfig = {
        experts: E,
        topK: K,
        expertIntermediate: I,
        sharedIntermediate: 0,
        routing: 'softmax',
        activation: biased ? 'clamped-swiglu' : 'swiglu',
        normTopK: true,
        groups: 1,
        topkGroups: 1,
        scalingFactor: 1,
        swigluLimit: biased ? 1.5 : Infinity,
        sparse: [true],
      };
      const layer = await uploadMoeLayer(ctx, w, `moe ${dtype}`);
      const x = await uploadF32(ctx, randomF32(MAX_BATCH * D, rng), 'x');
      const run = async (n: number, groupedMinRows: number, k = kernels): Promise<Float32Array> => {
        const act = await allocateMoeActivations(ctx, moe, D, 0, MAX_BATCH);
        const ids = Uint32Array.from({ length: n * K }, (_, s) => routeOf(Math.floor(s / K))[s % K]);
        ctx.device.queue.writeBuffer(act.ids, 0, ids);
        ctx.device.queue.writeBuffer(act.weights, 0, randomF32(n * K, new Prng(n)).map(Math.abs));
        const out = await createStorage(ctx, n * D * 4, 'out');
        // The routing is the test's: leave out the router and the route kernel.
        const ds = moeDispatches(k, layer, moe, act, x, out, D, false, step, groupedMinRows).filter((d) => !d.label.startsWith('router') && d.label !== 'moe route');
        // Per slot: the fused gate+up and down+combine kernels where the format decodes 8 columns from
        // whole words at hidden and intermediate widths alike, else per projection the row-block kernel
        // where it does, per element where not.
        const labels = ds.filter((d) => d.when?.(n) ?? true).map((d) => d.label);
        if (groupedMinRows === Infinity) {
          const want = weight8Accessor(dtype, D) && weight8Accessor(dtype, I) ? ['moe expert glu', 'moe expert down'] : [D, D, I].map((cols) => (weight8Accessor(dtype, cols) ? 'moe expert (rows)' : 'moe expert'));
          expect(labels.filter((l) => l.startsWith('moe expert')), dtype).toEqual(want);
        }
        step.write(ctx, 0, n, 0);
        submit(ctx, ds, n);
        const got = await readF32(ctx, out, n * D);
        for (const b of [out, ...Object.values(act)]) b.destroy();
        return got;
      };
      for (const n of BATCHES) {
        const perSlot = await run(n, Infinity);
        const grouped = await run(n, 3);
        const scale = perSlot.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
        expect(scale, 'the per-slot path computed something').toBeGreaterThan(0);
        let worst = 0;
        for (let i = 0; i < perSlot.length; i++) worst = Math.max(worst, Math.abs(grouped[i] - perSlot[i]));
        expect(worst / scale, `${dtype}, ${n} tokens: grouped vs per-slot, of the output scale`).toBeLessThanOrEqual(2e-6);
        const tree = await run(n, Infinity, treeKernels);
        worst = 0;
        for (let i = 0; i < tree.length; i++) worst = Math.max(worst, Math.abs(grouped[i] - tree[i]));
        expect(worst / scale, `${dtype}, ${n} tokens: grouped vs per-slot with workgroup-memory sums`).toBeLessThanOrEqual(2e-6);
      }
      x.destroy();
      layer.uploads.destroy();
    }, 300_000);
  }

  it('a qwen3-moe shard (top-3 of 8 experts, f16): a prompt batch through the grouped path gives the per-slot path\'s logits', async () => {
    const dir = join(root, 'qwen3-moe');
    writeRandomModel(dir, { variant: 'qwen3-moe', numLayers: 2, mlpOnlyLayers: [], expertsPerToken: 3, dtype: 'f16', seed: 5 });
    const cpu = loadShard(dir, { layers: [0, 2], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { maxBatch: 16, maxSeqLen: 32 });
    const logits = async (moeGroupedMinRows: number) => {
      const g = await GpuShard.create(ctx, { config: cpu.config, spec: cpu.spec, slice: cpu.slice, weights: cpu.weights, maxBatch: 16, maxSeqLen: 32, moeGroupedMinRows });
      try {
        const cache = await g.newCache(32);
        return await g.forward({ tokens: [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108] }, cache);
      } finally {
        g.dispose();
      }
    };
    const perSlot = await logits(Infinity);
    const grouped = await logits(3);
    expect(logitError(grouped, perSlot)).toBeLessThan(2e-6);
    expect(grouped).not.toEqual(perSlot); // different kernels: equal bits would mean the grouped path never ran
    await expect(GpuShard.create(ctx, { config: cpu.config, spec: cpu.spec, slice: cpu.slice, weights: cpu.weights, moeGroupedMinRows: 0 })).rejects.toThrow(/moeGroupedMinRows/);
  }, 300_000);
});
