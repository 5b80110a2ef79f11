/**
 * Kernel micro-benchmark (not a test): matvec (decode) and matmul (prompt batch) GFLOP/s and weight
 * GB/s per dtype, WASM backend against the plain-TS reference backend, plus a memory-read baseline
 * measured in the same run with the same threads. Prints ratios.
 *
 *   pnpm bench:kernels [--size 4096] [--threads 1,2] [--batch 16] [--seconds 0.6] [--json]
 *   pnpm bench:kernels --shapes 768x768,2304x768,768x2304,8192x768 [--dtypes f16,q8_0,q4_k,q6_k] [--threads 1] [--hot] [--simd both]
 *
 * --shapes: decode matvec GB/s per [rows]x[cols] weight (dtypes also mlx<bits>_g<group>_<scale>, e.g. mlx4_g64_bf16) read cold, as in a forward pass (each call
 * takes the next of enough copies to fill ~48 MiB, past the caches), against the read baseline; f16,
 * q8_0 and q4_0 both row-major and packed (Backend.packWeight, as the loader does). --hot: one copy,
 * read again and again from the caches (what the kernel computes when memory is not the limit).
 * --simd auto|relaxed|baseline|both: which kernel build (createWasmBackend's simd); both: the two
 * builds side by side, timed interleaved in one run, with the relaxed/baseline ratio per line.
 *
 * On a shared or busy machine the numbers are contended: compare ratios within one run.
 */
import { parseArgs } from 'node:util';
import type { Backend, DType, Weight } from '../src/kernels/backend.js';
import { createReferenceBackend } from '../src/kernels/reference.js';
import { createWasmBackend } from '../src/kernels/wasm/backend.js';
import type { SimdChoice } from '../src/kernels/wasm/module.js';
import { physicalCores } from '../src/kernels/wasm/cores.js';
import { isMlx, mlxLayout, weightBytes } from '../src/kernels/wasm/formats.js';
import { isPackable } from '../src/kernels/wasm/pack.js';
import { dequantizeRow, quantizeQ4_0, quantizeQ8_0 } from '../src/kernels/wasm/quant-reference.js';
import { f32ToBf16Bits, f32ToF16Bits } from '../src/numeric/half.js';
import { Prng } from '../src/numeric/prng.js';
import { quantizeK } from '../src/quant/kquants.js';
import { quantizeMlxWeight } from '../src/quant/mlx.js';

const { values: args } = parseArgs({
  options: {
    size: { type: 'string', default: '4096' },
    threads: { type: 'string' },
    batch: { type: 'string', default: '16' },
    seconds: { type: 'string', default: '0.6' },
    json: { type: 'boolean', default: false },
    shapes: { type: 'string' },
    dtypes: { type: 'string', default: 'f16,q8_0' },
    hot: { type: 'boolean', default: false },
    simd: { type: 'string', default: 'auto' },
  },
});
const size = Number(args.size);
const batch = Number(args.batch);
const seconds = Number(args.seconds);
const threadList = (args.threads ?? [...new Set([1, physicalCores()])].join(',')).split(',').map(Number);
const DTYPES: DType[] = ['f32', 'f16', 'bf16', 'q8_0', 'q4_0'];

/**
 * The baseline matmul: the reference backend where it supports the dtype; for block formats it does
 * not know, the same plain-TS shape (widen a row, then f32 dots) with quant-reference's dequantizer.
 */
function baselineMatmul(reference: Backend, out: Float32Array, w: Weight, x: Float32Array, n: number): void {
  try {
    reference.matmul(out, w, x, n);
    return;
  } catch (err) {
    if (w.dtype !== 'q8_0' && w.dtype !== 'q4_0') throw err;
  }
  const row = new Float32Array(w.cols);
  for (let r = 0; r < w.rows; r++) {
    dequantizeRow(w.dtype, w.bytes, w.cols, r, row);
    for (let b = 0; b < n; b++) {
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      const xo = b * w.cols;
      for (let c = 0; c < w.cols; c += 4) {
        s0 += row[c] * x[xo + c];
        s1 += row[c + 1] * x[xo + c + 1];
        s2 += row[c + 2] * x[xo + c + 2];
        s3 += row[c + 3] * x[xo + c + 3];
      }
      out[b * w.rows + r] = s0 + s1 + s2 + s3;
    }
  }
}

/**
 * Seconds per call of each function: they run in turn, round after round, for about `seconds` in
 * all, and each keeps its best round. Interleaving gives every function the same share of whatever
 * else the machine is doing, so ratios within one call stay meaningful on a busy machine.
 */
function timeAll(fns: Array<() => void>, budget: number): number[] {
  for (const fn of fns) fn();
  const best = fns.map(() => Infinity);
  const start = performance.now();
  let rounds = 0;
  while (rounds < 3 || (performance.now() - start < budget * 1000 && rounds < 200)) {
    fns.forEach((fn, i) => {
      const t0 = performance.now();
      fn();
      best[i] = Math.min(best[i], (performance.now() - t0) / 1000);
    });
    rounds++;
  }
  return best;
}

function fillWeight(be: Backend, dtype: DType, rows: number, cols: number, rng: Prng): Weight {
  const bytes = be.allocBytes(weightBytes(dtype, rows, cols));
  const count = rows * cols;
  if (dtype === 'q4_k' || dtype === 'q5_k' || dtype === 'q6_k') {
    const values = Float32Array.from({ length: count }, () => rng.symmetric(1));
    quantizeK(dtype, values, rows, cols, bytes);
  } else if (isMlx(dtype)) {
    quantizeMlxWeight(Float32Array.from({ length: count }, () => rng.symmetric(1)), rows, cols, mlxLayout(dtype), bytes);
  } else if (dtype === 'q8_0' || dtype === 'q4_0') {
    // Quantize row by row so the f32 source never needs to exist whole.
    const row = new Float32Array(cols);
    const rb = bytes.byteLength / rows;
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) row[c] = rng.symmetric(1);
      (dtype === 'q8_0' ? quantizeQ8_0 : quantizeQ4_0)(row, 1, cols, bytes.subarray(r * rb, (r + 1) * rb));
    }
  } else if (dtype === 'f32') {
    const v = new Float32Array(bytes.buffer, bytes.byteOffset, count);
    for (let i = 0; i < count; i++) v[i] = rng.symmetric(1);
  } else {
    const v = new Uint16Array(bytes.buffer, bytes.byteOffset, count);
    const conv = dtype === 'f16' ? f32ToF16Bits : f32ToBf16Bits;
    for (let i = 0; i < count; i++) v[i] = conv(rng.symmetric(1));
  }
  return { dtype, rows, cols, bytes };
}

interface Line {
  dtype: string;
  threads: number;
  matvecGflops: number;
  matvecGBs: number;
  ofReadBandwidth: number;
  matmulGflops: number;
  referenceMatvecGflops: number | null;
  referenceMatmulGflops: number | null;
  matvecRatio: number | null;
  matmulRatio: number | null;
}

const rng = new Prng(42);
if (args.shapes) {
  benchShapes(args.shapes, args.dtypes!);
  process.exit(0);
}
const reference = createReferenceBackend();
const lines: Line[] = [];
const baselines: Record<number, number> = {};

const seenWeights = new Map<DType, { mv: number; mm: number }>();
let build = '';
/** --simd for the default mode: one build ('both' is for --shapes). */
function mainSimd(): SimdChoice {
  if (args.simd === 'both') throw new Error("--simd both compares the builds with --shapes; the default mode takes auto, relaxed or baseline");
  return args.simd as SimdChoice;
}
for (const threads of threadList) {
  const be = createWasmBackend({ threads, initialBytes: 512 * 2 ** 20, simd: mainSimd() });
  build = be.simd;
  // Read baseline: 256 MiB, well past any cache, split by rows like a kernel; timed interleaved with
  // the matvecs so both see the same machine.
  const sweepRows = 4096;
  const sweep = be.allocBytes(256 * 2 ** 20);
  for (let i = 0; i < sweep.length; i += 4096) sweep[i] = i & 0xff;

  const x = be.allocF32(size * batch);
  for (let i = 0; i < x.length; i++) x[i] = rng.symmetric(1);
  const out = be.allocF32(size * batch);
  const weights = DTYPES.map((dtype) => fillWeight(be, dtype, size, size, rng));
  const mvTimes = timeAll([() => be.readSweep(sweep, sweepRows), ...weights.map((w) => () => be.matvec(out, w, x))], 3 * seconds);
  const readGBs = sweep.byteLength / mvTimes[0] / 1e9;
  baselines[threads] = readGBs;
  const mmTimes = timeAll(weights.map((w) => () => be.matmul(out, w, x, batch)), 3 * seconds);
  if (seenWeights.size === 0) {
    // The baseline is single-threaded whatever `threads` says: measure it once.
    const refOut = new Float32Array(size * batch);
    const refMv = timeAll(weights.map((w) => () => baselineMatmul(reference, refOut, w, x, 1)), 2 * seconds);
    const refMm = timeAll(weights.map((w) => () => baselineMatmul(reference, refOut, w, x, batch)), 2 * seconds);
    DTYPES.forEach((d, i) => seenWeights.set(d, { mv: refMv[i], mm: refMm[i] }));
  }
  weights.forEach((w, i) => {
    const flop = 2 * size * size;
    const mv = mvTimes[i + 1];
    const mm = mmTimes[i];
    const ref = seenWeights.get(w.dtype)!;
    lines.push({
      dtype: w.dtype,
      threads,
      matvecGflops: flop / mv / 1e9,
      matvecGBs: w.bytes.byteLength / mv / 1e9,
      ofReadBandwidth: w.bytes.byteLength / mv / 1e9 / readGBs,
      matmulGflops: (flop * batch) / mm / 1e9,
      referenceMatvecGflops: flop / ref.mv / 1e9,
      referenceMatmulGflops: (flop * batch) / ref.mm / 1e9,
      matvecRatio: ref.mv / mv,
      matmulRatio: ref.mm / mm,
    });
  });
  be.dispose();
}

if (args.json) {
  console.log(JSON.stringify({ size, batch, simd: build, readGBs: baselines, lines }));
} else {
  const f = (v: number | null, d = 1) => (v === null ? 'n/a' : v.toFixed(d));
  console.log(`kernels ${size}x${size} (${build} build), matmul batch ${batch}; ref = plain-TS reference backend, 1 thread (q8_0/q4_0: same loop over quant-reference's dequantizer)`);
  for (const t of threadList) console.log(`memory read baseline, ${t} thread(s): ${baselines[t].toFixed(1)} GB/s`);
  console.log('dtype  thr | matvec GFLOP/s  GB/s  of-read | matmul GFLOP/s | ref matvec  ref matmul | ratio mv  ratio mm');
  for (const l of lines) {
    console.log(
      `${l.dtype.padEnd(5)} ${String(l.threads).padStart(4)} | ${f(l.matvecGflops).padStart(14)} ${f(l.matvecGBs).padStart(5)} ${f(l.ofReadBandwidth, 2).padStart(8)} | ` +
        `${f(l.matmulGflops).padStart(14)} | ${f(l.referenceMatvecGflops, 2).padStart(10)} ${f(l.referenceMatmulGflops, 2).padStart(11)} | ` +
        `${f(l.matvecRatio).padStart(8)} ${f(l.matmulRatio).padStart(9)}`,
    );
  }
}

/** --shapes: cold decode matvecs of the given shapes, interleaved with the read baseline. */
function benchShapes(shapeList: string, dtypeList: string): void {
  const shapes = shapeList.split(',').map((s) => {
    const [rows, cols] = s.split('x').map(Number);
    if (!(rows > 0 && cols > 0)) throw new Error(`--shapes: bad shape ${s} (want ROWSxCOLS)`);
    return [rows, cols] as const;
  });
  const dtypes = dtypeList.split(',') as DType[];
  const known: DType[] = [...DTYPES, 'q4_k', 'q5_k', 'q6_k'];
  for (const d of dtypes) if (!known.includes(d) && !isMlx(d)) throw new Error(`--dtypes: unknown dtype ${d} (${known.join(', ')}, mlx<bits>_g<group>_<f16|bf16|f32>)`);
  const builds = args.simd === 'both' ? (['baseline', 'relaxed'] as const) : [args.simd as SimdChoice];
  const setBytes = args.hot ? 0 : 48 * 2 ** 20;
  const layouts = (d: DType) => (isPackable(d) ? (['row', 'packed'] as const) : (['row'] as const));
  const out: Array<{ dtype: DType; simd: string; layout: string; rows: number; cols: number; threads: number; matvecGBs: number; ofReadBandwidth: number; vsBaseline?: number }> = [];
  const reads: Record<number, number> = {};
  for (const threads of threadList) {
    const perShape = dtypes.flatMap((d) => shapes.map(([r, c]) => layouts(d).length * Math.max(1, Math.ceil(setBytes / weightBytes(d, r, c))) * weightBytes(d, r, c)));
    const total = perShape.reduce((a, b) => a + b, 0) + 256 * 2 ** 20;
    const backends = builds.map((simd) => createWasmBackend({ threads, simd, initialBytes: total + 64 * 2 ** 20 }));
    const be0 = backends[0];
    const sweep = be0.allocBytes(256 * 2 ** 20);
    for (let i = 0; i < sweep.length; i += 4096) sweep[i] = i & 0xff;
    const maxCols = Math.max(...shapes.map(([, c]) => c));
    const xs = backends.map((be) => be.allocF32(maxCols));
    for (let i = 0; i < maxCols; i++) {
      const v = rng.symmetric(1);
      xs.forEach((x) => (x[i] = v));
    }
    const ys = backends.map((be) => be.allocF32(Math.max(...shapes.map(([r]) => r))));
    const sets = dtypes.flatMap((dtype) =>
      shapes.flatMap(([rows, cols]) =>
        layouts(dtype).flatMap((layout) => {
          const first = fillWeight(be0, dtype, rows, cols, rng);
          return backends.map((be, b) => {
            const copies: Weight[] = [];
            while (copies.length === 0 || copies.length * first.bytes.byteLength < setBytes) {
              const bytes = be.allocBytes(first.bytes.byteLength);
              bytes.set(first.bytes);
              copies.push({ ...first, bytes });
            }
            if (layout === 'packed') copies.forEach((w) => be.packWeight(w));
            return { dtype, layout, rows, cols, copies, be, b };
          });
        }),
      ),
    );
    // Each timed function runs one pass over its copies; seconds per pass → GB/s below.
    const times = timeAll(
      [
        () => be0.readSweep(sweep, 4096),
        ...sets.map((s) => () => {
          for (const w of s.copies) s.be.matvec(ys[s.b], w, xs[s.b].subarray(0, s.cols));
        }),
      ],
      3 * seconds,
    );
    reads[threads] = sweep.byteLength / times[0] / 1e9;
    sets.forEach((s, i) => {
      const gbs = (s.copies.length * s.copies[0].bytes.byteLength) / times[i + 1] / 1e9;
      // with --simd both, each relaxed line follows its baseline line
      const vsBaseline = s.b === 1 ? times[i] / times[i + 1] : undefined;
      out.push({ dtype: s.dtype, simd: s.be.simd, layout: s.layout, rows: s.rows, cols: s.cols, threads, matvecGBs: gbs, ofReadBandwidth: gbs / reads[threads], vsBaseline });
    });
    backends.forEach((be) => be.dispose());
  }
  if (args.json) {
    console.log(JSON.stringify({ readGBs: reads, shapes: out }));
    return;
  }
  console.log(args.hot ? 'decode matvec, one weight read again and again (cache-resident)' : 'decode matvec, weights read cold (rotating copies past the caches)');
  for (const t of threadList) console.log(`memory read baseline, ${t} thread(s): ${reads[t].toFixed(1)} GB/s`);
  console.log('dtype  simd      layout  thr  shape         | matvec GB/s  of-read  vs-baseline');
  for (const l of out) {
    console.log(
      `${l.dtype.padEnd(5)}  ${l.simd.padEnd(8)}  ${l.layout.padEnd(6)} ${String(l.threads).padStart(4)}  ${`${l.rows}x${l.cols}`.padEnd(13)} | ${l.matvecGBs.toFixed(1).padStart(11)} ${l.ofReadBandwidth.toFixed(2).padStart(8)}` +
        (l.vsBaseline === undefined ? '' : `  ${l.vsBaseline.toFixed(2).padStart(10)}x`),
    );
  }
}
