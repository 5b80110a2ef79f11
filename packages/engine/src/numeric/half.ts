/**
 * IEEE half (f16) and bfloat16 conversions. Node 20 has no Float16Array, so weights in these dtypes
 * live as raw 16-bit patterns and are widened through two 65,536-entry lookup tables (256 KiB each,
 * built once), which is the fastest widening plain JavaScript can do.
 */

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function buildF16Table(): Float32Array {
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const frac = h & 0x3ff;
    if (exp === 0) t[h] = sign * frac * 2 ** -24;
    else if (exp === 31) t[h] = frac ? NaN : sign * Infinity;
    else t[h] = sign * (1 + frac / 1024) * 2 ** (exp - 15);
  }
  return t;
}

function buildBf16Table(): Float32Array {
  const t = new Float32Array(65536);
  const bits = new Uint32Array(t.buffer);
  for (let h = 0; h < 65536; h++) bits[h] = h << 16;
  return t;
}

/** f16 bit pattern → f32 value. */
export const F16_TO_F32: Float32Array = buildF16Table();
/** bf16 bit pattern → f32 value. */
export const BF16_TO_F32: Float32Array = buildBf16Table();

/** f32 → f16 bits, round to nearest even (overflow → ±Inf, tiny → subnormal/zero). */
export function f32ToF16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    let r = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    if (rem > half || (rem === half && r & 1)) r++;
    return sign | r;
  }
  let r = mant >>> 13;
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && r & 1)) {
    r++;
    if (r === 0x400) {
      r = 0;
      e++;
      if (e >= 31) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | r;
}

/** f32 → bf16 bits, round to nearest even (NaN stays NaN). */
export function f32ToBf16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0];
  if ((x & 0x7fffffff) > 0x7f800000) return ((x >>> 16) | 0x40) & 0xffff;
  const rounded = x + 0x7fff + ((x >>> 16) & 1);
  return (rounded >>> 16) & 0xffff;
}
