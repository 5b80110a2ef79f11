/**
 * Symmetric int8 quantization of activations per block, the one step ggml's Q8_0 (32 columns) and
 * Q8_K (256 columns) activations share: q = round-half-even(x · 127/amax). The two differ only in the
 * scale they keep (Q8_0 an f16 of amax/127, Q8_K 1/(127/amax) in f32), which their callers derive.
 */
const fround = Math.fround;

/** Round to nearest, ties to even (the rounding of ggml's vectorized quantizers). */
export function roundHalfEven(v: number): number {
  const r = Math.round(v);
  return Math.abs(v - Math.trunc(v)) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

export interface Int8Blocks {
  /** Integer values, one per column. */
  q: Int32Array;
  /** Largest |x| per block. */
  amax: Float32Array;
  /** levels/amax per block in f32 (0 for an all-zero block). */
  iscale: Float32Array;
}

/**
 * Quantizes `x[offset, offset + cols)` to int8 per `block` columns (cols a multiple of block); `levels`
 * other than 127 gives the wider integers of FP8 prompt batches (±16383).
 */
export function quantizeInt8Blocks(x: Float32Array, offset: number, cols: number, block: number, levels = 127): Int8Blocks {
  const nb = cols / block;
  const q = new Int32Array(cols);
  const amax = new Float32Array(nb);
  const iscale = new Float32Array(nb);
  for (let b = 0; b < nb; b++) {
    let m = 0;
    for (let j = 0; j < block; j++) m = Math.max(m, Math.abs(x[offset + b * block + j]));
    amax[b] = m;
    if (m === 0) continue;
    // 127/amax (not 1/d): llama.cpp's x86 quantizers, which the end-to-end comparisons run.
    const id = fround(levels / m);
    iscale[b] = id;
    for (let j = 0; j < block; j++) q[b * block + j] = roundHalfEven(fround(x[offset + b * block + j] * id));
  }
  return { q, amax, iscale };
}
