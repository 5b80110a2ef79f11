/**
 * The attention kernel against the forward pass's own loop (scores in f64, softmax from model/math.ts,
 * weighted V sum in f32), over random shapes: GQA groups, tensor-slice offsets, sliding windows,
 * batches of new tokens, head sizes with SIMD tails.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { softmax, swiglu } from '../../src/model/math.js';
import { Prng } from '../../src/numeric/prng.js';
import { type AttentionArgs, type WasmBackend, createWasmBackend } from '../../src/kernels/wasm/backend.js';

const backends: WasmBackend[] = [];
afterAll(() => backends.forEach((b) => b.dispose()));

/** The forward pass's attention loop (packages/engine/src/model/forward.ts), restated. */
function referenceAttention(a: AttentionArgs): Float32Array {
  const { n, pos0, heads, kvHeads, headDim: hd, group, scale } = a;
  const headOffset = a.headOffset ?? 0;
  const kvOffset = a.kvOffset ?? 0;
  const qw = heads * hd;
  const kvw = kvHeads * hd;
  const out = new Float32Array(n * qw);
  const scores = new Float32Array(pos0 + n);
  for (let b = 0; b < n; b++) {
    const pos = pos0 + b;
    const first = a.window ? Math.max(0, pos - a.window + 1) : 0;
    const len = pos - first + 1;
    for (let h = 0; h < heads; h++) {
      const qo = b * qw + h * hd;
      const kvo = (Math.floor((h + headOffset) / group) - kvOffset) * hd;
      for (let t = first; t <= pos; t++) {
        let s = 0;
        for (let i = 0; i < hd; i++) s += a.q[qo + i] * a.k[t * kvw + kvo + i];
        scores[t - first] = s * scale;
      }
      softmax(scores, 0, len);
      for (let t = first; t <= pos; t++) {
        const p = scores[t - first];
        for (let i = 0; i < hd; i++) out[qo + i] += p * a.v[t * kvw + kvo + i];
      }
    }
  }
  return out;
}

describe.each([1, 2])('wasm attention, %i thread(s)', (threads) => {
  const be = createWasmBackend({ threads, parallelThreshold: 0, initialBytes: 4 << 20 });
  backends.push(be);

  it('equals the forward pass loop over random shapes', () => {
    const rng = new Prng(2024 + threads);
    const pick = <T>(xs: T[]) => xs[Math.floor(rng.next() * xs.length)];
    for (let trial = 0; trial < 40; trial++) {
      const hd = pick([1, 3, 4, 8, 13, 16, 32, 64]);
      const kvHeads = pick([1, 2, 3]);
      const group = pick([1, 2, 3]);
      // A tensor-parallel slice: a contiguous run of query heads whose KV heads are local.
      const sliceKv0 = kvHeads > 1 && rng.next() < 0.5 ? 1 : 0;
      const headOffset = sliceKv0 * group;
      const heads = (kvHeads - sliceKv0) * group;
      const n = pick([1, 1, 2, 5]);
      const pos0 = pick([0, 1, 7, 30]);
      const window = rng.next() < 0.3 ? pick([1, 4, 9]) : 0;
      const len = pos0 + n;
      const localKv = kvHeads - sliceKv0;
      const q = be.allocF32(n * heads * hd);
      const k = be.allocF32(len * localKv * hd);
      const v = be.allocF32(len * localKv * hd);
      for (const a of [q, k, v]) for (let i = 0; i < a.length; i++) a[i] = rng.symmetric(2);
      const out = be.allocF32(n * heads * hd);
      out.fill(7);
      const args: AttentionArgs = {
        out, q, k, v, n, pos0, heads, kvHeads: localKv, headDim: hd, group, headOffset, kvOffset: sliceKv0,
        scale: 1 / Math.sqrt(hd), window,
      };
      be.attention(args);
      const expected = referenceAttention(args);
      // Outputs are convex combinations of v (|v| ≤ 2): scores differ by f32 summation order
      // (≤ hd·2^-24 relative), which moves the softmax weights by about that much.
      for (let i = 0; i < expected.length; i++) {
        expect(Math.abs(out[i] - expected[i]), `trial ${trial} out[${i}] hd=${hd} heads=${heads} n=${n} pos0=${pos0} window=${window}`).toBeLessThanOrEqual(2e-5);
      }
    }
  });

  it('rejects heads that map outside the local KV heads', () => {
    const q = be.allocF32(8);
    const kv = be.allocF32(8);
    expect(() =>
      be.attention({ out: be.allocF32(8), q, k: kv, v: kv, n: 1, pos0: 0, heads: 4, kvHeads: 1, headDim: 2, group: 2, scale: 1 }),
    ).toThrow(/map to KV heads outside 0..0/);
  });
});

describe('exp used by softmax', () => {
  // The f32 SIMD exp (Cephes expf): within 2 f32 ulp (2·2^-23 relative) of exp of the f32 argument on
  // [-87, 0]; below its clamp at -87.3 it returns e^-87.3 ≈ 1.2e-38 (the softmax's largest term is 1).
  it('matches Math.exp within 2 f32 ulp on [-87, 0]', () => {
    const be = createWasmBackend({ threads: 1, initialBytes: 1 << 20 });
    backends.push(be);
    const exp = (be as unknown as { expNeg(x: number): number }).expNeg;
    for (let x = -87; x <= 0; x += 0.0137) {
      const want = Math.exp(Math.fround(x));
      expect(Math.abs(exp(x) - want)).toBeLessThanOrEqual(2 * 2 ** -23 * want);
    }
    expect(exp(-200)).toBeLessThanOrEqual(1.3e-38);
  });
});

describe('swiglu', () => {
  it('equals model/math.ts swiglu within 4 f32 ulp (+1e-30) over a wide range, tails included', () => {
    const be = createWasmBackend({ threads: 1, initialBytes: 1 << 20 });
    backends.push(be);
    const rng = new Prng(9);
    for (const n of [0, 1, 3, 4, 5, 17, 1000]) {
      const a = be.allocF32(n);
      const b = be.allocF32(n);
      for (let i = 0; i < n; i++) {
        // Gates from −120 to 120 (both clamps of the exp), ups of either sign.
        a[i] = i % 7 === 0 ? rng.symmetric(120) : rng.symmetric(8);
        b[i] = rng.symmetric(3);
      }
      const expected = a.slice();
      swiglu(expected, b.slice(), n);
      be.swiglu(a, b, n);
      for (let i = 0; i < n; i++) {
        expect(Math.abs(a[i] - expected[i]), `n=${n} i=${i}`).toBeLessThanOrEqual(4 * 2 ** -23 * Math.abs(expected[i]) + 1e-30);
      }
    }
  });

  it('a long batch split over threads gives the one-thread bits, every span and tail included', () => {
    const one = createWasmBackend({ threads: 1, initialBytes: 1 << 20 });
    // a tiny threshold so even short batches run as a job of many spans
    const two = createWasmBackend({ threads: 2, initialBytes: 1 << 20, parallelThreshold: 64 });
    backends.push(one, two);
    const rng = new Prng(10);
    for (const n of [4, 7, 64, 999, 10_007]) {
      const gate = Float32Array.from({ length: n }, () => rng.symmetric(10));
      const up = Float32Array.from({ length: n }, () => rng.symmetric(3));
      const [a1, b1, a2, b2] = [one.allocF32(n), one.allocF32(n), two.allocF32(n + 5), two.allocF32(n)];
      a1.set(gate), b1.set(up), a2.set(gate), b2.set(up);
      a2.fill(7, n);
      one.swiglu(a1, b1, n);
      two.swiglu(a2, b2, n);
      expect(a2.subarray(0, n), `n=${n}`).toEqual(a1);
      expect([...a2.subarray(n)], `n=${n}: past the end`).toEqual([7, 7, 7, 7, 7]);
    }
  });
});
