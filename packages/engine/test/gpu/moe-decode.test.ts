/**
 * The fused MoE decode kernels (kernels/gpu/wgsl-moe-decode.ts through moe.ts decodeGlu / decodeDown)
 * against plain CPU loops over the dequantized weights (quant-reference.ts dequantizeRow), per format
 * they take (MLX 4-bit g64 and g32 — INT4's layout — and 8-bit with the factored scale, FP8 with the
 * bit-built E4M3 decode, Q4_0 and bf16 through w8): an odd number of experts with a buffer holding a
 * middle range of them (slots of the others must be left alone), k = 1 and k = 3, 1 and 2 tokens, row
 * counts that are not multiples of the workgroup's rows, gpt-oss's biases and clamped SwiGLU, both
 * reductions (subgroupAdd where the device has it, the workgroup-memory tree), down's accumulate flag.
 * Each output is checked against the sum of its terms' magnitudes (a wrong value, slot or weight fails).
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { MoeConfig } from '../../src/config/moe-config.js';
import type { DType, Weight } from '../../src/kernels/backend.js';
import { createStorage, readF32, uploadF32 } from '../../src/kernels/gpu/buffers.js';
import type { GpuContext } from '../../src/kernels/gpu/context.js';
import { allocateMoeActivations, decodeDown, decodeGlu, fusedDecode, uploadMoeLayer } from '../../src/kernels/gpu/moe.js';
import { GpuKernels, StepUniform, submit } from '../../src/kernels/gpu/ops.js';
import { dequantizeRow } from '../../src/kernels/wasm/quant-reference.js';
import { weightBytes } from '../../src/kernels/wasm/formats.js';
import type { ExpertWeights, MoeWeights } from '../../src/model/weights-moe.js';
import { Prng } from '../../src/numeric/prng.js';
import { randomF32, widen } from './cpu-ref.js';
import { openTestGpu } from './gpu-env.js';
import { quantizedWeight } from './quant-weight.js';

const gpu = await openTestGpu();
const ctx = gpu.ctx as GpuContext;
const layouts = gpu.ctx ? [new GpuKernels(ctx), new GpuKernels(ctx, { matvec: { lanes: 32, subgroups: false } })] : [];
const step = gpu.ctx ? new StepUniform(ctx) : (null as unknown as StepUniform);
afterAll(() => {
  for (const k of layouts) k.destroy();
  step?.destroy();
  gpu.ctx?.destroy();
});

const E = 5;
const FIRST = 1; // the buffer holds experts [1, 4) of 5
const HELD = 3;

/** [dtype, gate/up [rows, cols], down [rows, cols], biases + clamped SwiGLU] */
const CASES: [DType, [number, number], [number, number], boolean][] = [
  ['mlx4_g64_bf16', [22, 128], [37, 64], false],
  ['mlx4_g32_bf16', [22, 64], [37, 32], true],
  ['mlx8_g32_f32', [22, 64], [37, 32], false],
  // 136 columns: a short last 128-block
  ['fp8_e4m3', [22, 136], [37, 24], false],
  ['q4_0', [22, 64], [37, 32], false],
  ['bf16', [22, 40], [37, 24], true],
];

const dense = (w: Weight): Float64Array => {
  if (w.dtype === 'f32' || w.dtype === 'f16' || w.dtype === 'bf16') return Float64Array.from(widen(w));
  const out = new Float64Array(w.rows * w.cols);
  const row = new Float32Array(w.cols);
  for (let r = 0; r < w.rows; r++) {
    dequantizeRow(w.dtype, w.bytes, w.cols, r, row);
    out.set(row, r * w.cols);
  }
  return out;
};

/** An FP8 weight whose codes are the small ones (exponent field 0 or 1: subnormals, zeros, both signs), scale 1. */
function smallFp8(rows: number, cols: number, rng: Prng): Weight {
  const nb = Math.ceil(cols / 128);
  const bytes = new Uint8Array(weightBytes('fp8_e4m3', rows, cols));
  const dv = new DataView(bytes.buffer);
  for (let r = 0; r < rows; r++) {
    const o = r * (nb * 4 + cols);
    for (let b = 0; b < nb; b++) dv.setFloat32(o + 4 * b, 1, true);
    for (let c = 0; c < cols; c++) bytes[o + nb * 4 + c] = Math.floor(rng.next() * 16) | (rng.next() < 0.5 ? 0x80 : 0);
  }
  return { dtype: 'fp8_e4m3', rows, cols, bytes };
}

/** |got − want| within 1e-5 of the sum of the terms' magnitudes (plus a tiny floor), per output. */
function expectClose(got: Float32Array, want: Float64Array, mag: Float64Array, what: string) {
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i] - want[i]);
    if (!(err <= 1e-5 * mag[i] + 1e-30)) expect.fail(`${what}: element ${i}: got ${got[i]}, want ${want[i]} (terms' magnitude ${mag[i]})`);
  }
}

describe.skipIf(!gpu.ctx)(`GPU MoE decode: fused expert kernels against the CPU${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  for (const [dtype, [I, D], [Dd, Id], biased] of CASES) {
    it(`${dtype}: gate+up [${I}x${D}], down [${Dd}x${Id}]${biased ? ', biases, clamped SwiGLU' : ''}`, async () => {
      const rng = new Prng(I * D + dtype.length);
      const w = (rows: number, cols: number) => quantizedWeight(dtype, randomF32(rows * cols, rng), rows, cols);
      const experts: ExpertWeights[] = Array.from({ length: HELD }, (_, e) => ({
        gate: w(I, D),
        up: w(I, D),
        // one FP8 expert of small codes only: a wrong subnormal or sign decode is not hidden under large values
        down: dtype === 'fp8_e4m3' && e === 1 ? smallFp8(Dd, Id, rng) : w(Dd, Id),
        gateBias: biased ? randomF32(I, rng) : null,
        upBias: biased ? randomF32(I, rng) : null,
        downBias: biased ? randomF32(Dd, rng) : null,
      }));
      const mw: MoeWeights = { kind: 'moe', router: quantizedWeight('f32', randomF32(E * D, rng), E, D), routerBias: null, correctionBias: null, firstExpert: FIRST, experts, shared: null };
      const layer = await uploadMoeLayer(ctx, mw, `moe decode ${dtype}`);
      expect(fusedDecode(layer, layer.gate.cols, layer.down.cols), 'the fused kernels take this format').toBe(true);
      const G = experts.map((e) => [dense(e.gate), dense(e.up), dense(e.down)]);
      const limit = 1.5;
      for (const k of [1, 3]) {
        for (const n of [1, 2]) {
          const moe = { experts: E, topK: k, expertIntermediate: Math.max(I, Id), activation: biased ? 'clamped-swiglu' : 'swiglu', swigluLimit: biased ? limit : Infinity } as MoeConfig;
          // Token b's experts: held ones and, at k = 3, one of another buffer's (0 or 4), never the same twice.
          const ids = Array.from({ length: n * k }, (_, s) => [[2 + (s % 2)], [1, 4, 3], [3, 2, 0]][k === 1 ? 0 : 1 + Math.floor(s / k)][s % k]);
          const wts = Float32Array.from({ length: n * k }, () => 0.1 + rng.next());
          const x = randomF32(n * D, rng);
          const h = randomF32(n * k * Id, rng);
          const init = randomF32(n * Dd, rng);
          for (const K of layouts) {
            const what = `${dtype}, k ${k}, ${n} token(s), ${K.matvec.lanes} lanes${K.matvec.subgroups ? ' + subgroupAdd' : ''}`;
            const act = await allocateMoeActivations(ctx, moe, Math.max(D, Dd), 0, 2);
            ctx.device.queue.writeBuffer(act.ids, 0, Uint32Array.from(ids));
            ctx.device.queue.writeBuffer(act.weights, 0, wts);
            const SENTINEL = 12345;
            ctx.device.queue.writeBuffer(act.gate, 0, new Float32Array(n * k * I).fill(SENTINEL));
            const xb = await uploadF32(ctx, x, 'x');
            step.write(ctx, 0, n, 0);
            submit(ctx, decodeGlu(K, layer, moe, act, xb, step), n);
            const gotH = await readF32(ctx, act.gate, n * k * I);
            const wantH = new Float64Array(n * k * I);
            const magH = new Float64Array(n * k * I);
            for (let s = 0; s < n * k; s++) {
              const e = ids[s] - FIRST;
              for (let r = 0; r < I; r++) {
                const i = s * I + r;
                if (e < 0 || e >= HELD) {
                  wantH[i] = SENTINEL; // another buffer's expert: left alone
                  magH[i] = 0;
                  continue;
                }
                let g = biased ? experts[e].gateBias![r] : 0;
                let u = biased ? experts[e].upBias![r] : 0;
                let mg = Math.abs(g);
                let mu = Math.abs(u);
                for (let c = 0; c < D; c++) {
                  const xv = x[Math.floor(s / k) * D + c];
                  g += G[e][0][r * D + c] * xv;
                  u += G[e][1][r * D + c] * xv;
                  mg += Math.abs(G[e][0][r * D + c] * xv);
                  mu += Math.abs(G[e][1][r * D + c] * xv);
                }
                const silu = (v: number, a: number) => v / (1 + Math.exp(-a * v));
                if (biased) {
                  const gc = Math.min(g, limit);
                  wantH[i] = (Math.max(-limit, Math.min(limit, u)) + 1) * silu(gc, 1.702);
                } else wantH[i] = silu(g, 1) * u;
                // the activation's slope is at most ~1.1 per unit of g (times |u|) and |silu(g)| per unit of u
                magH[i] = mg * (Math.abs(u) + 2) * 1.2 + mu * (Math.abs(g) + 1);
              }
            }
            expectClose(gotH, wantH, magH, `${what}: gate+up`);
            // down over the given activations, weighted into the output, with and without accumulate
            ctx.device.queue.writeBuffer(act.gate, 0, h);
            for (const accumulate of [true, false]) {
              const out = await createStorage(ctx, n * Dd * 4, 'out');
              ctx.device.queue.writeBuffer(out, 0, init);
              submit(ctx, decodeDown(K, layer, moe, act, out, accumulate, step), n);
              const got = await readF32(ctx, out, n * Dd);
              const want = new Float64Array(n * Dd);
              const mag = new Float64Array(n * Dd);
              for (let b = 0; b < n; b++) {
                for (let r = 0; r < Dd; r++) {
                  let acc = accumulate ? init[b * Dd + r] : 0;
                  let m = Math.abs(acc);
                  for (let j = 0; j < k; j++) {
                    const s = b * k + j;
                    const e = ids[s] - FIRST;
                    if (e < 0 || e >= HELD) continue;
                    let y = biased ? experts[e].downBias![r] : 0;
                    let my = Math.abs(y);
                    for (let c = 0; c < Id; c++) {
                      y += G[e][2][r * Id + c] * h[s * Id + c];
                      my += Math.abs(G[e][2][r * Id + c] * h[s * Id + c]);
                    }
                    acc += wts[s] * y;
                    m += wts[s] * my;
                  }
                  want[b * Dd + r] = acc;
                  mag[b * Dd + r] = m;
                }
              }
              expectClose(got, want, mag, `${what}: down, accumulate ${accumulate}`);
              out.destroy();
            }
            xb.destroy();
            for (const b of Object.values(act)) b.destroy();
          }
        }
      }
      layer.uploads.destroy();
    }, 300_000);
  }
});
