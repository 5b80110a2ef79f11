/**
 * A [rows, cols] weight of given values in a storage dtype's own bits, as the loaders keep it: what the
 * GPU kernel tests upload (the quantizers are the engine's reference ones).
 */
import type { DType, Weight } from '../../src/kernels/backend.js';
import { type MlxLayout, mlxDType, weightBytes } from '../../src/kernels/wasm/formats.js';
import { quantizeQ4_0, quantizeQ8_0 } from '../../src/kernels/wasm/quant-reference.js';
import { f32ToBf16Bits, f32ToF16Bits } from '../../src/numeric/half.js';
import { packFp8, quantizeFp8Blocks } from '../../src/quant/fp8.js';
import { quantizeK } from '../../src/quant/kquants.js';
import { packMlx, quantizeMlx } from '../../src/quant/mlx.js';
import { quantizeMxfp4 } from '../../src/quant/mxfp4.js';

export function quantizedWeight(dtype: DType, v: Float32Array, rows: number, cols: number): Weight {
  if (dtype === 'f32') return { dtype, rows, cols, bytes: new Uint8Array(Float32Array.from(v).buffer) };
  if (dtype === 'f16' || dtype === 'bf16') return { dtype, rows, cols, bytes: new Uint8Array(Uint16Array.from(v, dtype === 'f16' ? f32ToF16Bits : f32ToBf16Bits).buffer) };
  if (dtype === 'q8_0') return { dtype, rows, cols, bytes: quantizeQ8_0(v, rows, cols) };
  if (dtype === 'q4_0') return { dtype, rows, cols, bytes: quantizeQ4_0(v, rows, cols) };
  if (dtype === 'q4_k' || dtype === 'q5_k' || dtype === 'q6_k') return { dtype, rows, cols, bytes: quantizeK(dtype, v, rows, cols) };
  if (dtype === 'mxfp4') return { dtype, rows, cols, bytes: quantizeMxfp4(v, rows, cols) };
  if (dtype === 'fp8_e4m3') {
    const { codes, scaleInv } = quantizeFp8Blocks(v, rows, cols);
    const bytes = new Uint8Array(weightBytes(dtype, rows, cols));
    packFp8(codes, scaleInv, rows, cols, bytes);
    return { dtype, rows, cols, bytes };
  }
  const m = /^mlx(\d)_g(\d+)_(\w+)$/.exec(dtype);
  if (!m) throw new Error(`quantizedWeight: no writer for ${dtype}`);
  const layout = { bits: Number(m[1]), groupSize: Number(m[2]), scales: m[3] } as MlxLayout;
  const { words, scales, biases } = quantizeMlx(v, rows, cols, layout);
  const store = (a: Float32Array) =>
    layout.scales === 'f32' ? new Uint8Array(a.buffer) : new Uint8Array(Uint16Array.from(a, layout.scales === 'f16' ? f32ToF16Bits : f32ToBf16Bits).buffer);
  const bytes = new Uint8Array(weightBytes(mlxDType(layout), rows, cols));
  packMlx(new Uint8Array(words.buffer), store(scales), store(biases), rows, cols, layout, bytes);
  return { dtype: mlxDType(layout), rows, cols, bytes };
}
