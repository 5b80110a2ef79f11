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
const u32 = new Int32Array(f32.buffer);

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

/**
 * out[o + i] = floatToHalf(f[i]) for i in [0, n), where `bits` views the same memory as `f` as
 * u32. Normal results take a branch-light path (rebias, round to nearest even by adding
 * 0xfff + lsb, shift) and zeros keep their sign; subnormals, overflow, infinities and NaN take
 * floatToHalf.
 * ~10x faster than calling floatToHalf per element.
 */
export function toHalfBulk(out: Uint16Array, o: number, f: Float32Array, bits: Int32Array, n: number): void {
  for (let i = 0; i < n; i++) {
    const x = bits[i];
    const v = x & 0x7fffffff;
    // 2^-14 <= |x| < 65536: the result is a normal half (or rounds up to infinity correctly).
    if (((v - 0x38800000) >>> 0) < 0x47800000 - 0x38800000) {
      const w = v - 0x38000000;
      out[o + i] = ((x >>> 16) & 0x8000) | ((w + 0xfff + ((w >>> 13) & 1)) >>> 13);
    } else if (v === 0) {
      out[o + i] = (x >>> 16) & 0x8000; // ±0: common in activations, and 10x slower via floatToHalf
    } else {
      out[o + i] = floatToHalf(f[i]);
    }
  }
}

/**
 * f[i] = halfToFloat(src[s + i]) for i in [0, n), `bits` viewing `f`'s memory as u32. Normal
 * halves are widened with bit operations (rebias the exponent by 112), the rest via the table;
 * no 256 KiB table walk for the common case.
 */
export function fromHalfBulk(f: Float32Array, bits: Int32Array, src: Uint16Array, s: number, n: number): void {
  const t = HALF_TO_FLOAT;
  for (let i = 0; i < n; i++) {
    const h = src[s + i];
    const e = h & 0x7c00;
    if (e !== 0 && e !== 0x7c00) bits[i] = ((h & 0x8000) << 16) | (((h & 0x7fff) + 0x1c000) << 13);
    else f[i] = t[h];
  }
}

const BLOCK = 16384;
const blockF32 = new Float32Array(BLOCK);
const blockU32 = new Int32Array(blockF32.buffer);
const blockF32b = new Float32Array(BLOCK);
const blockU32b = new Int32Array(blockF32b.buffer);

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
  const x = a as Uint16Array;
  const y = b as Uint16Array;
  const f = blockF32;
  const g = blockF32b;
  for (let s = start; s < end; s += BLOCK) {
    const m = Math.min(BLOCK, end - s);
    fromHalfBulk(f, blockU32, x, s, m);
    fromHalfBulk(g, blockU32b, y, s + d, m);
    if (op === 'sum') addF32(f, 0, f, 0, g, 0, m);
    else if (op === 'max') for (let i = 0; i < m; i++) f[i] = Math.max(f[i], g[i]);
    else for (let i = 0; i < m; i++) f[i] = Math.min(f[i], g[i]);
    toHalfBulk(dst as Uint16Array, s, f, blockU32, m);
  }
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
  const n = end - start;
  const accBits = new Int32Array(acc.buffer, acc.byteOffset, n);
  fromHalfBulk(acc, accBits, sources[0], start, n);
  for (let r = 1; r < sources.length; r++) {
    for (let s = 0; s < n; s += BLOCK) {
      const m = Math.min(BLOCK, n - s);
      fromHalfBulk(blockF32, blockU32, sources[r], start + s, m);
      if (op === 'sum') addF32(acc, s, acc, s, blockF32, 0, m);
      else if (op === 'max') for (let i = 0; i < m; i++) acc[s + i] = Math.max(acc[s + i], blockF32[i]);
      else for (let i = 0; i < m; i++) acc[s + i] = Math.min(acc[s + i], blockF32[i]);
    }
  }
  toHalfBulk(out, start, acc, accBits, n);
}
