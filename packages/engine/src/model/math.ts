/** Small kernels the forward pass keeps in plain TypeScript (norms, activations, attention). */
import type { AttentionArgs, Backend } from '../kernels/backend.js';

/** out[o..o+n) = x[xo..xo+n) / rms(x) · weight. Sum of squares in f64. */
export function rmsnorm(out: Float32Array, oo: number, x: Float32Array, xo: number, weight: Float32Array, n: number, eps: number): void {
  let ss = 0;
  for (let i = 0; i < n; i++) ss += x[xo + i] * x[xo + i];
  const scale = 1 / Math.sqrt(ss / n + eps);
  for (let i = 0; i < n; i++) out[oo + i] = weight[i] * (x[xo + i] * scale);
}

/** rmsnorm over n contiguous rows of dim values (out and x [n, dim]), in the backend's kernel when it has one. */
export function rmsnormRows(be: Backend, out: Float32Array, x: Float32Array, weight: Float32Array, n: number, dim: number, eps: number): void {
  if (be.rmsnorm) be.rmsnorm(out, x, weight, n, dim, eps);
  else for (let b = 0; b < n; b++) rmsnorm(out, b * dim, x, b * dim, weight, dim, eps);
}

/** x[i] += y[i] for i < n: the residual stream. */
export function addInto(be: Backend, x: Float32Array, y: Float32Array, n: number): void {
  if (be.add) be.add(x, y, n);
  else for (let i = 0; i < n; i++) x[i] += y[i];
}

/** In place over x[o..o+n): exp(x - max) / Σ. */
export function softmax(x: Float32Array, o: number, n: number): void {
  let max = -Infinity;
  for (let i = 0; i < n; i++) if (x[o + i] > max) max = x[o + i];
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const e = Math.exp(x[o + i] - max);
    x[o + i] = e;
    sum += e;
  }
  for (let i = 0; i < n; i++) x[o + i] /= sum;
}

/** silu(a) · b, element-wise into a. */
export function swiglu(a: Float32Array, b: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) {
    const g = a[i];
    a[i] = (g / (1 + Math.exp(-g))) * b[i];
  }
}

/**
 * The reference attention (contract in kernels/backend.ts): for each new query b at position
 * pos0 + b and each local head h, softmax over the visible cached positions of q·k·scale, then the
 * probability-weighted sum of v. `scores` is scratch of at least (pos0 + n) floats. `sinks` (gpt-oss,
 * one logit per local head) join each softmax's denominator and take no value.
 */
export function attention(a: AttentionArgs, scores: Float32Array, sinks: Float32Array | null = null): void {
  const { out, q, k, v, n, pos0, heads, kvHeads, headDim: hd, group, scale } = a;
  const headOffset = a.headOffset ?? 0;
  const kvOffset = a.kvOffset ?? 0;
  const window = a.window ?? 0;
  const qw = heads * hd;
  const kvw = kvHeads * hd;
  for (let b = 0; b < n; b++) {
    const pos = pos0 + b;
    const first = window > 0 ? Math.max(0, pos - window + 1) : 0;
    const len = pos - first + 1;
    for (let h = 0; h < heads; h++) {
      const qo = b * qw + h * hd;
      const kvo = (Math.floor((h + headOffset) / group) - kvOffset) * hd;
      for (let t = first; t <= pos; t++) {
        const ko = t * kvw + kvo;
        let s = 0;
        for (let i = 0; i < hd; i++) s += q[qo + i] * k[ko + i];
        scores[t - first] = s * scale;
      }
      if (sinks) softmaxWithSink(scores, len, sinks[h]);
      else softmax(scores, 0, len);
      out.fill(0, qo, qo + hd);
      for (let t = first; t <= pos; t++) {
        const p = scores[t - first];
        const vo = t * kvw + kvo;
        for (let i = 0; i < hd; i++) out[qo + i] += p * v[vo + i];
      }
    }
  }
}

/** softmax over x[0..n) and one more logit `sink` that is then dropped: the n probabilities sum below 1. */
function softmaxWithSink(x: Float32Array, n: number, sink: number): void {
  let max = sink;
  for (let i = 0; i < n; i++) if (x[i] > max) max = x[i];
  let sum = Math.exp(sink - max);
  for (let i = 0; i < n; i++) {
    const e = Math.exp(x[i] - max);
    x[i] = e;
    sum += e;
  }
  for (let i = 0; i < n; i++) x[i] /= sum;
}
