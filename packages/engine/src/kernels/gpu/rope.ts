/**
 * RoPE frequencies and the per-batch cos/sin table the `rope` kernel reads. Angles are computed on the
 * CPU in double precision: GPU sin/cos lose accuracy at the large angles of long positions, and the
 * table costs only n · headDim floats per submission.
 */
export interface RopeScalingSpec {
  type: 'llama3' | 'linear';
  factor: number;
  lowFreqFactor?: number;
  highFreqFactor?: number;
  originalMaxPositionEmbeddings?: number;
}

/** inv_freq[j] = theta^(-2j/headDim), with Hugging Face's llama3 or linear scaling applied. */
export function ropeInvFreq(headDim: number, theta: number, scaling: RopeScalingSpec | null = null): Float64Array {
  const half = headDim / 2;
  const inv = new Float64Array(half);
  for (let j = 0; j < half; j++) inv[j] = 1 / theta ** ((2 * j) / headDim);
  if (!scaling) return inv;
  if (scaling.type === 'linear') return inv.map((f) => f / scaling.factor);
  const { factor } = scaling;
  const low = scaling.lowFreqFactor ?? 1;
  const high = scaling.highFreqFactor ?? 4;
  const oldCtx = scaling.originalMaxPositionEmbeddings ?? 8192;
  const lowWavelen = oldCtx / low;
  const highWavelen = oldCtx / high;
  return inv.map((f) => {
    const wavelen = (2 * Math.PI) / f;
    if (wavelen < highWavelen) return f;
    if (wavelen > lowWavelen) return f / factor;
    const smooth = (oldCtx / wavelen - low) / (high - low);
    return (1 - smooth) * (f / factor) + smooth * f;
  });
}

/** [n, headDim/2, 2] cos/sin for positions pos0 .. pos0 + n - 1, written into `out` (or a new array). */
export function ropeCosSin(pos0: number, n: number, invFreq: Float64Array, out?: Float32Array): Float32Array {
  const half = invFreq.length;
  const t = out ?? new Float32Array(n * half * 2);
  for (let b = 0; b < n; b++) {
    for (let j = 0; j < half; j++) {
      const a = (pos0 + b) * invFreq[j];
      t[(b * half + j) * 2] = Math.cos(a);
      t[(b * half + j) * 2 + 1] = Math.sin(a);
    }
  }
  return t;
}
