/**
 * The WASM SIMD backend: kernels from wasm/kernels.wat over one shared, growable memory, computed by
 * the calling thread plus worker threads (split by output rows). Implements the engine's Backend
 * contract; weights stay in their storage dtype and are widened inside the kernels.
 *
 * Numerics (tests state the tolerances):
 * - f32/f16/bf16: f32 products and sums in a different order from the reference (4 SIMD lanes, then
 *   a horizontal sum, then the tail), so results differ from it only by f32 rounding.
 * - q8_0/q4_0: activations are quantized per 32-block to 8 bits first, as llama.cpp does for these
 *   formats, then exact integer block dots are scaled by d_w·d_x. The error against dequantized
 *   weights · f32 activations is that of 8-bit activations (bounded in the tests).
 */
import { F16_TO_F32 } from '../../numeric/half.js';
import type { AttentionArgs, Backend, DType, Weight } from '../backend.js';
import { Arena } from './arena.js';
import { physicalCores } from './cores.js';
import { QK, QK_K, blockElems, isKQuant, isMlx, isQuantized, mlxLayout, rowBytes, weightBytes } from './formats.js';
import {
  AFFINE_ADDR,
  ATTN_ADDR,
  ATTN_KERNEL,
  SWIGLU_KERNEL,
  CORR_ADDR,
  CTL,
  CTL_ADDR,
  CTL_FIELDS,
  F16_TABLE_ADDR,
  HEAP_BASE,
  KERNEL,
  MAX_PAGES,
  MLX_KERNEL,
  PACKED_KERNEL,
  PAGE_BYTES,
  QTILES_ADDR,
  READ_KERNEL,
  WIDE_ADDR,
} from './layout.js';
import { type KernelExports, type SimdBuild, type SimdChoice, WA, type WasmMemory, kernelModule, resolveSimd } from './module.js';
import { isPackable, packRows4, packedSubnormals } from './pack.js';
import { ThreadPool } from './pool.js';

export interface WasmBackendOptions {
  /** Threads computing each kernel, the calling thread included. Default: physical cores. */
  threads?: number;
  /** Memory to reserve up front in bytes (it grows on demand up to 4 GiB). Default 64 MiB. */
  initialBytes?: number;
  /**
   * Kernels with fewer multiply-adds than this stay on the calling thread: waking workers costs more
   * than it saves. Default 2^20 (~70 µs of f16 work on one thread; wasm/README.md "Threads" has the
   * measurements that moved it up from 2^17).
   */
  parallelThreshold?: number;
  /**
   * Which build of the kernels (src/kernels/wasm/module.ts): 'auto' (default) the relaxed-SIMD one where
   * the runtime runs it (turning Node 20's --experimental-wasm-relaxed-simd on), else the baseline;
   * 'relaxed' or 'baseline' force one (tests and benches compare both in one process).
   */
  simd?: SimdChoice;
}

export type { AttentionArgs };

export interface WasmBackend extends Backend {
  readonly name: 'wasm';
  /** Threads per kernel, the calling thread included. */
  readonly threads: number;
  /** The kernel build in use: 'relaxed' (relaxed SIMD: int8 dots, FMA) or 'baseline' (WASM SIMD 128). */
  readonly simd: SimdBuild;
  /** Bytes held by live allocations (weights, activations, scratch): the shard's resident bytes. */
  usedBytes(): number;
  /**
   * Gives a buffer from allocF32/allocBytes back for reuse (e.g. a finished sequence's KV cache): the
   * allocators never free on their own, so a long-running engine must release what it drops. A later
   * allocation of the same size reuses it.
   */
  release(buf: Float32Array | Uint8Array): void;
  /** Current size of the shared memory. */
  memoryBytes(): number;
  /**
   * Benchmark baseline: reads `rows` rows of `bytes` (rows·rowBytes, rowBytes a multiple of 64)
   * through the same row split and threads as the kernels, one integer add per 16 bytes.
   */
  readSweep(bytes: Uint8Array, rows: number): void;
  /** The contract's optional attention over a KV cache; threaded over (query, head) pairs. */
  attention(args: AttentionArgs): void;
  /**
   * The contract's optional SwiGLU gate: a[i] = silu(a[i])·b[i] for i < n (SIMD exp, within a few f32
   * ulp of model/math.ts's swiglu). A prompt's or a batch's worth runs on every thread, spans of it
   * a job (one token's stays on the caller: waking the workers would cost more).
   */
  swiglu(a: Float32Array, b: Float32Array, n: number): void;
  /** The contract's optional RMSNorm rows (wasm rmsnorm_rows; single-threaded, O(hidden) per token). */
  rmsnorm(out: Float32Array, x: Float32Array, weight: Float32Array, n: number, dim: number, eps: number): void;
  /** The contract's optional residual add. */
  add(x: Float32Array, y: Float32Array, n: number): void;
  /** The contract's optional shared-input matmuls: the activations prepared once per weight format. */
  matmulShared(jobs: readonly { out: Float32Array; w: Weight }[], x: Float32Array, n: number): void;
  /** Kernels offered to the worker threads and row chunks the workers computed (the rest: caller). */
  threadStats(): { sharedJobs: number; workerChunks: number };
  /** e^x (x ≤ 0) as the softmax in `attention` computes it (f32 SIMD exp); exposed for tests. */
  expNeg(x: number): number;
  /**
   * The contract's packWeight: f16, q8_0 and q4_0 matrices of 4+ rows are interleaved in place in
   * groups of 4 rows (pack.ts, llama.cpp's repacked x4 layouts), so decode reads one sequential stream
   * and shares each activation load between 4 rows. Results are the same bits as unpacked, except
   * f16 rows holding subnormal weights, whose terms are added after the dense sum (pack.ts; within
   * the f16 kernels' bound). Other dtypes, and weights already packed, are left as they are.
   */
  packWeight(w: Weight): void;
  dispose(): void;
}

const F16_X_SCALE = 2 ** 64;
/** FP8 activations are scaled the same way: the kernels' code bits are value·2^-120 (wasm/fp8tiles.ts). */
const FP8_X_SCALE = 2 ** 64;

export function createWasmBackend(options: WasmBackendOptions = {}): WasmBackend {
  const threads = options.threads ?? physicalCores();
  if (!Number.isInteger(threads) || threads < 1 || threads > 256) {
    throw new Error(`wasm backend: threads must be an integer from 1 to 256, got ${threads}`);
  }
  const threshold = options.parallelThreshold ?? 2 ** 20;
  /** What one swiglu value weighs against the threshold, in matmul multiply-adds (1.7 ns vs ~0.05). */
  const SWIGLU_COST = 32;
  const initialBytes = options.initialBytes ?? 64 * 2 ** 20;
  const initialPages = Math.min(MAX_PAGES, Math.ceil((HEAP_BASE + initialBytes) / PAGE_BYTES));

  const simd = resolveSimd(options.simd ?? 'auto');
  const module = kernelModule(simd);
  const { memory, maxPages } = reserveMemory(initialPages);
  const instance = new WA.Instance(module, { env: { memory } });
  const k = instance.exports as unknown as KernelExports;
  const arena = new Arena(memory, maxPages);
  new Float32Array(memory.buffer, F16_TABLE_ADDR, 65536).set(F16_TO_F32);
  const ctl = new Int32Array(memory.buffer, CTL_ADDR, CTL_FIELDS);
  const pool = new ThreadPool(module, memory, k, threads - 1);

  let scratchAddr = 0;
  let scratchBytes = 0;
  const scratch = (bytes: number): number => {
    if (bytes > scratchBytes) {
      const size = Math.max(bytes, scratchBytes * 2, 64 * 1024);
      if (scratchBytes > 0) arena.free(scratchAddr);
      scratchAddr = arena.alloc(size, 'activation scratch');
      scratchBytes = size;
    }
    return scratchAddr;
  };

  // A packed f16 weight's subnormal terms (pack.ts), as the kernels read them: row starts, entries.
  const corr = new Int32Array(memory.buffer, CORR_ADDR, 2);
  const subnormalTables = new WeakMap<Uint8Array, [number, number]>();
  function subnormalTable(w: Weight): void {
    const taken = packedSubnormals(w);
    if (!taken) return;
    const count = taken.length / 3;
    // (allocate before taking views: an allocation may grow the memory, and views of the old buffer
    // object end at its old size)
    const startsAddr = arena.alloc((w.rows + 1) * 4, 'f16 subnormal rows');
    const entriesAddr = arena.alloc(count * 12, 'f16 subnormal terms');
    const starts = new Int32Array(arena.buffer(), startsAddr, w.rows + 1);
    const at = new Int32Array(arena.buffer(), entriesAddr, count * 3);
    const value = new Float32Array(at.buffer, at.byteOffset, count * 3);
    for (let i = 0; i < count; i++) {
      const [r, c, h] = [taken[3 * i], taken[3 * i + 1], taken[3 * i + 2]];
      starts[r + 1]++;
      at[3 * i] = r * 4;
      // byte offset of column c in the prepared activations: per 8 columns the even ones, then the odd
      const j = c & 7;
      at[3 * i + 1] = ((c & ~7) + (j & 1 ? 4 + (j >> 1) : j >> 1)) * 4;
      value[3 * i + 2] = F16_TO_F32[h] * 2 ** -64;
    }
    for (let r = 0; r < w.rows; r++) starts[r + 1] += starts[r];
    subnormalTables.set(w.bytes, [startsAddr, entriesAddr]);
  }

  // Prompt batches widen weight groups once per thread (wasm $rows): f16 4·cols f32, q8_0/q4_0 17·cols bytes.
  const wide = new Int32Array(memory.buffer, WIDE_ADDR, 2);
  let wideBytes = 0;
  const wideScratch = (cols: number, perThread = 16 * cols): void => {
    if (perThread <= wideBytes) return;
    if (wideBytes > 0) arena.free(wide[0]);
    wide[0] = arena.alloc(perThread * threads, 'prompt-batch weight scratch');
    wide[1] = perThread;
    wideBytes = perThread;
  };

  // Address of the current quantized prompt batch's activations in tile layout (wasm quant_tiles).
  const qtiles = new Int32Array(memory.buffer, QTILES_ADDR, 1);
  // The current MLX weight's group size and scale dtype, read by the affine kernels.
  const affine = new Int32Array(memory.buffer, AFFINE_ADDR, 2);

  /**
   * K activations (quant_q8k, tokens kStride apart) into the super-block token tiles $ktiles8/4 read: tiles
   * of 4 tokens (the last: the rest); in a tile of t tokens, per super-block 516·t bytes: for each of the
   * 128 column pairs each token's pair of values as one i32, then each token's d_x. The pairs: the q4 form
   * (packed q4_k's widened weights expect it), or with `plain` the i16 q themselves (q6_k's).
   */
  function kTiles(src: number, dst: number, cols: number, n: number, kStride: number, plain = false): void {
    const nsb = cols / QK_K;
    const i32 = new Int32Array(memory.buffer);
    let o = dst >> 2;
    for (let t0 = 0; t0 < n; t0 += 4) {
      const tn = Math.min(4, n - t0);
      for (let sb = 0; sb < nsb; sb++) {
        for (let k = 0; k < 128; k++) {
          for (let i = 0; i < tn; i++) i32[o++] = i32[((src + (t0 + i) * kStride + (plain ? 0 : cols * 2 + nsb * 20)) >> 2) + sb * 128 + k];
        }
        // d_x as its bits
        for (let i = 0; i < tn; i++) i32[o++] = i32[((src + (t0 + i) * kStride + cols * 2) >> 2) + sb];
      }
    }
  }

  /**
   * The relaxed build's layout of the same tiles ($krtiles8/4, wasm/kquants.ts): per super-block, for each
   * of its 8 sub-blocks and each 4 columns, each token's plain int8 activations as one i32, then each
   * token's d_x: 260·t bytes per super-block.
   */
  function kTilesRelaxed(src: number, dst: number, cols: number, n: number, kStride: number): void {
    const nsb = cols / QK_K;
    const i32 = new Int32Array(memory.buffer);
    // quant_q8k's relaxed build writes the plain q as int8 after the d_x and sums (wasm/kquants.ts
    // quantQ8k): each 4 columns are one i32 there already (copied per i32, not per byte: ~5% of a q4_k prompt)
    const i8At = cols * 2 + nsb * 20;
    let o = dst >> 2;
    for (let t0 = 0; t0 < n; t0 += 4) {
      const tn = Math.min(4, n - t0);
      for (let sb = 0; sb < nsb; sb++) {
        for (let quad = 0; quad < 64; quad++) {
          for (let i = 0; i < tn; i++) i32[o++] = i32[((src + (t0 + i) * kStride + i8At) >> 2) + sb * 64 + quad];
        }
        for (let i = 0; i < tn; i++) i32[o++] = i32[((src + (t0 + i) * kStride + cols * 2) >> 2) + sb];
      }
    }
  }

  /**
   * quant_mlx4 activations (tokens xStride apart) into the token tiles $mtiles8/4 read: tiles of 4 tokens
   * (the last: the rest); in a tile of t tokens, per MLX group: per 32-column block each of its 16 i32 pairs
   * for each token; then each token's d_x; then each token's group sum (wasm/mlxtiles.ts).
   */
  function mlxTiles(src: number, dst: number, cols: number, n: number, groupSize: number, xStride: number): void {
    const i32 = new Int32Array(memory.buffer);
    const s = src >> 2;
    const xs = xStride >> 2;
    const dAt = cols >> 1;
    const sumAt = dAt + cols / groupSize;
    const nb = groupSize / 32;
    let o = dst >> 2;
    for (let t0 = 0; t0 < n; t0 += 4) {
      const tn = Math.min(4, n - t0);
      for (let g = 0; g < cols / groupSize; g++) {
        for (let b = g * nb; b < (g + 1) * nb; b++) {
          for (let k = 0; k < 16; k++) for (let i = 0; i < tn; i++) i32[o++] = i32[s + (t0 + i) * xs + 16 * b + k];
        }
        for (let i = 0; i < tn; i++) i32[o++] = i32[s + (t0 + i) * xs + dAt + g];
        for (let i = 0; i < tn; i++) i32[o++] = i32[s + (t0 + i) * xs + sumAt + g];
      }
    }
  }

  function check(out: Float32Array, w: Weight, x: Float32Array, n: number): void {
    const { dtype, rows, cols } = w;
    if (!(dtype in KERNEL) && !isMlx(dtype)) throw new Error(`wasm backend: unsupported weight dtype ${String(dtype)}`);
    if (!Number.isInteger(rows) || !Number.isInteger(cols) || rows < 0 || cols < 0) {
      throw new Error(`wasm backend: bad weight shape [${rows}, ${cols}]`);
    }
    const be = blockElems(dtype);
    if (cols % be !== 0) throw new Error(`wasm backend: ${dtype} weight [${rows}, ${cols}] needs a column count that is a multiple of ${be}`);
    const need = weightBytes(dtype, rows, cols);
    if (w.bytes.byteLength < need) {
      throw new Error(`wasm backend: ${dtype} weight [${rows}, ${cols}] needs ${need} bytes, has ${w.bytes.byteLength}`);
    }
    if (x.length < cols * n) throw new Error(`wasm backend: input has ${x.length} values, need ${cols}×${n}`);
    if (out.length < rows * n) throw new Error(`wasm backend: output has ${out.length} values, need ${rows}×${n}`);
  }

  function matmul(out: Float32Array, w: Weight, x: Float32Array, n: number): void {
    if (!Number.isInteger(n) || n < 0) throw new Error(`wasm backend: bad batch size ${n}`);
    check(out, w, x, n);
    if (n === 0 || w.rows === 0) return;
    run(out, w, n, prepare(w, x, n));
  }

  /**
   * Several weights against one input (q/k/v, gate/up): the activations are prepared once per dtype and
   * layout among them (the same preparation matmul does), then each weight's kernel runs on them.
   */
  // matmulShared's jobs already run (plain loops and a reused array: the MoE decode shares one input among
  // 2·top-k jobs, and closures and a Set per call cost ~1% of such a step)
  let sharedDone = new Uint8Array(16);
  function matmulShared(jobs: readonly { out: Float32Array; w: Weight }[], x: Float32Array, n: number): void {
    if (!Number.isInteger(n) || n < 0) throw new Error(`wasm backend: bad batch size ${n}`);
    for (let i = 0; i < jobs.length; i++) check(jobs[i].out, jobs[i].w, x, n);
    if (n === 0) return;
    if (sharedDone.length < jobs.length) sharedDone = new Uint8Array(jobs.length);
    const done = sharedDone;
    done.fill(0, 0, jobs.length);
    for (let i = 0; i < jobs.length; i++) {
      const w = jobs[i].w;
      if (done[i] || w.rows === 0) continue;
      const prep = prepare(w, x, n);
      for (let j = i; j < jobs.length; j++) {
        const other = jobs[j].w;
        if (done[j] || other.rows === 0 || other.dtype !== w.dtype || other.packed !== w.packed || other.cols !== w.cols) continue;
        done[j] = 1;
        run(jobs[j].out, other, n, prep);
      }
    }
  }

  interface Prepared {
    xAddr: number;
    xStride: number;
  }

  /**
   * The kernels' form of the activations for `w`'s dtype and layout, in scratch (plain f32 stays where it
   * is); sets the tile address and MLX parameters the kernels read. Valid until the next prepare.
   */
  function prepare(w: Weight, x: Float32Array, n: number): Prepared {
    const { dtype, cols } = w;
    let xAddr = arena.addressOf(x, 'input buffer');
    let xStride = cols * 4;
    if (dtype === 'fp8_e4m3') {
      // the 1-token kernel takes the activations times 2^64 (the codes' bits are value·2^-120), each 16-column
      // group in its decode's lane order (wasm/fp8tiles.ts);
      // prompt batches on the 32-column grid run q8_0's integer tiles over 4-row groups widened once per
      // thread ($rows_fp8q) against 15-bit activations (quant_q8 mode 2) in tile layout, the rows%4 tail the
      // 1-token kernel
      const scaledBytes = Math.ceil((cols * n * 4) / 16) * 16;
      const tiles = n >= 2 && cols % QK === 0;
      const qStride = cols * 2 + (cols / QK) * 8;
      const stdBytes = Math.ceil((qStride * n) / 16) * 16;
      if (tiles) wideScratch(cols, 17 * cols);
      const dst = scratch(scaledBytes + (tiles ? stdBytes + (cols / QK) * 68 * n : 0));
      if (tiles) {
        k.quant_q8(xAddr, dst + scaledBytes, cols, n, 2);
        k.quant_tiles(dst + scaledBytes, dst + scaledBytes + stdBytes, cols, n);
        qtiles[0] = dst + scaledBytes + stdBytes;
      }
      k.fp8_prep_x(xAddr, dst, cols, n, FP8_X_SCALE);
      xAddr = dst;
    } else if (dtype === 'f16' || dtype === 'bf16') {
      // f16 prompt batches widen each 4-row group once: from 4 tokens on, or from 2 when packed.
      if (dtype === 'f16' && n >= (w.packed ? 2 : 4)) wideScratch(cols);
      const dst = scratch(cols * n * 4);
      k.prep_pairs(xAddr, dst, cols, n, dtype === 'f16' ? F16_X_SCALE : 1);
      xAddr = dst;
    } else if (isMlx(dtype)) {
      const { bits, groupSize, scales } = mlxLayout(dtype);
      if (w.packed) {
        // packed 4-bit: 15-bit integer activations with one d per MLX group, plus each group's f32 sum
        xStride = cols * 2 + (cols / groupSize) * 8;
        // prompt batches run token tiles over groups widened once per thread (wasm/mlxtiles.ts): 16 bytes per
        // column and 64 per MLX group for every 8 rows
        const tiles = n >= 2;
        // the relaxed build's 1-token kernel reads the activations split into int8 x >> 7 and x & 127,
        // converted once per matvec; its address goes where the tiles' would (the rows%4 tail reads dst)
        const toDecode = n === 1 ? k.quant_mlx4_decode : undefined;
        const stdBytes = Math.ceil((xStride * n) / 16) * 16;
        if (tiles) wideScratch(cols, 16 * cols + (cols / groupSize) * 64);
        const dst = scratch(stdBytes + (tiles ? xStride * n : 0) + (toDecode ? xStride : 0));
        k.quant_mlx4(xAddr, dst, cols, n, groupSize);
        if (toDecode) {
          toDecode(dst, dst + stdBytes, cols, groupSize);
          qtiles[0] = dst + stdBytes;
        }
        if (tiles) {
          mlxTiles(dst, dst + stdBytes, cols, n, groupSize, xStride);
          qtiles[0] = dst + stdBytes;
        }
        xAddr = dst;
      } else {
        // f32 activations reordered to the packed lanes, plus each group's sum (wasm/affine.ts)
        xStride = cols * 4 + (cols / groupSize) * 4;
        const dst = scratch(xStride * n);
        k.prep_affine(xAddr, dst, cols, n, bits === 3 || bits === 4 ? 8 : 4, groupSize);
        xAddr = dst;
      }
      affine[0] = groupSize;
      affine[1] = scales === 'f16' ? 0 : scales === 'bf16' ? 1 : 2;
    } else if (isKQuant(dtype)) {
      // ggml's Q8_K activations per 256 columns, each 32-column sub-block's sum, and the q4 form (kquants.ts).
      xStride = cols * 4 + (cols / QK_K) * 20;
      const kBytes = Math.ceil((xStride * n) / 16) * 16;
      // packed q4_k and row-major q5_k / q6_k prompt batches run token tiles over whole super-blocks (wasm
      // $kwiden32 / $k5widen32 / $k6widen32, $ktiles8); q5_k's and q6_k's take the baseline's tiles of plain
      // pairs in both builds
      const tiles = n >= 2 && ((dtype === 'q4_k' && w.packed !== undefined) || dtype === 'q5_k' || dtype === 'q6_k');
      if (tiles) wideScratch(cols, 17 * cols);
      const dst = scratch(kBytes + (tiles ? (cols / QK_K) * 516 * n : 0));
      k.quant_q8k(xAddr, dst, cols, n);
      if (tiles) {
        if (dtype !== 'q4_k') kTiles(dst, dst + kBytes, cols, n, xStride, true);
        else (simd === 'relaxed' ? kTilesRelaxed : kTiles)(dst, dst + kBytes, cols, n, xStride);
        qtiles[0] = dst + kBytes;
      }
      xAddr = dst;
    } else if (isQuantized(dtype)) {
      xStride = cols * 2 + (cols / QK) * 8;
      // Packed prompt batches (wasm $qtiles4/8) widen two 4-row groups at a time per thread (17·cols
      // bytes) and read the activations again in tile layout (quant_tiles: 68 bytes per token and block).
      // Row-major MXFP4 (gpt-oss experts) takes the same tiles over groups widened from its blocks (wasm/mxfp4tiles.ts).
      const tiles = (w.packed !== undefined || dtype === 'mxfp4') && n >= 2;
      // the relaxed build's packed q8_0 / q4_0 decode reads int8 activations (q8_0: x+ and x-, q4_0: plain),
      // converted once per matvec instead of once per 4-row group; its address goes where the tiles' would
      const toDecode = w.packed !== undefined && n === 1 ? (dtype === 'q4_0' ? k.quant_q4_decode : dtype === 'q8_0' ? k.quant_q8_decode : undefined) : undefined;
      const stdBytes = Math.ceil((xStride * n) / 16) * 16;
      if (tiles) wideScratch(cols, 17 * cols);
      const dst = scratch(stdBytes + (tiles ? (cols / QK) * 68 * n : 0) + (toDecode ? xStride : 0));
      k.quant_q8(xAddr, dst, cols, n, dtype === 'q4_0' ? 1 : 0);
      if (toDecode) {
        toDecode(dst, dst + stdBytes, cols);
        qtiles[0] = dst + stdBytes;
      }
      if (tiles) {
        // the relaxed build's q4_0 tiles take int8 quads of the plain activations (wasm/qtiles.ts)
        if (dtype === 'q4_0' && k.quant_tiles_q4r) k.quant_tiles_q4r(dst, dst + stdBytes, cols, n);
        else k.quant_tiles(dst, dst + stdBytes, cols, n);
        qtiles[0] = dst + stdBytes;
      }
      xAddr = dst;
    }
    return { xAddr, xStride };
  }

  function run(out: Float32Array, w: Weight, n: number, { xAddr, xStride }: Prepared): void {
    const { dtype, rows, cols } = w;
    const outAddr = arena.addressOf(out, 'output buffer');
    const wAddr = arena.addressOf(w.bytes, `${dtype} weight [${rows}, ${cols}]`);
    const kernel = w.packed
      ? PACKED_KERNEL[isMlx(dtype) ? 'mlx4' : (dtype as keyof typeof PACKED_KERNEL)]
      : isMlx(dtype)
        ? MLX_KERNEL[mlxLayout(dtype).bits]
        : KERNEL[dtype as keyof typeof KERNEL];
    if (kernel === undefined) throw new Error(`wasm backend: no packed kernel for ${dtype}`);
    const table = w.packed ? subnormalTables.get(w.bytes) : undefined;
    corr[0] = table ? table[0] : 0;
    corr[1] = table ? table[1] : 0;
    dispatch(kernel, outAddr, wAddr, xAddr, rows, cols, n, rowBytes(dtype, cols), xStride);
  }

  /** Publishes a job and runs it on the calling thread plus, for big enough jobs, the workers. */
  function dispatch(
    kernel: number,
    outAddr: number,
    wAddr: number,
    xAddr: number,
    rows: number,
    cols: number,
    n: number,
    rowBytesOf: number,
    xStride: number,
  ): void {
    // Matrix kernels take rows in groups of 4 (swiglu: values, so every span but the last is whole
    // SIMD steps); attention items are independent (unit 1).
    const unit = kernel === ATTN_KERNEL ? 1 : 4;
    const parallel = pool.helpers > 0 && rows >= 2 * unit && rows * cols * n >= threshold;
    // About four chunks per thread so a thread the OS delays costs little.
    const chunkRows = parallel ? Math.max(unit, Math.ceil(rows / (threads * 4) / unit) * unit) : Math.ceil(rows / unit) * unit;
    ctl[CTL.kernel] = kernel;
    ctl[CTL.out] = outAddr;
    ctl[CTL.w] = wAddr;
    ctl[CTL.x] = xAddr;
    ctl[CTL.rows] = rows;
    ctl[CTL.cols] = cols;
    ctl[CTL.n] = n;
    ctl[CTL.rowBytes] = rowBytesOf;
    ctl[CTL.xStride] = xStride;
    ctl[CTL.chunkRows] = chunkRows;
    pool.run(parallel);
  }

  const attnParams = new Int32Array(memory.buffer, ATTN_ADDR, 16);
  const attnScale = new Float32Array(memory.buffer, ATTN_ADDR, 16);
  function attention(a: AttentionArgs): void {
    const { n, pos0, heads, kvHeads, headDim: hd, group } = a;
    const headOffset = a.headOffset ?? 0;
    const kvOffset = a.kvOffset ?? 0;
    const window = a.window ?? 0;
    for (const [name, v] of Object.entries({ n, pos0, heads, kvHeads, headDim: hd, group, headOffset, kvOffset, window })) {
      if (!Number.isInteger(v) || v < 0) throw new Error(`wasm attention: ${name} must be a non-negative integer, got ${v}`);
    }
    if (n === 0 || heads === 0) return;
    if (group < 1 || hd < 1) throw new Error('wasm attention: group and headDim must be at least 1');
    const kvOf = (h: number) => Math.floor((h + headOffset) / group) - kvOffset;
    if (kvOf(0) < 0 || kvOf(heads - 1) >= kvHeads) {
      throw new Error(`wasm attention: heads ${headOffset}..${headOffset + heads - 1} map to KV heads outside 0..${kvHeads - 1} (group ${group}, kvOffset ${kvOffset})`);
    }
    const len = pos0 + n;
    if (a.q.length < n * heads * hd) throw new Error(`wasm attention: q has ${a.q.length} values, need ${n}×${heads}×${hd}`);
    if (a.out.length < n * heads * hd) throw new Error(`wasm attention: out has ${a.out.length} values, need ${n}×${heads}×${hd}`);
    for (const [name, c] of [['k', a.k], ['v', a.v]] as const) {
      if (c.length < len * kvHeads * hd) throw new Error(`wasm attention: ${name} cache has ${c.length} values, need ${len}×${kvHeads}×${hd}`);
    }
    const scores = scratch(n * heads * len * 4);
    const p = attnParams;
    p[0] = arena.addressOf(a.q, 'attention q');
    p[1] = arena.addressOf(a.out, 'attention out');
    p[2] = arena.addressOf(a.k, 'K cache');
    p[3] = arena.addressOf(a.v, 'V cache');
    p[4] = n;
    p[5] = pos0;
    p[6] = heads;
    p[7] = hd;
    p[8] = kvHeads * hd;
    p[9] = group;
    p[10] = headOffset;
    p[11] = kvOffset;
    attnScale[12] = a.scale;
    p[13] = window;
    p[14] = scores;
    p[15] = len;
    // Threshold on the multiply-adds: n·heads items of about len·headDim·2 each.
    dispatch(ATTN_KERNEL, 0, 0, 0, n * heads, Math.max(1, Math.min(len, window || len)) * hd * 2, 1, 0, 0);
  }

  let sweepOut: Float32Array | undefined;
  function readSweep(bytes: Uint8Array, rows: number): void {
    const rb = bytes.byteLength / rows;
    if (!Number.isInteger(rb) || rb % 64 !== 0) throw new Error('wasm backend: readSweep needs rows of a multiple of 64 bytes');
    if (!sweepOut || sweepOut.length < rows) sweepOut = allocF32(rows);
    dispatch(READ_KERNEL, arena.addressOf(sweepOut, 'sweep output'), arena.addressOf(bytes, 'sweep buffer'), 0, rows, rb / 4, 1, rb, 0);
  }

  function allocF32(length: number): Float32Array {
    const addr = arena.alloc(length * 4, `f32 buffer of ${length}`);
    return new Float32Array(arena.buffer(), addr, length);
  }

  let disposed = false;
  const backend: WasmBackend = {
    name: 'wasm',
    threads,
    simd,
    allocF32,
    allocBytes(length: number): Uint8Array {
      const addr = arena.alloc(length, `byte buffer of ${length}`);
      return new Uint8Array(arena.buffer(), addr, length);
    },
    matvec(out, w, x) {
      matmul(out, w, x, 1);
    },
    matmul,
    matmulShared,
    usedBytes: () => arena.used,
    release: (buf: Float32Array | Uint8Array) => arena.release(buf, 'released buffer'),
    memoryBytes: () => memory.buffer.byteLength,
    readSweep,
    attention,
    expNeg: (x: number) => k.exp_neg(x),
    packWeight(w: Weight) {
      if (w.packed || !isPackable(w.dtype) || w.rows < 4) return;
      arena.addressOf(w.bytes, `${w.dtype} weight [${w.rows}, ${w.cols}]`);
      if (isQuantized(w.dtype) && w.cols % QK !== 0) return;
      packRows4(w);
      subnormalTable(w);
    },
    swiglu(a: Float32Array, b: Float32Array, n: number) {
      if (!Number.isInteger(n) || n < 0 || a.length < n || b.length < n) {
        throw new Error(`wasm swiglu: need ${n} values, have ${a.length} and ${b.length}`);
      }
      const gate = arena.addressOf(a, 'swiglu gate');
      const up = arena.addressOf(b, 'swiglu up');
      // A prompt's or a batch's worth runs on every thread (a value costs about as much as 32
      // multiply-adds of a matmul); one token's stays on the caller, cheaper than waking the workers.
      if (pool.helpers > 0 && n * SWIGLU_COST >= threshold) dispatch(SWIGLU_KERNEL, 0, gate, up, n, SWIGLU_COST, 1, 0, 0);
      else k.swiglu(gate, up, n);
    },
    rmsnorm(out: Float32Array, x: Float32Array, weight: Float32Array, n: number, dim: number, eps: number) {
      if (!Number.isInteger(n) || !Number.isInteger(dim) || n < 0 || dim < 1 || x.length < n * dim || out.length < n * dim || weight.length < dim) {
        throw new Error(`wasm rmsnorm: ${n} rows of ${dim} need ${n * dim} values and a weight of ${dim}; have ${x.length}, ${out.length}, ${weight.length}`);
      }
      k.rmsnorm_rows(arena.addressOf(out, 'rmsnorm output'), arena.addressOf(x, 'rmsnorm input'), arena.addressOf(weight, 'rmsnorm weight'), n, dim, eps);
    },
    add(x: Float32Array, y: Float32Array, n: number) {
      if (!Number.isInteger(n) || n < 0 || x.length < n || y.length < n) throw new Error(`wasm add: need ${n} values, have ${x.length} and ${y.length}`);
      k.add_f32(arena.addressOf(x, 'residual'), arena.addressOf(y, 'residual update'), n);
    },
    threadStats: () => ({ ...pool.stats }),
    dispose() {
      if (disposed) return;
      disposed = true;
      workerReaper.unregister(backend);
      pool.dispose();
    },
  };
  // A backend dropped without dispose() would leave its workers asleep forever, holding the memory.
  if (pool.helpers > 0) workerReaper.register(backend, pool, backend);
  return backend;
}

/**
 * A shared memory cannot move, so V8 reserves its maximum (4 GiB) of address space up front. Where
 * that reservation fails (a capped address space, e.g. `ulimit -v`), settle for less rather than
 * not at all; allocations past it then fail with a message naming the smaller limit.
 */
function reserveMemory(initialPages: number): { memory: WasmMemory; maxPages: number } {
  let lastError: unknown;
  for (let maxPages = MAX_PAGES; maxPages >= initialPages; maxPages = Math.floor(maxPages / 2)) {
    try {
      return { memory: new WA.Memory({ initial: initialPages, maximum: maxPages, shared: true }), maxPages };
    } catch (err) {
      lastError = err;
    }
  }
  throw new Error(`wasm backend: cannot reserve a shared WebAssembly memory of ${initialPages} pages: ${(lastError as Error)?.message}`);
}

const workerReaper = new FinalizationRegistry<ThreadPool>((pool) => pool.dispose());
