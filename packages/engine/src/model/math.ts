/** Small element-wise kernels the forward pass keeps in plain TypeScript (norms, activations). */

/** out[o..o+n) = x[xo..xo+n) / rms(x) · weight. Sum of squares in f64. */
export function rmsnorm(out: Float32Array, oo: number, x: Float32Array, xo: number, weight: Float32Array, n: number, eps: number): void {
  let ss = 0;
  for (let i = 0; i < n; i++) ss += x[xo + i] * x[xo + i];
  const scale = 1 / Math.sqrt(ss / n + eps);
  for (let i = 0; i < n; i++) out[oo + i] = weight[i] * (x[xo + i] * scale);
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
