import { createWasmBackend } from '../src/kernels/wasm/backend.js';
import { quantizeK } from '../src/quant/kquants.js';
import { packMlx, quantizeMlx } from '../src/quant/mlx.js';
import { quantizeQ4_0 } from '../src/kernels/wasm/quant-reference.js';
import { mlxDType, weightBytes } from '../src/kernels/wasm/formats.js';
import { f32ToBf16Bits } from '../src/numeric/half.js';
import type { Weight } from '../src/kernels/backend.js';
const be = createWasmBackend({ threads: 1, initialBytes: 512 << 20 });
const rows = 2304 * 8, cols = 768;
const vals = Float32Array.from({ length: rows * cols }, (_, i) => Math.sin(i * 0.37) * (1 + (i % 7)));
function mk(dt: string, pack: boolean): Weight {
  let w: Weight;
  if (dt === 'mlx4') {
    const layout = { bits: 4 as const, groupSize: 64 as const, scales: 'bf16' as const };
    const { words, scales, biases } = quantizeMlx(vals, rows, cols, layout);
    const st = (v: Float32Array) => new Uint8Array(Uint16Array.from(v, f32ToBf16Bits).buffer);
    const bytes = be.allocBytes(weightBytes(mlxDType(layout), rows, cols));
    packMlx(new Uint8Array(words.buffer), st(scales), st(biases), rows, cols, layout, bytes);
    w = { dtype: mlxDType(layout), rows, cols, bytes };
  } else {
    const q = dt === 'q4_0' ? quantizeQ4_0(vals, rows, cols) : quantizeK('q4_k', vals, rows, cols);
    const bytes = be.allocBytes(q.length); bytes.set(q);
    w = { dtype: dt as 'q4_0', rows, cols, bytes };
  }
  if (pack) be.packWeight(w);
  return w;
}
const x = be.allocF32(cols * 64); for (let i = 0; i < x.length; i++) x[i] = Math.cos(i);
const out = be.allocF32(rows * 64);
for (const [dt, pack] of [['q4_0', true], ['q4_k', true], ['mlx4', true], ['mlx4', false]] as const) {
  const w = mk(dt, pack);
  let best = Infinity;
  for (let r = 0; r < 30; r++) { const t0 = performance.now(); be.matvec(out, w, x); best = Math.min(best, performance.now() - t0); }
  let bestB = Infinity;
  for (let r = 0; r < 3; r++) { const t0 = performance.now(); be.matmul(out, w, x, 64); bestB = Math.min(bestB, performance.now() - t0); }
  console.log(`${dt}${pack ? ' packed' : ''}: matvec ${(w.bytes.length / best / 1e6).toFixed(1)} GB/s, ${(rows * cols / best / 1e6).toFixed(1)} Gw/s; 64-token matmul ${(rows*cols*64/bestB/1e6).toFixed(1)} Gw/s`);
}
be.dispose();
