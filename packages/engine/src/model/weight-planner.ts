/**
 * The weights planner: checks each tensor's dtype and shape against the config, allocates its buffer
 * and records the reads that fill it (readPlanSync / readPlanAsync run them). The GQA, MLA and MoE
 * plans (weights.ts, weights-mla.ts, weights-moe.ts) all plan through it.
 */
import { basename } from 'node:path';
import { ModelFormatError, UnsupportedModelError } from '../errors.js';
import type { Backend, DType, MlxDType, Weight } from '../kernels/backend.js';
import { FP8_BLOCK, blockElems, isQuantized, rowBytes, weightBytes } from '../kernels/wasm/formats.js';
import { dequantizeRow } from '../kernels/wasm/quant-reference.js';
import { BF16_TO_F32, F16_TO_F32 } from '../numeric/half.js';
import type { Checkpoint } from '../safetensors/checkpoint.js';
import { SAFETENSORS_DTYPE_SIZES } from '../safetensors/format.js';
import type { GgufCheckpoint } from '../gguf/read-model.js';
import { dequantizeMlxRow, mlxMxfp4Of, mlxQuantOf, planMlxMatrix, type MlxQuant } from '../quant/mlx.js';
import { mxfp4ExpertShape, planMxfp4Expert } from '../quant/mxfp4-hf.js';
import { dequantizeFp8Row, isFp8Weight, planFp8Matrix } from '../quant/fp8.js';
import { int4LayoutOf, planInt4Matrix } from '../quant/int4-packed.js';
import type { WeightQuant } from '../config/quantization.js';
import { type PendingRead, ReadScratch } from '../quant/read-scratch.js';

/** A SwiGLU MLP: down(silu(gate(x))·up(x)) over this rank's intermediate rows. */
export interface DenseMlpWeights {
  kind: 'dense';
  /** [localFfn, hidden] */
  gate: Weight;
  /** [localFfn, hidden] */
  up: Weight;
  /** [hidden, localFfn] */
  down: Weight;
}

// The block formats come from GGUF files (gguf/read-model.ts); they stay in their blocks.
const DTYPES: Record<string, DType> = { F32: 'f32', F16: 'f16', BF16: 'bf16', Q8_0: 'q8_0', Q4_0: 'q4_0', Q4_K: 'q4_k', Q5_K: 'q5_k', Q6_K: 'q6_k', MXFP4: 'mxfp4' };

/** Where weights come from: a safetensors checkpoint or a GGUF file presenting Hugging Face names. */
export type WeightSource = Checkpoint | GgufCheckpoint;

export type { PendingRead };

/**
 * Plans a shard's weights: checks every tensor's dtype and shape and allocates its buffer, recording
 * the reads; nothing is read until the plan is complete, so a bad tensor fails before any I/O.
 */
export class WeightPlanner {
  readonly reads: PendingRead[] = [];
  readonly #scratch = new ReadScratch();
  readonly #sizing: boolean;

  /** `sizing`: only the checks and the reads are wanted (format/describe.ts), so read-through buffers stay empty. */
  constructor(
    readonly ckpt: WeightSource,
    readonly backend: Backend,
    /** config.json's declared weight quantization (compressed-tensors INT4 needs its group size). */
    readonly quant?: WeightQuant,
    options: { sizing?: boolean } = {},
  ) {
    this.#sizing = options.sizing ?? false;
  }

  /** A buffer a read goes through before it is rearranged into the weight. */
  #through(bytes: number): Uint8Array {
    return new Uint8Array(this.#sizing ? 0 : bytes);
  }

  /** Checks a tensor's dtype and shape; returns the file it lives in. */
  #check(name: string, shape: number[]) {
    const file = this.ckpt.file(name);
    const info = file.info(name);
    const fname = basename(file.path);
    if (!(info.dtype in DTYPES)) {
      const fp8 = info.dtype.startsWith('F8_') ? ` (FP8 is read for linear weights with a ${name}_scale_inv)` : '';
      throw new ModelFormatError(`${fname}: tensor ${name} has dtype ${info.dtype}; expected F32, F16, BF16 (or Q8_0/Q4_0/Q4_K/Q5_K/Q6_K/MXFP4 in GGUF)${fp8}`, file.path, name);
    }
    if (info.shape.length !== shape.length || info.shape.some((d, i) => d !== shape[i])) {
      throw new ModelFormatError(
        `${fname}: tensor ${name} has shape [${info.shape}], expected [${shape}] from config.json`,
        file.path,
        name,
      );
    }
    return { file, dtype: DTYPES[info.dtype], el: SAFETENSORS_DTYPE_SIZES[info.dtype] ?? 0 };
  }

  /**
   * Rows [r0, r1) × columns [c0, c1) of a [rows, cols] matrix, kept in its storage dtype. `linear`: the
   * matrix is only used through matvec/matmul (not read row by row like an embedding), so once read
   * the backend may repack it in place for its kernels (Backend.packWeight).
   */
  matrix(name: string, rows: number, cols: number, r: [number, number], c: [number, number] = [0, cols], linear = true): Weight {
    // MLX affine-quantized (weight + scales + biases): kept packed, see quant/mlx.ts.
    const mlx = mlxQuantOf(this.ckpt, name, rows, cols);
    if (mlx) {
      return this.#chunked(planMlxMatrix(this.ckpt as Checkpoint, name, mlx, r, c, this.backend, this.#scratch), linear);
    }
    // FP8 blocks (F8_E4M3 + weight_scale_inv) and compressed-tensors INT4 (weight_packed): kept in their bits.
    if (isFp8Weight(this.ckpt, name, rows, cols)) {
      return this.#chunked(planFp8Matrix(this.ckpt as Checkpoint, name, r, c, (n) => this.backend.allocBytes(n), this.#scratch), linear);
    }
    const int4 = int4LayoutOf(this.ckpt, name, rows, cols, this.quant);
    if (int4) return this.#chunked(planInt4Matrix(this.ckpt as Checkpoint, name, int4, [rows, cols], r, c, this.backend, this.#scratch), linear);
    const { file, dtype, el } = this.#check(name, [rows, cols]);
    const be = blockElems(dtype);
    if (c[0] % be || c[1] % be) {
      throw new UnsupportedModelError(
        `${basename(file.path)}: cannot split ${name} (${dtype}) at columns [${c[0]}, ${c[1]}): a tensor-parallel slice of a quantized matrix must start and end on a ${be}-element block boundary`,
      );
    }
    const size = isQuantized(dtype) ? weightBytes(dtype, r[1] - r[0], c[1] - c[0]) : (r[1] - r[0]) * (c[1] - c[0]) * el;
    const w: Weight = { dtype, rows: r[1] - r[0], cols: c[1] - c[0], bytes: this.backend.allocBytes(size) };
    const pack = linear && this.backend.packWeight ? () => this.backend.packWeight!(w) : undefined;
    this.reads.push({ file, name, dest: w.bytes, rows: r, cols: c, after: pack });
    return w;
  }

  /**
   * Expert `e` of a merged, input-major expert tensor [experts, in, out·parts] (gpt-oss's
   * `gate_up_proj`, `down_proj`): its `parts` column-interleaved outputs (column c·parts + p is output c of
   * part p) as [out, in] weights — transposed and de-interleaved after reading, an exact permutation.
   * Only the expert's own [in, out·parts] slab is read.
   */
  mergedExpert(name: string, experts: number, inDim: number, outDim: number, parts: number, e: number): Weight[] {
    const { file, dtype, el } = this.#check(name, [experts, inDim, outDim * parts]);
    if (isQuantized(dtype)) throw new UnsupportedModelError(`${basename(file.path)}: merged expert tensor ${name} is ${dtype}; only F32, F16 and BF16 are supported`);
    const slab = this.#through(inDim * outDim * parts * el);
    const out = Array.from({ length: parts }, (): Weight => ({ dtype, rows: outDim, cols: inDim, bytes: this.backend.allocBytes(outDim * inDim * el) }));
    const after = () => {
      for (let p = 0; p < parts; p++) {
        const dst = out[p].bytes;
        for (let o = 0; o < outDim; o++) {
          for (let i = 0; i < inDim; i++) {
            const from = (i * outDim * parts + o * parts + p) * el;
            dst.set(slab.subarray(from, from + el), (o * inDim + i) * el);
          }
        }
        this.backend.packWeight?.(out[p]);
      }
    };
    this.reads.push({ file, name, dest: slab, rows: [e, e + 1], cols: [0, inDim * outDim * parts], after });
    return out;
  }

  /** Row `e` of a merged [experts, n·parts] bias, de-interleaved into `parts` f32 vectors of n. */
  mergedExpertVector(name: string, experts: number, n: number, parts: number, e: number): Float32Array[] {
    const { file, dtype, el } = this.#check(name, [experts, n * parts]);
    if (isQuantized(dtype)) throw new ModelFormatError(`${basename(file.path)}: ${name} is ${dtype}; biases must be F32, F16 or BF16`, file.path, name);
    const bytes = new Uint8Array(n * parts * el);
    const out = Array.from({ length: parts }, () => this.backend.allocF32(n));
    const after = () => {
      const v = widenVector(bytes, dtype, n * parts);
      for (let p = 0; p < parts; p++) for (let c = 0; c < n; c++) out[p][c] = v[c * parts + p];
    };
    this.reads.push({ file, name, dest: bytes, rows: [e, e + 1], cols: [0, n * parts], after });
    return out;
  }

  /**
   * Rows r (every `step`-th from r[0]) of expert `e` of a Hugging Face MXFP4 tensor (`base`_blocks /
   * `base`_scales, gpt-oss), kept in MXFP4 blocks in GGUF order (quant/mxfp4-hf.ts).
   */
  mxfp4Expert(base: string, e: number, r: [number, number], step = 1): Weight {
    const cols = mxfp4ExpertShape(this.ckpt as Checkpoint, base).cols;
    return this.#chunked(planMxfp4Expert(this.ckpt as Checkpoint, base, e, r, [0, cols], this.backend, this.#scratch, step), true);
  }

  #keyBuffer = new Uint8Array(0);
  /** `n` bytes of the one buffer MLX kv_b_proj key rows pass through (grown, never shrunk). */
  #keyRows(n: number): Uint8Array {
    if (this.#keyBuffer.byteLength < n) this.#keyBuffer = new Uint8Array(n);
    const buf = this.#keyBuffer;
    return buf.subarray(0, n);
  }

  /** A weight filled by reads in chunks through the scratch: the last read completes it, then the backend may repack it. */
  #chunked(planned: { weight: Weight; reads: PendingRead[] }, linear: boolean): Weight {
    this.reads.push(...planned.reads);
    const last = planned.reads[planned.reads.length - 1];
    if (linear && this.backend.packWeight && last) {
      const complete = last.after;
      last.after = () => {
        complete?.();
        this.backend.packWeight!(planned.weight);
      };
    }
    return planned.weight;
  }

  /** Whether the checkpoint has a tensor of this name (alternative layouts of the same weights). */
  has(name: string): boolean {
    return this.ckpt.has(name);
  }

  /**
   * Slab `i` of a 3-D tensor [n, rows, cols] as a [rows, cols] weight (kept in storage dtype, packed
   * when linear): one expert of mlx-lm's stacked `switch_mlp` projections, one head of MLA's per-head
   * matrices. MLX-quantized slabs stay packed; only slab `i`'s bytes are read.
   */
  slab(name: string, shape: [number, number, number], i: number): Weight {
    const [n, rows, cols] = shape;
    if (mlxMxfp4Of(this.ckpt, name)) {
      const base = name.slice(0, -'.weight'.length);
      const s = mxfp4ExpertShape(this.ckpt as Checkpoint, base);
      if (s.experts !== n || s.rows !== rows || s.cols !== cols) {
        const file = this.ckpt.file(name);
        throw new ModelFormatError(`${basename(file.path)}: MXFP4 tensor ${name} holds ${s.experts} × [${s.rows}, ${s.cols}], expected ${n} × [${rows}, ${cols}] from config.json`, file.path, name);
      }
      return this.mxfp4Expert(base, i, [0, rows]);
    }
    const mlx = mlxQuantOf(this.ckpt, name, rows, cols, n);
    if (mlx) return this.#chunked(planMlxMatrix(this.ckpt as Checkpoint, name, mlx, [0, rows], [0, cols], this.backend, this.#scratch, i), true);
    const { file, dtype, el } = this.#check(name, shape);
    const size = isQuantized(dtype) ? weightBytes(dtype, rows, cols) : rows * cols * el;
    const w: Weight = { dtype, rows, cols, bytes: this.backend.allocBytes(size) };
    const pack = this.backend.packWeight ? () => this.backend.packWeight!(w) : undefined;
    this.reads.push({ file, name, dest: w.bytes, rows: [i, i + 1], cols: [0, rows * cols], after: pack });
    return w;
  }

  /**
   * Heads [h0, h1) of HF's kv_b_proj [H·(nope+v), kvLoraRank]: per head its key rows transposed to
   * [kvLoraRank, nope] and its value rows [v, kvLoraRank] (an exact permutation for f32/f16/bf16;
   * quantized rows are dequantized to f32 first).
   */
  kvBHeads(name: string, H: number, m: { nopeDim: number; vDim: number; kvLoraRank: number }, [h0, h1]: [number, number]): { kb: Weight[]; vb: Weight[] } {
    const { nopeDim: nope, vDim: v, kvLoraRank: L } = m;
    const per = nope + v;
    const mlx = mlxQuantOf(this.ckpt, name, H * per, L);
    if (mlx) return this.#mlxKvBHeads(name, H, m, mlx, [h0, h1]);
    if (isFp8Weight(this.ckpt, name, H * per, L)) return this.#fp8KvBHeads(name, per, nope, v, L, [h0, h1]);
    const { file, dtype, el } = this.#check(name, [H * per, L]);
    const quant = isQuantized(dtype);
    const rowBytesIn = quant ? weightBytes(dtype, 1, L) : L * el;
    const block = this.#through((h1 - h0) * per * rowBytesIn);
    const outDtype: DType = quant ? 'f32' : dtype;
    const oel = quant ? 4 : el;
    const alloc = (rows: number, cols: number): Weight => ({ dtype: outDtype, rows, cols, bytes: this.backend.allocBytes(rows * cols * oel) });
    const kb = Array.from({ length: h1 - h0 }, () => alloc(L, nope));
    const vb = Array.from({ length: h1 - h0 }, () => alloc(v, L));
    const after = () => {
      // Every row as outDtype elements: the stored bytes, or dequantized f32.
      const src = quant ? dequantizeRows(dtype, block, (h1 - h0) * per, L) : block;
      for (let h = 0; h < h1 - h0; h++) {
        const base = h * per;
        for (let i = 0; i < nope; i++) {
          for (let j = 0; j < L; j++) {
            const from = ((base + i) * L + j) * oel;
            kb[h].bytes.set(src.subarray(from, from + oel), (j * nope + i) * oel);
          }
        }
        vb[h].bytes.set(src.subarray((base + nope) * L * oel, (base + per) * L * oel));
        this.backend.packWeight?.(kb[h]);
        this.backend.packWeight?.(vb[h]);
      }
    };
    this.reads.push({ file, name, dest: block, rows: [h0 * per, h1 * per], cols: [0, L], after });
    return { kb, vb };
  }

  /**
   * An MLX-quantized kv_b_proj (mlx-lm conversions before the per-head `embed_q` / `unembed_out`): each
   * head's value rows are whole rows, so they stay packed; its key rows are used transposed, across the
   * quantization groups, so they are dequantized to f32 (exactly) and transposed — mlx-lm itself
   * requantizes them on load, which would not match the file's values. kvLoraRank·nope f32 per head.
   */
  #mlxKvBHeads(name: string, H: number, m: { nopeDim: number; vDim: number; kvLoraRank: number }, q: MlxQuant, [h0, h1]: [number, number]): { kb: Weight[]; vb: Weight[] } {
    const { nopeDim: nope, vDim: v, kvLoraRank: L } = m;
    const per = nope + v;
    const ckpt = this.ckpt as Checkpoint;
    // Reads run one after another and a head's key rows are consumed by its last read, so every head
    // (of every layer) can take its packed key rows through one buffer.
    const transient = { allocBytes: (n: number) => this.#keyRows(n) };
    const kb: Weight[] = [];
    const vb: Weight[] = [];
    for (let h = h0; h < h1; h++) {
      const keys = planMlxMatrix(ckpt, name, q, [h * per, h * per + nope], [0, L], transient, this.#scratch);
      const k: Weight = { dtype: 'f32', rows: L, cols: nope, bytes: this.backend.allocBytes(L * nope * 4) };
      const last = keys.reads[keys.reads.length - 1];
      const complete = last.after;
      last.after = () => {
        complete?.();
        const rows = new Float32Array(nope * L);
        for (let i = 0; i < nope; i++) dequantizeMlxRow(keys.weight.dtype as MlxDType, keys.weight.bytes, L, i, rows.subarray(i * L, (i + 1) * L));
        const kt = new Float32Array(k.bytes.buffer, k.bytes.byteOffset, L * nope);
        for (let i = 0; i < nope; i++) for (let j = 0; j < L; j++) kt[j * nope + i] = rows[i * L + j];
        this.backend.packWeight?.(k);
      };
      this.reads.push(...keys.reads);
      kb.push(k);
      vb.push(this.#chunked(planMlxMatrix(ckpt, name, q, [h * per + nope, (h + 1) * per], [0, L], this.backend, this.#scratch), true));
    }
    return { kb, vb };
  }

  /**
   * kvBHeads of an FP8 kv_b_proj, kept in FP8: each head's value rows are a row slice; its key rows
   * transposed ([kvLoraRank, nope]) stay FP8 when every head starts on a 128-row block (every column
   * block of a transpose then has one factor per row: DeepSeek's and Kimi's 256 rows per head), else
   * all are dequantized to f32 (as for GGUF-quantized kv_b_proj; one dtype for the layer's heads, which
   * the GPU stacks). The heads' rows are read into a temporary in their blocks first.
   */
  #fp8KvBHeads(name: string, per: number, nope: number, v: number, L: number, [h0, h1]: [number, number]): { kb: Weight[]; vb: Weight[] } {
    const planned = planFp8Matrix(this.ckpt as Checkpoint, name, [h0 * per, h1 * per], [0, L], (n) => this.#through(n), this.#scratch);
    const tmp = planned.weight.bytes;
    const rb = rowBytes('fp8_e4m3', L);
    const nbL = Math.ceil(L / FP8_BLOCK);
    const fp8 = (rows: number, cols: number): Weight => ({ dtype: 'fp8_e4m3', rows, cols, bytes: this.backend.allocBytes(rows * rowBytes('fp8_e4m3', cols)) });
    const inBlocks = (h0 * per) % FP8_BLOCK === 0 && (h1 - h0 === 1 || per % FP8_BLOCK === 0);
    const kb = Array.from({ length: h1 - h0 }, (): Weight => (inBlocks ? fp8(L, nope) : { dtype: 'f32', rows: L, cols: nope, bytes: this.backend.allocBytes(L * nope * 4) }));
    const vb = Array.from({ length: h1 - h0 }, () => fp8(v, L));
    const last = planned.reads[planned.reads.length - 1];
    const complete = last.after;
    last.after = () => {
      complete?.();
      const tv = new DataView(tmp.buffer, tmp.byteOffset, tmp.byteLength);
      for (let h = 0; h < h1 - h0; h++) {
        const first = h * per;
        vb[h].bytes.set(tmp.subarray((first + nope) * rb, (first + per) * rb));
        const k = kb[h];
        if (k.dtype === 'fp8_e4m3') {
          // row j of the transpose: per 128 columns (key rows first + 128b ..) that block row's factor for column j
          const nbk = Math.ceil(nope / FP8_BLOCK);
          const krb = rowBytes('fp8_e4m3', nope);
          const kv = new DataView(k.bytes.buffer, k.bytes.byteOffset, k.bytes.byteLength);
          for (let j = 0; j < L; j++) {
            for (let b = 0; b < nbk; b++) kv.setFloat32(j * krb + 4 * b, tv.getFloat32((first + b * FP8_BLOCK) * rb + 4 * Math.floor(j / FP8_BLOCK), true), true);
            for (let i = 0; i < nope; i++) k.bytes[j * krb + 4 * nbk + i] = tmp[(first + i) * rb + 4 * nbL + j];
          }
        } else {
          const row = new Float32Array(L);
          const kf = new Float32Array(k.bytes.buffer, k.bytes.byteOffset, L * nope);
          for (let i = 0; i < nope; i++) {
            dequantizeFp8Row(tmp, L, first + i, row);
            for (let j = 0; j < L; j++) kf[j * nope + i] = row[j];
          }
        }
        this.backend.packWeight?.(k);
        this.backend.packWeight?.(vb[h]);
      }
    };
    this.reads.push(...planned.reads);
    return { kb, vb };
  }

  /** Elements [a, b) of a 1-D tensor of length n, widened to f32. */
  vector(name: string, n: number, range: [number, number] = [0, n]): Float32Array {
    const { file, dtype, el } = this.#check(name, [n]);
    if (isQuantized(dtype)) throw new ModelFormatError(`${basename(file.path)}: 1-D tensor ${name} is ${dtype}; norms and biases must be F32, F16 or BF16`, file.path, name);
    const len = range[1] - range[0];
    const bytes = new Uint8Array(len * el);
    const out = this.backend.allocF32(len);
    const after = () => out.set(widenVector(bytes, dtype, len));
    this.reads.push({ file, name, dest: bytes, rows: [0, 1], cols: range, after });
    return out;
  }
}

/** `rows` quantized rows of `cols` as f32 bytes. */
function dequantizeRows(dtype: DType, bytes: Uint8Array, rows: number, cols: number): Uint8Array {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) dequantizeRow(dtype, bytes, cols, r, out.subarray(r * cols, (r + 1) * cols));
  return new Uint8Array(out.buffer);
}

/** `len` f32/f16/bf16 values stored in `bytes`, as f32. */
function widenVector(bytes: Uint8Array, dtype: DType, len: number): Float32Array {
  if (dtype === 'f32') return new Float32Array(bytes.buffer, bytes.byteOffset, len);
  const src = new Uint16Array(bytes.buffer, bytes.byteOffset, len);
  const table = dtype === 'f16' ? F16_TO_F32 : BF16_TO_F32;
  return Float32Array.from(src, (h) => table[h]);
}

/** Reads a planned shard's bytes, blocking. */
export function readPlanSync(reads: readonly PendingRead[]): void {
  for (const r of reads) {
    r.file.readBlock(r.name, r.dest, r.rows[0], r.rows[1], r.cols[0], r.cols[1]);
    r.after?.();
  }
}

/** Reads a planned shard's bytes without blocking the event loop; stops when `signal` aborts. */
export async function readPlanAsync(reads: readonly PendingRead[], signal?: AbortSignal): Promise<void> {
  for (const r of reads) {
    await r.file.readBlockAsync(r.name, r.dest, r.rows[0], r.rows[1], r.cols[0], r.cols[1], signal);
    r.after?.();
  }
}

/** A SwiGLU MLP's gate/up rows and down columns `rows` of intermediate size `I` (`prefix`.gate_proj etc.). */
export function planDenseMlp(rd: WeightPlanner, prefix: string, I: number, D: number, rows: [number, number], names: readonly [string, string, string] = ['gate_proj', 'up_proj', 'down_proj']): DenseMlpWeights {
  return {
    kind: 'dense',
    gate: rd.matrix(`${prefix}.${names[0]}.weight`, I, D, rows),
    up: rd.matrix(`${prefix}.${names[1]}.weight`, I, D, rows),
    down: rd.matrix(`${prefix}.${names[2]}.weight`, D, I, [0, D], rows),
  };
}
