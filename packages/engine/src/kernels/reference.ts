/**
 * The plain-TypeScript reference backend: the readable oracle every faster backend is checked
 * against. Weights stay in their storage dtype; f16/bf16 are widened inside the kernel through
 * lookup tables. Accumulation is f32-rounded per multiply-add order (c ascending), the same order for
 * matvec and matmul, so a batched prompt and one-token decode produce the same numbers.
 */
import { BF16_TO_F32, F16_TO_F32 } from '../numeric/half.js';
import type { Backend, Weight } from './backend.js';
import { blockElems, isMlx } from './wasm/formats.js';
import { dequantizeRow } from './wasm/quant-reference.js';

/** Row `r` of `w` as f32 into `dst` (cols values). */
function widenRow(dst: Float32Array, w: Weight, r: number): void {
  const cols = w.cols;
  const start = r * cols;
  switch (w.dtype) {
    case 'f32': {
      dst.set(f32View(w).subarray(start, start + cols));
      return;
    }
    case 'f16': {
      const src = u16View(w);
      for (let c = 0; c < cols; c++) dst[c] = F16_TO_F32[src[start + c]];
      return;
    }
    case 'bf16': {
      const src = u16View(w);
      for (let c = 0; c < cols; c++) dst[c] = BF16_TO_F32[src[start + c]];
      return;
    }
    case 'q8_0':
    case 'q4_0':
    case 'q4_k':
    case 'q5_k':
    case 'q6_k':
    case 'mxfp4': {
      // GGUF blocks dequantized exactly as ggml does; activations stay f32, unlike the WASM kernels.
      const be = blockElems(w.dtype);
      if (cols % be) throw new Error(`reference backend: ${w.dtype} weight [${w.rows}, ${cols}] needs a column count that is a multiple of ${be}`);
      dequantizeRow(w.dtype, w.bytes, cols, r, dst);
      return;
    }
    case 'fp8_e4m3':
      // f32(e4m3·block scale), DeepSeek's weight_dequant; any column count
      dequantizeRow(w.dtype, w.bytes, cols, r, dst);
      return;
    default:
      if (isMlx(w.dtype)) {
        const g = blockElems(w.dtype);
        if (cols % g) throw new Error(`reference backend: ${w.dtype} weight [${w.rows}, ${cols}] needs a column count that is a multiple of ${g}`);
        dequantizeRow(w.dtype, w.bytes, cols, r, dst);
        return;
      }
      throw new Error(`reference backend: dtype ${w.dtype} not implemented`);
  }
}

// Typed views over the weight bytes, cached per weight (creating views per call would allocate).
const f32Views = new WeakMap<Uint8Array, Float32Array>();
const u16Views = new WeakMap<Uint8Array, Uint16Array>();
function f32View(w: Weight): Float32Array {
  let v = f32Views.get(w.bytes);
  if (!v) f32Views.set(w.bytes, (v = new Float32Array(w.bytes.buffer, w.bytes.byteOffset, w.bytes.byteLength >> 2)));
  return v;
}
function u16View(w: Weight): Uint16Array {
  let v = u16Views.get(w.bytes);
  if (!v) u16Views.set(w.bytes, (v = new Uint16Array(w.bytes.buffer, w.bytes.byteOffset, w.bytes.byteLength >> 1)));
  return v;
}

/** Σ w[wo+c]·x[xo+c] for c < n. Four partial sums for speed; the order is fixed, so results are too. */
function dot(w: Float32Array, wo: number, x: Float32Array, xo: number, n: number): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let c = 0;
  for (; c + 3 < n; c += 4) {
    s0 += w[wo + c] * x[xo + c];
    s1 += w[wo + c + 1] * x[xo + c + 1];
    s2 += w[wo + c + 2] * x[xo + c + 2];
    s3 += w[wo + c + 3] * x[xo + c + 3];
  }
  for (; c < n; c++) s0 += w[wo + c] * x[xo + c];
  return s0 + s1 + s2 + s3;
}

/** Σ table[w[wo+c]]·x[c] for c < n: a 16-bit weight row widened through `table` on the fly. */
function dotHalf(table: Float32Array, w: Uint16Array, wo: number, x: Float32Array, n: number): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let c = 0;
  for (; c + 3 < n; c += 4) {
    s0 += table[w[wo + c]] * x[c];
    s1 += table[w[wo + c + 1]] * x[c + 1];
    s2 += table[w[wo + c + 2]] * x[c + 2];
    s3 += table[w[wo + c + 3]] * x[c + 3];
  }
  for (; c < n; c++) s0 += table[w[wo + c]] * x[c];
  return s0 + s1 + s2 + s3;
}

export function createReferenceBackend(): Backend {
  let scratch = new Float32Array(0);
  const rowBuf = (cols: number) => (scratch.length >= cols ? scratch : (scratch = new Float32Array(cols)));

  return {
    name: 'reference',
    allocF32: (length) => new Float32Array(length),
    allocBytes: (length) => new Uint8Array(new ArrayBuffer(Math.ceil(length / 8) * 8), 0, length),

    matvec(out, w, x) {
      this.matmul(out, w, x, 1);
    },

    matmul(out, w, x, n) {
      const { rows, cols } = w;
      if (w.packed) throw new Error(`reference backend: ${w.dtype} weight [${rows}, ${cols}] is packed (${w.packed}) for another backend's kernels`);
      if (w.dtype === 'f32') {
        const all = f32View(w);
        for (let r = 0; r < rows; r++) {
          for (let b = 0; b < n; b++) out[b * rows + r] = dot(all, r * cols, x, b * cols, cols);
        }
        return;
      }
      if (n === 1 && (w.dtype === 'f16' || w.dtype === 'bf16')) {
        // One input: look the weights up as they are multiplied (no second pass over a widened row).
        const src = u16View(w);
        const table = w.dtype === 'f16' ? F16_TO_F32 : BF16_TO_F32;
        for (let r = 0; r < rows; r++) out[r] = dotHalf(table, src, r * cols, x, cols);
        return;
      }
      const row = rowBuf(cols);
      for (let r = 0; r < rows; r++) {
        widenRow(row, w, r);
        for (let b = 0; b < n; b++) out[b * rows + r] = dot(row, 0, x, b * cols, cols);
      }
    },
  };
}
