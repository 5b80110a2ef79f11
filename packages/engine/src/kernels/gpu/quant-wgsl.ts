/**
 * WGSL element accessors (`w_at(r, c)`, the interface of kernels/gpu/wgsl.ts's weight kernels) for the
 * packed formats, read from their bytes as the CPU keeps them (no dequantized copy on the GPU): GGUF
 * Q8_0/Q4_0, the K-quants (q4_k, q5_k, q6_k; layouts in quant/kquants.ts), MXFP4 in GGUF order
 * (quant/mxfp4.ts), MLX affine rows (quant/mlx.ts: packed bits, then (scale, bias) per group) and FP8
 * E4M3 rows with 128-column block scales (quant/fp8.ts).
 * Each element decodes its own scale, so these are correctness-first: they run through the generic
 * per-element matvec, the tiled matmul and the embedding lookup. `weight8Accessor` (below) decodes 8
 * elements with one scale lookup for MLX 4/8-bit, FP8, Q8_0/Q4_0, the K-quants and MXFP4: the decode
 * matvec (matvec8Shader) and the MoE experts' (expertRowsShader) take it where it applies.
 * Weights are row-major (`P.cols` columns), bound as `array<u32>`; rows start on 4-byte boundaries
 * only for MLX, so the block formats read bytes.
 */
import type { DType, MlxDType } from '../backend.js';
import { isMlx, mlxLayout } from '../wasm/formats.js';

const BYTES = /* wgsl */ `
fn rd_u8(o: u32) -> u32 { return (W[o >> 2u] >> ((o & 3u) * 8u)) & 0xffu; }
fn rd_u16(o: u32) -> u32 { return rd_u8(o) | (rd_u8(o + 1u) << 8u); }
fn rd_f16(o: u32) -> f32 { return unpack2x16float(rd_u16(o)).x; }
`;

/**
 * Four bytes from any byte offset (Q6_K's 210-byte blocks start on 2 bytes, MXFP4's 17-byte and Q4_0/Q8_0's
 * 18/34-byte ones on any or every other). No branch on the alignment: neighbouring lanes differ in it, and a
 * CPU driver's SIMD lanes would run both sides; the next word's share, shifted by 1 then 31 − s, is 0 when s is 0.
 */
const RD32 = /* wgsl */ `
fn rd32b(o: u32) -> u32 {
  let i = o >> 2u;
  let s = (o & 3u) * 8u;
  return (W[i] >> s) | ((W[i + 1u] << 1u) << (31u - s));
}`;

/** Sub-block j's 6-bit scale and min (llama.cpp's get_scale_min_k4) of the Q4_K/Q5_K super-block at byte o. */
const SCALE_MIN = /* wgsl */ `
fn scale_min(o: u32, j: u32) -> vec2<f32> {
  if (j < 4u) { return vec2<f32>(f32(rd_u8(o + 4u + j) & 63u), f32(rd_u8(o + 8u + j) & 63u)); }
  return vec2<f32>(f32((rd_u8(o + 8u + j) & 15u) | ((rd_u8(o + j) >> 6u) << 4u)),
                   f32((rd_u8(o + 8u + j) >> 4u) | ((rd_u8(o + 4u + j) >> 6u) << 4u)));
}`;

/** ggml's doubled FP4 values (MXFP4): value = KV[code]·2^(e − 128). */
const FP4 = /* wgsl */ `
var<private> KV: array<f32, 16> = array<f32, 16>(0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);`;

/**
 * An E4M3 code's value by its formula (exp2 is exact here), not by bit shifts into an f32 subnormal,
 * which a GPU may flush to zero; the NaN codes (0x7f/0xff, absent from real weights) are not special-cased.
 */
const E4M3 = /* wgsl */ `
fn e4m3(q: u32) -> f32 {
  let e = (q >> 3u) & 15u;
  let m = f32(q & 7u);
  let v = select((8.0 + m) * exp2(f32(e) - 10.0), m * exp2(-9.0), e == 0u);
  return select(v, -v, (q & 0x80u) != 0u);
}`;

/** A word's two bf16 halves as f32 (low half first). */
const BF2 = /* wgsl */ `
fn bf2(w: u32) -> vec2<f32> { return vec2<f32>(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u)); }`;

/** An MLX group's (scale, bias) pair starting at word `w` (an index expression), in the scale dtype. */
function mlxScaleBias(scales: 'f16' | 'bf16' | 'f32', w: string): string {
  if (scales === 'f32') return `vec2<f32>(bitcast<f32>(W[${w}]), bitcast<f32>(W[(${w}) + 1u]))`;
  return scales === 'f16' ? `unpack2x16float(W[${w}])` : `bf2(W[${w}])`;
}

/** Bytes 0..3 of a word as f32s (also the row-block decoder's, wgsl.ts stepDecoder). */
export const U8X4 = /* wgsl */ `
fn u8x4(w: u32) -> vec4<f32> { return vec4<f32>(f32(w & 255u), f32((w >> 8u) & 255u), f32((w >> 16u) & 255u), f32(w >> 24u)); }`;

/** Bytes 0..3 of a word as signed (Q8_0) f32s. */
export const I8X4 = /* wgsl */ `
fn i8x4(w: u32) -> vec4<f32> {
  return vec4<f32>(f32(bitcast<i32>(w << 24u) >> 24u), f32(bitcast<i32>(w << 16u) >> 24u), f32(bitcast<i32>(w << 8u) >> 24u), f32(bitcast<i32>(w) >> 24u));
}`;

/** What `w8` returns: 8 consecutive elements. */
const W8 = 'array<vec4<f32>, 2>';

/** An FP8 row's 8 weights from its 128-column block scale and two code words (`e4m3x4` decodes 4 codes × the scale). */
const FP8_W8 = /* wgsl */ `fn w8(r: u32, c: u32) -> ${W8} {
  let nb = (P.cols + 127u) / 128u;
  let o = (r * (nb * 4u + P.cols)) >> 2u;
  let s = bitcast<f32>(W[o + c / 128u]);
  let i = o + nb + (c >> 2u);
  return ${W8}(e4m3x4(W[i], s), e4m3x4(W[i + 1u], s));
}`;

/** `w_at` for the GGUF block (Q8_0, Q4_0, K-quant, MXFP4), MLX and FP8 dtypes; throws for any other. */
export function quantWeightAccessor(dtype: DType): string {
  if (isMlx(dtype)) return mlxAccessor(dtype);
  switch (dtype) {
    case 'q8_0':
      // Block of 32: f16 scale, then 32 signed bytes.
      return `${BYTES}
fn w_at(r: u32, c: u32) -> f32 {
  let o = (r * (P.cols / 32u) + c / 32u) * 34u;
  let q = bitcast<i32>(rd_u8(o + 2u + (c & 31u)) << 24u) >> 24u;
  return f32(q) * rd_f16(o);
}`;
    case 'q4_0':
      // Block of 32: f16 scale, then 16 bytes; element j < 16 is the low nibble of byte j, element
      // j + 16 the high nibble; value = (q - 8) * scale.
      return `${BYTES}
fn w_at(r: u32, c: u32) -> f32 {
  let o = (r * (P.cols / 32u) + c / 32u) * 18u;
  let j = c & 31u;
  let b = rd_u8(o + 2u + (j & 15u));
  let q = select(b & 15u, b >> 4u, j >= 16u);
  return (f32(q) - 8.0) * rd_f16(o);
}`;
    case 'q4_k':
    case 'q5_k': {
      const five = dtype === 'q5_k';
      return `${BYTES}${SCALE_MIN}
fn w_at(r: u32, c: u32) -> f32 {
  let o = (r * (P.cols / 256u) + c / 256u) * ${five ? 176 : 144}u;
  let e = c % 256u;
  let j = e / 32u;
  let l = e % 32u;
  let b = rd_u8(o + ${five ? 48 : 16}u + 32u * (j / 2u) + l);
  var q = select(b & 15u, b >> 4u, (j & 1u) == 1u);${five ? `
  q = q | (((rd_u8(o + 16u + l) >> j) & 1u) << 4u);` : ''}
  let sm = scale_min(o, j);
  return rd_f16(o) * sm.x * f32(q) - rd_f16(o + 2u) * sm.y;
}`;
    }
    case 'q6_k':
      return `${BYTES}
fn w_at(r: u32, c: u32) -> f32 {
  let o = (r * (P.cols / 256u) + c / 256u) * 210u;
  let e = c % 256u;
  let n = e / 128u;
  let k = (e % 128u) / 32u;
  let l = e % 32u;
  let lb = rd_u8(o + 64u * n + 32u * (k & 1u) + l);
  let q = select(lb & 15u, lb >> 4u, k >= 2u) | (((rd_u8(o + 128u + 32u * n + l) >> (2u * k)) & 3u) << 4u);
  let sc = bitcast<i32>(rd_u8(o + 192u + e / 16u) << 24u) >> 24u;
  return rd_f16(o + 208u) * f32(sc) * f32(i32(q) - 32);
}`;
    case 'mxfp4':
      return `${BYTES}${FP4}
fn w_at(r: u32, c: u32) -> f32 {
  let o = (r * (P.cols / 32u) + c / 32u) * 17u;
  let j = c % 32u;
  let b = rd_u8(o + 1u + (j & 15u));
  return KV[select(b & 15u, b >> 4u, j >= 16u)] * exp2(f32(rd_u8(o)) - 128.0);
}`;
    case 'fp8_e4m3':
      // Rows (quant/fp8.ts): ceil(cols/128) f32 block scales, then the codes; rows start on any byte.
      return `${BYTES}${E4M3}
fn w_at(r: u32, c: u32) -> f32 {
  let nb = (P.cols + 127u) / 128u;
  let o = r * (nb * 4u + P.cols);
  let sp = o + (c / 128u) * 4u;
  let s = bitcast<f32>(rd_u8(sp) | (rd_u8(sp + 1u) << 8u) | (rd_u8(sp + 2u) << 16u) | (rd_u8(sp + 3u) << 24u));
  return e4m3(rd_u8(o + nb * 4u + c)) * s;
}`;
    default:
      throw new Error(`WebGPU backend: no kernel for ${dtype} weights (run them on the cpu backend)`);
  }
}

/** MLX rows: element c's bits start at bit c·bits of the row (two bytes always hold them). */
function mlxAccessor(dtype: MlxDType): string {
  const { bits, groupSize, scales } = mlxLayout(dtype);
  const qBytes = `(P.cols * ${bits}u / 8u)`;
  return `${BYTES}${BF2}
fn w_at(r: u32, c: u32) -> f32 {
  let o = r * (${qBytes} + (P.cols / ${groupSize}u) * ${scales === 'f32' ? 8 : 4}u);
  let bit = c * ${bits}u;
  let q = ((rd_u8(o + bit / 8u) | (rd_u8(o + bit / 8u + 1u) << 8u)) >> (bit & 7u)) & ${(1 << bits) - 1}u;
  // (scale, bias) of the element's group; rows are whole u32 words, so are the pairs
  let p = o + ${qBytes} + (c / ${groupSize}u) * ${scales === 'f32' ? 8 : 4}u;
  let sb = ${mlxScaleBias(scales, 'p >> 2u')};
  return sb.x * f32(q) + sb.y;
}`;
}

/**
 * `w8(r, c) -> array<vec4<f32>, 2>`: elements c..c+7 of row r (c a multiple of 8) from whole u32 words,
 * for the formats whose 8 consecutive elements sit in one or two aligned words and share one scale:
 * f32, f16, bf16, MLX 4- and 8-bit (groups are multiples of 8), FP8 E4M3 rows when `cols` is a
 * multiple of 4 (rows then start on a word), and the GGUF Q8_0/Q4_0, K-quants and MXFP4 (blockWeight8: 8
 * elements of a 32-element (sub-)block share its scale). Null for any other format or shape: the per-element
 * `w_at` serves those. Each value is computed as `w_at` computes it (same f32 operations), so only the
 * kernels' summation order differs.
 */
export function weight8Accessor(dtype: DType, cols: number): string | null {
  if (cols % 8 !== 0) return null;
  switch (dtype) {
    case 'f32':
      return `fn w8(r: u32, c: u32) -> ${W8} {
  let i = r * P.cols + c;
  return ${W8}(vec4<f32>(bitcast<f32>(W[i]), bitcast<f32>(W[i + 1u]), bitcast<f32>(W[i + 2u]), bitcast<f32>(W[i + 3u])),
                vec4<f32>(bitcast<f32>(W[i + 4u]), bitcast<f32>(W[i + 5u]), bitcast<f32>(W[i + 6u]), bitcast<f32>(W[i + 7u])));
}`;
    case 'f16':
      return `fn w8(r: u32, c: u32) -> ${W8} {
  let i = (r * P.cols + c) >> 1u;
  return ${W8}(vec4<f32>(unpack2x16float(W[i]), unpack2x16float(W[i + 1u])), vec4<f32>(unpack2x16float(W[i + 2u]), unpack2x16float(W[i + 3u])));
}`;
    case 'bf16':
      return `${BF2}
fn w8(r: u32, c: u32) -> ${W8} {
  let i = (r * P.cols + c) >> 1u;
  return ${W8}(vec4<f32>(bf2(W[i]), bf2(W[i + 1u])), vec4<f32>(bf2(W[i + 2u]), bf2(W[i + 3u])));
}`;
    case 'fp8_e4m3':
      if (cols % 4 !== 0) return null;
      return `${E4M3}
fn e4m3x4(w: u32, s: f32) -> vec4<f32> { return vec4<f32>(e4m3(w & 0xffu), e4m3((w >> 8u) & 0xffu), e4m3((w >> 16u) & 0xffu), e4m3(w >> 24u)) * s; }
${FP8_W8}`;
    case 'q4_0':
    case 'q8_0':
    case 'q4_k':
    case 'q5_k':
    case 'q6_k':
    case 'mxfp4':
      return blockWeight8(dtype, cols);
    default:
      break;
  }
  if (!isMlx(dtype)) return null;
  const { bits, groupSize, scales } = mlxLayout(dtype);
  if (bits !== 4 && bits !== 8) return null;
  const { pairWords, qWords, q } = mlxCodes8(bits, scales);
  return `${BF2}
fn w8(r: u32, c: u32) -> ${W8} {
  let o = r * (${qWords} + (P.cols / ${groupSize}u) * ${pairWords}u);
${q}
  // (scale, bias) of the 8 elements' group (a group holds whole 8s)
  let p = o + ${qWords} + (c / ${groupSize}u) * ${pairWords}u;
  let sb = ${mlxScaleBias(scales, 'p')};
  return ${W8}(sb.x * lo + sb.y, sb.x * hi + sb.y);
}`;
}

/**
 * The MoE decode kernels' `w8` (wgsl-moe-decode.ts): weight8Accessor's, except that FP8 builds each E4M3
 * value from its bits (a normal code's exponent and mantissa moved into an f32's, a subnormal's mantissa
 * times 2^−9), 4 codes per vector operation, where `e4m3` takes an exp2 per element: the same exact
 * values (no f32 subnormal is formed, so no flush to zero can differ), so the same bits after the scale.
 */
export function expertWeight8Accessor(dtype: DType, cols: number): string | null {
  const w8 = weight8Accessor(dtype, cols);
  if (dtype !== 'fp8_e4m3' || !w8) return w8;
  return `fn e4m3x4(w: u32, s: f32) -> vec4<f32> {
  let q = (vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u);
  // e ≥ 1: 2^(e − 7)·(1 + m/8) is the f32 with exponent field e + 120 and the 3 mantissa bits on top
  let normal = bitcast<vec4<f32>>(((q & vec4<u32>(127u)) << vec4<u32>(20u)) + vec4<u32>(0x3c000000u));
  let v = select(normal, vec4<f32>(q & vec4<u32>(7u)) * 0.001953125, (q & vec4<u32>(120u)) == vec4<u32>(0u));
  return bitcast<vec4<f32>>(bitcast<vec4<u32>>(v) | ((q & vec4<u32>(128u)) << vec4<u32>(24u))) * s;
}
${FP8_W8}`;
}

/**
 * MLX 4/8-bit rows for the MoE decode kernels: `wdot8(r, c, x0, x1, xs)` = Σ_i w[r, c + i]·x_i over 8
 * elements of one group, as scale · Σ q_i·x_i + bias · Σ x_i (xs: x0 + x1's elements summed once per
 * step for every row): the codes meet x unscaled, one multiply-add per element instead of two. A
 * different rounding from w_at's (scale·q + bias per element, then the product): ~1e-7 of the terms.
 * Null for other formats.
 */
export function expertFactored8(dtype: DType, cols: number): string | null {
  if (cols % 8 !== 0 || !isMlx(dtype)) return null;
  const { bits, groupSize, scales } = mlxLayout(dtype);
  if (bits !== 4 && bits !== 8) return null;
  const { pairWords, qWords, q } = mlxCodes8(bits, scales);
  return `${BF2}
fn wdot8(r: u32, c: u32, x0: vec4<f32>, x1: vec4<f32>, xs: f32) -> f32 {
  let o = r * (${qWords} + (P.cols / ${groupSize}u) * ${pairWords}u);
${q}
  let p = o + ${qWords} + (c / ${groupSize}u) * ${pairWords}u;
  let sb = ${mlxScaleBias(scales, 'p')};
  return sb.x * (dot(lo, x0) + dot(hi, x1)) + sb.y * xs;
}`;
}

/**
 * `w8` of the GGUF block formats: the 8 elements share their (sub-)block's scale (and min), and their
 * codes are 8 consecutive bytes (Q8_0, Q4_0's, MXFP4's and Q4_K's nibbles, Q6_K's low nibbles) plus, for
 * Q5_K/Q6_K, 8 consecutive bytes of high bits, so two 4-byte reads give all 8 codes. Q4_K/Q5_K super-blocks
 * (144/176 bytes) keep rows on words; Q6_K's 210-byte and Q8_0/Q4_0's 34/18-byte blocks start on 2 bytes
 * and MXFP4's 17-byte blocks on any byte, so those read words across a boundary (rd32b).
 */
function blockWeight8(dtype: 'q4_0' | 'q8_0' | 'q4_k' | 'q5_k' | 'q6_k' | 'mxfp4', cols: number): string | null {
  switch (dtype) {
    case 'q4_0':
      // 18-byte blocks (f16 scale, 16 bytes): elements j..j+7 (j = c % 32) are the low (j < 16) or high nibbles of bytes (j & 15)..+7
      if (cols % 32 !== 0) return null;
      return `${BYTES}${U8X4}${RD32}
fn q4x4(w: u32, d: f32) -> vec4<f32> { return (u8x4(w & 0x0f0f0f0fu) - 8.0) * d; }
fn w8(r: u32, c: u32) -> ${W8} {
  let o = (r * (P.cols / 32u) + c / 32u) * 18u;
  let j = c % 32u;
  let p = o + 2u + (j & 15u);
  let sh = select(0u, 4u, j >= 16u);
  let d = rd_f16(o);
  return ${W8}(q4x4(rd32b(p) >> sh, d), q4x4(rd32b(p + 4u) >> sh, d));
}`;
    case 'q8_0':
      // 34-byte blocks (f16 scale, 32 signed bytes)
      if (cols % 32 !== 0) return null;
      return `${BYTES}${I8X4}${RD32}
fn w8(r: u32, c: u32) -> ${W8} {
  let o = (r * (P.cols / 32u) + c / 32u) * 34u;
  let p = o + 2u + c % 32u;
  let d = rd_f16(o);
  return ${W8}(i8x4(rd32b(p)) * d, i8x4(rd32b(p + 4u)) * d);
}`;
    case 'q4_k':
    case 'q5_k': {
      if (cols % 256 !== 0) return null;
      const five = dtype === 'q5_k';
      // high bit of element k (bit j of qh byte l + k) moved to bit 4 of its code byte
      const high = five ? ` | (((W[h] >> j) & 0x01010101u) << 4u)` : '';
      const high1 = five ? ` | (((W[h + 1u] >> j) & 0x01010101u) << 4u)` : '';
      return `${BYTES}${U8X4}${SCALE_MIN}
fn w8(r: u32, c: u32) -> ${W8} {
  let o = (r * (P.cols / 256u) + c / 256u) * ${five ? 176 : 144}u;
  let e = c % 256u;
  let j = e / 32u;
  let l = e % 32u;
  let i = (o + ${five ? 48 : 16}u + 32u * (j / 2u) + l) >> 2u;
  let sh = (j & 1u) * 4u;${five ? `
  let h = (o + 16u + l) >> 2u;` : ''}
  let q0 = ((W[i] >> sh) & 0x0f0f0f0fu)${high};
  let q1 = ((W[i + 1u] >> sh) & 0x0f0f0f0fu)${high1};
  let sm = scale_min(o, j);
  let dm = unpack2x16float(W[o >> 2u]);
  let a = dm.x * sm.x;
  let m = dm.y * sm.y;
  return ${W8}(a * u8x4(q0) - m, a * u8x4(q1) - m);
}`;
    }
    case 'q6_k':
      if (cols % 256 !== 0) return null;
      return `${BYTES}${U8X4}${RD32}
fn w8(r: u32, c: u32) -> ${W8} {
  let o = (r * (P.cols / 256u) + c / 256u) * 210u;
  let e = c % 256u;
  let n = e / 128u;
  let k = (e % 128u) / 32u;
  let l = e % 32u;
  let lo = o + 64u * n + 32u * (k & 1u) + l;
  let hi = o + 128u + 32u * n + l;
  let sh = (k / 2u) * 4u;
  let q0 = ((rd32b(lo) >> sh) & 0x0f0f0f0fu) | (((rd32b(hi) >> (2u * k)) & 0x03030303u) << 4u);
  let q1 = ((rd32b(lo + 4u) >> sh) & 0x0f0f0f0fu) | (((rd32b(hi + 4u) >> (2u * k)) & 0x03030303u) << 4u);
  let sc = bitcast<i32>(rd_u8(o + 192u + e / 16u) << 24u) >> 24u;
  let a = rd_f16(o + 208u) * f32(sc);
  return ${W8}(a * (u8x4(q0) - 32.0), a * (u8x4(q1) - 32.0));
}`;
    case 'mxfp4':
      if (cols % 32 !== 0) return null;
      return `${BYTES}${FP4}${RD32}
fn fp4x4(w: u32, s: f32) -> vec4<f32> {
  return vec4<f32>(KV[w & 15u] * s, KV[(w >> 8u) & 15u] * s, KV[(w >> 16u) & 15u] * s, KV[(w >> 24u) & 15u] * s);
}
fn w8(r: u32, c: u32) -> ${W8} {
  let o = (r * (P.cols / 32u) + c / 32u) * 17u;
  let j = c % 32u;
  let p = o + 1u + (j & 15u);
  let sh = select(0u, 4u, j >= 16u);
  let s = exp2(f32(rd_u8(o)) - 128.0);
  return ${W8}(fp4x4(rd32b(p) >> sh, s), fp4x4(rd32b(p + 4u) >> sh, s));
}`;
  }
}

/**
 * The WGSL that reads 8 codes of a 4- or 8-bit MLX row (r's words at o, columns c..c+7) into `lo`/`hi`,
 * and the row's word counts (codes, then a (scale, bias) pair per group), shared by the 8-wide
 * accessor and the MoE decode's factored form.
 */
function mlxCodes8(bits: 4 | 8, scales: string): { pairWords: number; qWords: string; q: string } {
  const pairWords = scales === 'f32' ? 2 : 1;
  const qWords = `(P.cols * ${bits}u / 32u)`;
  const q =
    bits === 4
      ? `  let w = W[o + c / 8u];
  let lo = vec4<f32>(f32(w & 15u), f32((w >> 4u) & 15u), f32((w >> 8u) & 15u), f32((w >> 12u) & 15u));
  let hi = vec4<f32>(f32((w >> 16u) & 15u), f32((w >> 20u) & 15u), f32((w >> 24u) & 15u), f32(w >> 28u));`
      : `  let w0 = W[o + c / 4u];
  let w1 = W[o + c / 4u + 1u];
  let lo = vec4<f32>(f32(w0 & 255u), f32((w0 >> 8u) & 255u), f32((w0 >> 16u) & 255u), f32(w0 >> 24u));
  let hi = vec4<f32>(f32(w1 & 255u), f32((w1 >> 8u) & 255u), f32((w1 >> 16u) & 255u), f32(w1 >> 24u));`;
  return { pairWords, qWords, q };
}
