/**
 * Element-wise reducers for f32 and f16 (IEEE half bits in a Uint16Array). Pure, allocation-free.
 * f16 values are widened to f32, combined, and rounded back to nearest-even.
 */
import type { ReduceOp, ReducibleBuffer } from '../group.js';
import { addF32 } from './simd.js';

export type ElementKind = 'f32' | 'f16';

export function elementKind(buf: ReducibleBuffer): ElementKind {
  return buf instanceof Float32Array ? 'f32' : 'f16';
}

const HALF_TO_FLOAT = (() => {
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const mant = h & 0x3ff;
    if (exp === 0) t[h] = sign * mant * 2 ** -24;
    else if (exp === 31) t[h] = mant ? NaN : sign * Infinity;
    else t[h] = sign * (1 + mant / 1024) * 2 ** (exp - 15);
  }
  return t;
})();

export function halfToFloat(h: number): number {
  return HALF_TO_FLOAT[h & 0xffff];
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Rounds a number to the nearest f16 (ties to even) and returns its bits. */
export function floatToHalf(v: number): number {
  f32[0] = v;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++;
  return sign | h;
}

/** `dst[i] = a[i] op b[i]` for i in [start, end). `dst` may alias `a` or `b`. */
export function combine(op: ReduceOp, dst: ReducibleBuffer, a: ReducibleBuffer, b: ReducibleBuffer, start: number, end: number, bOffset = 0): void {
  const d = bOffset - start;
  if (dst instanceof Float32Array) {
    const x = a as Float32Array;
    const y = b as Float32Array;
    if (op === 'sum') addF32(dst, start, x, start, y, bOffset, end - start);
    else if (op === 'max') for (let i = start; i < end; i++) dst[i] = Math.max(x[i], y[i + d]);
    else for (let i = start; i < end; i++) dst[i] = Math.min(x[i], y[i + d]);
    return;
  }
  const t = HALF_TO_FLOAT;
  if (op === 'sum') for (let i = start; i < end; i++) dst[i] = floatToHalf(t[a[i]] + t[b[i + d]]);
  else if (op === 'max') for (let i = start; i < end; i++) dst[i] = floatToHalf(Math.max(t[a[i]], t[b[i + d]]));
  else for (let i = start; i < end; i++) dst[i] = floatToHalf(Math.min(t[a[i]], t[b[i + d]]));
}

/**
 * Reduces `sources` (one per rank, in rank order, all indexed like the output) over [start, end)
 * into `out`, strictly left to right: ((s0 op s1) op s2) ... The order never depends on arrival,
 * so every rank computes bit-identical results. `acc` is an f32 scratch of at least end-start
 * elements; f16 inputs are accumulated in f32 and rounded once. `out` may be one of the sources.
 */
export function reduceInRankOrder(
  op: ReduceOp,
  out: ReducibleBuffer,
  sources: ReducibleBuffer[],
  start: number,
  end: number,
  acc: Float32Array,
): void {
  if (out instanceof Float32Array) reduceF32(op, out, sources as Float32Array[], start, end, acc);
  else reduceF16(op, out, sources as Uint16Array[], start, end, acc);
}

// Separate monomorphic loops: V8 keeps each one specialised to a single array type.
function reduceF32(op: ReduceOp, out: Float32Array, sources: Float32Array[], start: number, end: number, acc: Float32Array): void {
  if (sources.length === 2) {
    // Element-wise, so safe in place even when out is a source.
    const a = sources[0];
    const b = sources[1];
    if (op === 'sum') addF32(out, start, a, start, b, start, end - start);
    else if (op === 'max') for (let i = start; i < end; i++) out[i] = Math.max(a[i], b[i]);
    else for (let i = start; i < end; i++) out[i] = Math.min(a[i], b[i]);
    return;
  }
  const n = end - start;
  const s0 = sources[0];
  for (let i = 0; i < n; i++) acc[i] = s0[start + i];
  for (let r = 1; r < sources.length; r++) {
    const s = sources[r];
    if (op === 'sum') addF32(acc, 0, acc, 0, s, start, n);
    else if (op === 'max') for (let i = 0; i < n; i++) acc[i] = Math.max(acc[i], s[start + i]);
    else for (let i = 0; i < n; i++) acc[i] = Math.min(acc[i], s[start + i]);
  }
  out.set(acc.subarray(0, n), start);
}

function reduceF16(op: ReduceOp, out: Uint16Array, sources: Uint16Array[], start: number, end: number, acc: Float32Array): void {
  const t = HALF_TO_FLOAT;
  const n = end - start;
  const s0 = sources[0];
  for (let i = 0; i < n; i++) acc[i] = t[s0[start + i]];
  for (let r = 1; r < sources.length; r++) {
    const s = sources[r];
    if (op === 'sum') for (let i = 0; i < n; i++) acc[i] += t[s[start + i]];
    else if (op === 'max') for (let i = 0; i < n; i++) acc[i] = Math.max(acc[i], t[s[start + i]]);
    else for (let i = 0; i < n; i++) acc[i] = Math.min(acc[i], t[s[start + i]]);
  }
  for (let i = 0; i < n; i++) out[start + i] = floatToHalf(acc[i]);
}
