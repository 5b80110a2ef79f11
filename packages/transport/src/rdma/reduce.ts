/**
 * Reduction helpers for the mesh collectives: contributions are folded into an f32 accumulator in rank
 * order (f16 widened exactly, rounded back once at the end), so the result never depends on arrival order.
 */
import type { ReduceOp, ReducibleBuffer } from '../group.js';

const HALF = (() => {
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

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Nearest f16 (ties to even), as bits. */
export function f32ToF16(v: number): number {
  f32[0] = v;
  const x = u32[0]!;
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

export function f16ToF32(h: number): number {
  return HALF[h & 0xffff]!;
}

/** f32 copy of `len` elements of `src` from `start`. */
export function toF32(src: ReducibleBuffer, start: number, len: number): Float32Array {
  const acc = new Float32Array(len);
  if (src instanceof Float32Array) acc.set(src.subarray(start, start + len));
  else for (let i = 0; i < len; i++) acc[i] = HALF[src[start + i]!]!;
  return acc;
}

/** acc[i] = acc[i] op src[srcStart + i], in f32 arithmetic. */
export function reduceInto(acc: Float32Array, src: ReducibleBuffer, srcStart: number, op: ReduceOp): void {
  const n = acc.length;
  const half = !(src instanceof Float32Array);
  for (let i = 0; i < n; i++) {
    const v = half ? HALF[src[srcStart + i]!]! : src[srcStart + i]!;
    const a = acc[i]!;
    acc[i] = op === 'sum' ? a + v : op === 'max' ? Math.max(a, v) : Math.min(a, v);
  }
}

/** dst[dstStart + i] = acc[i] (rounded to f16 for half buffers). */
export function writeBack(acc: Float32Array, dst: ReducibleBuffer, dstStart: number): void {
  if (dst instanceof Float32Array) dst.set(acc, dstStart);
  else for (let i = 0; i < acc.length; i++) dst[dstStart + i] = f32ToF16(acc[i]!);
}
