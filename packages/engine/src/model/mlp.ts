/** The SwiGLU MLP, shared by dense layers, routed experts and shared experts. */
import { type Backend, matmuls } from '../kernels/backend.js';
import { swiglu } from './math.js';
import type { DenseMlpWeights } from './weights.js';

/**
 * out[n, hidden] = down(silu(gate(x))·up(x)) for x[n, hidden]; hb and hb2 are scratch of n·rows(gate).
 * On a tensor rank the result is a partial sum over its intermediate rows.
 */
export function swigluMlp(be: Backend, out: Float32Array, x: Float32Array, n: number, w: Pick<DenseMlpWeights, 'gate' | 'up' | 'down'>, hb: Float32Array, hb2: Float32Array): void {
  const ffn = w.gate.rows;
  matmuls(be, [{ out: hb, w: w.gate }, { out: hb2, w: w.up }], x, n);
  applySwiglu(be, hb, hb2, n * ffn);
  be.matmul(out, w.down, hb, n);
}

/** a[i] = silu(a[i])·b[i] for i < n: the backend's kernel where it has one, else the reference loop. */
export function applySwiglu(be: Backend, a: Float32Array, b: Float32Array, n: number): void {
  if (be.swiglu) be.swiglu(a, b, n);
  else swiglu(a, b, n);
}
