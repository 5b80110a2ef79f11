/**
 * MXFP4 (OCP microscaling FP4, gpt-oss's expert format): blocks of 32 FP4 (E2M1) values sharing one
 * E8M0 exponent. Two storage orders exist and carry the same bits:
 *
 *   GGUF (ggml type MXFP4, 17 bytes per block): the exponent byte e, then 16 bytes; byte j holds
 *     element j in its low nibble and element j + 16 in its high nibble (q4_0's order).
 *   Hugging Face (gpt-oss `X_blocks` uint8 [..., blocks, 16] + `X_scales` uint8 [..., blocks]): byte i
 *     of a block holds element 2i in its low nibble and 2i + 1 in its high nibble.
 *
 * Value = FP4(code)·2^(e − 127) with FP4 = ±{0, 0.5, 1, 1.5, 2, 3, 4, 6} (code bit 3 is the sign);
 * ggml writes the same as KVALUES[code]·2^(e − 128) with the doubled integers KVALUES, which is what
 * the kernels multiply (an exact integer dot product per block). In memory a weight is dtype 'mxfp4'
 * in the GGUF order; Hugging Face blocks are reordered on load (hfBlocksToGguf), bit for bit.
 */
import { MXFP4_BLOCK_BYTES, QK } from '../kernels/wasm/formats.js';

/** FP4 (E2M1) codes as doubled integers (ggml's kvalues_mxfp4): value = KVALUES[code]·2^(e − 128). */
export const KVALUES: readonly number[] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/** 2^(e − 128) as an f32 (exact, subnormal for e < 2), the per-block factor of KVALUES. */
export function e8m0Half(e: number): number {
  return 2 ** (e - 128);
}

/** Row `r` of an 'mxfp4' weight (GGUF order) as f32 values into `dst`. */
export function dequantizeMxfp4Row(bytes: Uint8Array, cols: number, r: number, dst: Float32Array): void {
  const nb = cols / QK;
  let o = r * nb * MXFP4_BLOCK_BYTES;
  for (let b = 0; b < nb; b++, o += MXFP4_BLOCK_BYTES) {
    const d = e8m0Half(bytes[o]);
    for (let j = 0; j < 16; j++) {
      const q = bytes[o + 1 + j];
      dst[b * QK + j] = Math.fround(KVALUES[q & 15] * d);
      dst[b * QK + j + 16] = Math.fround(KVALUES[q >> 4] * d);
    }
  }
}

/**
 * Quantizes row-major values (cols a multiple of 32) to MXFP4 blocks in GGUF order, for our GGUF
 * writer: per block the smallest exponent whose largest FP4 magnitude (6·2^(e − 127)) covers the
 * block's largest |value|, then each value to the nearest FP4 code (ties to the even code).
 */
export function quantizeMxfp4(values: Float32Array, rows: number, cols: number, dst?: Uint8Array): Uint8Array {
  if (cols % QK) throw new Error(`mxfp4: ${cols} columns are not whole blocks of ${QK}`);
  const nb = (rows * cols) / QK;
  const out = dst ?? new Uint8Array(nb * MXFP4_BLOCK_BYTES);
  for (let b = 0; b < nb; b++) {
    let amax = 0;
    for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(values[b * QK + j]));
    // KVALUES' largest magnitude is 12: need 12·2^(e − 128) >= amax
    const e = amax > 0 ? Math.min(254, Math.max(0, Math.ceil(Math.log2(amax / 12)) + 128)) : 0;
    const d = e8m0Half(e);
    const o = b * MXFP4_BLOCK_BYTES;
    out[o] = e;
    for (let j = 0; j < 16; j++) out[o + 1 + j] = nearestCode(values[b * QK + j] / d) | (nearestCode(values[b * QK + j + 16] / d) << 4);
  }
  return out;
}

function nearestCode(v: number): number {
  let best = 0;
  for (let c = 1; c < 16; c++) {
    const err = Math.abs(KVALUES[c] - v);
    const bestErr = Math.abs(KVALUES[best] - v);
    if (err < bestErr || (err === bestErr && (c & 1) === 0 && (best & 1) === 1)) best = c;
  }
  return best;
}

/**
 * Hugging Face MXFP4 blocks → GGUF order: `blocks` holds n blocks of 16 bytes (element 2i low, 2i + 1
 * high nibble of byte i), `scales` their n exponents; `dst` gets n blocks of 17 bytes. The exponent
 * means the same in both (FP4·2^(e − 127) = KVALUES·2^(e − 128)), so only nibbles move.
 */
export function hfBlocksToGguf(blocks: Uint8Array, scales: Uint8Array, n: number, dst: Uint8Array): void {
  // A block's first 8 bytes are elements 0..15 as one little-endian nibble stream (element j at bit
  // 4j), its last 8 elements 16..31 likewise: with the block as four 32-bit words, output byte j takes
  // nibble j of words 0-1 (low) and of words 2-3 (high), shifted out of registers instead of 32 loads.
  if (blocks.byteOffset % 4 === 0) {
    const w = new Uint32Array(blocks.buffer, blocks.byteOffset, n * 4);
    for (let b = 0; b < n; b++) {
      const o = b * MXFP4_BLOCK_BYTES;
      dst[o] = scales[b];
      const a0 = w[4 * b];
      const a1 = w[4 * b + 1];
      const h0 = w[4 * b + 2];
      const h1 = w[4 * b + 3];
      for (let j = 0; j < 8; j++) {
        dst[o + 1 + j] = ((a0 >>> (4 * j)) & 15) | (((h0 >>> (4 * j)) & 15) << 4);
        dst[o + 9 + j] = ((a1 >>> (4 * j)) & 15) | (((h1 >>> (4 * j)) & 15) << 4);
      }
    }
    return;
  }
  for (let b = 0; b < n; b++) {
    const o = b * MXFP4_BLOCK_BYTES;
    dst[o] = scales[b];
    for (let j = 0; j < 16; j++) {
      // element j: byte j >> 1 of the HF block, low nibble when j is even; element j + 16 likewise
      const lo = (blocks[16 * b + (j >> 1)] >> (4 * (j & 1))) & 15;
      const hi = (blocks[16 * b + 8 + (j >> 1)] >> (4 * (j & 1))) & 15;
      dst[o + 1 + j] = lo | (hi << 4);
    }
  }
}
