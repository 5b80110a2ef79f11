/**
 * gpt-oss's MXFP4 experts in Hugging Face safetensors: `X_blocks` uint8 [experts, out, in/32, 16] and
 * `X_scales` uint8 [experts, out, in/32] (e.g. `model.layers.0.mlp.experts.down_proj`) — or as mlx-lm
 * keeps them (`"mode": "mxfp4"`, its sanitize views the blocks as words): `X.weight` uint32 [experts,
 * out, in/8] (the same bytes) and `X.scales` uint8 [experts, out, in/32], no `X.biases`. One expert's
 * [out, in] matrix — or a block of its rows and columns — is planned as an 'mxfp4' weight in GGUF
 * order (quant/mxfp4.ts): read through the plan's scratch and reordered, nothing widened, so an MoE
 * loader gets the same bytes, kernels and splits as from a GGUF. Column slices must start and end on
 * a 32-weight block (refused with the numbers otherwise).
 */
import { basename } from 'node:path';
import { ModelFormatError, UnsupportedModelError } from '../errors.js';
import type { Backend, Weight } from '../kernels/backend.js';
import { MXFP4_BLOCK_BYTES, QK } from '../kernels/wasm/formats.js';
import type { Checkpoint } from '../safetensors/checkpoint.js';
import { hfBlocksToGguf } from './mxfp4.js';
import { CHUNK_BYTES, type PendingRead, type ReadScratch, lazyRead } from './read-scratch.js';

export interface Mxfp4ExpertShape {
  experts: number;
  /** Output features (rows of each expert's matrix). */
  rows: number;
  /** Input features (columns), a multiple of 32. */
  cols: number;
}

/** The two tensors of an MXFP4 expert tensor `base` and the bytes per element of its blocks tensor. */
interface Mxfp4Tensors {
  blocks: string;
  scales: string;
  /** Bytes per element of `blocks` (U8 in Hugging Face files, U32 words in mlx-lm's). */
  unit: 1 | 4;
}

function mxfp4Tensors(ckpt: Checkpoint, base: string): Mxfp4Tensors {
  if (!ckpt.has(`${base}_blocks`) && ckpt.has(`${base}.weight`)) return { blocks: `${base}.weight`, scales: `${base}.scales`, unit: 4 };
  return { blocks: `${base}_blocks`, scales: `${base}_scales`, unit: 1 };
}

/** Checks the blocks and scales of `base` (either layout) and returns their shape; errors name file and tensor. */
export function mxfp4ExpertShape(ckpt: Checkpoint, base: string): Mxfp4ExpertShape {
  const { blocks: bName, scales: sName, unit } = mxfp4Tensors(ckpt, base);
  const file = ckpt.file(bName);
  const b = ckpt.info(bName);
  const s = ckpt.info(sName);
  const bad = (t: string, why: string) => new ModelFormatError(`${basename(file.path)}: MXFP4 tensor ${t}: ${why}`, file.path, t);
  if (unit === 4) {
    // mlx-lm: [experts, out, in/8] words; 4 words per 32-weight block
    if (b.dtype !== 'U32' || b.shape.length !== 3 || b.shape[2] % 4) throw bad(bName, `must be U32 [experts, out, in/8] with whole 32-weight blocks, got ${b.dtype} [${b.shape}]`);
    const lead = [b.shape[0], b.shape[1], b.shape[2] / 4];
    if (s.dtype !== 'U8' || s.shape.join() !== lead.join()) throw bad(sName, `must be U8 [${lead}] (one E8M0 exponent per 32 weights), got ${s.dtype} [${s.shape}]`);
    return { experts: b.shape[0], rows: b.shape[1], cols: (b.shape[2] / 4) * QK };
  }
  if (b.dtype !== 'U8' || b.shape.length !== 4 || b.shape[3] !== 16) throw bad(bName, `must be U8 [experts, out, blocks, 16], got ${b.dtype} [${b.shape}]`);
  if (s.dtype !== 'U8' || s.shape.join() !== b.shape.slice(0, 3).join()) throw bad(sName, `must be U8 [${b.shape.slice(0, 3)}] like its blocks, got ${s.dtype} [${s.shape}]`);
  return { experts: b.shape[0], rows: b.shape[1], cols: b.shape[2] * QK };
}

/**
 * Rows r × columns c of expert `expert` of the MXFP4 tensor `base`, as an 'mxfp4' weight and the reads
 * that fill it (a few MiB of rows per step through `scratch`). With `step` > 1 only every step-th row
 * from r[0] is taken (gpt-oss's gate_up rows alternate gate, up).
 */
export function planMxfp4Expert(
  ckpt: Checkpoint,
  base: string,
  expert: number,
  r: [number, number],
  c: [number, number],
  backend: Pick<Backend, 'allocBytes'>,
  scratch: ReadScratch,
  step = 1,
): { weight: Weight; reads: PendingRead[] } {
  const shape = mxfp4ExpertShape(ckpt, base);
  const { blocks: bName, scales: sName, unit } = mxfp4Tensors(ckpt, base);
  const fname = basename(ckpt.file(bName).path);
  if (!Number.isInteger(expert) || expert < 0 || expert >= shape.experts) throw new RangeError(`${fname}: ${base} has experts 0..${shape.experts - 1}, asked for ${expert}`);
  if (r[0] < 0 || r[1] > shape.rows || r[0] > r[1] || c[0] < 0 || c[1] > shape.cols || c[0] > c[1]) {
    throw new RangeError(`${fname}: rows [${r}) × columns [${c}) outside ${base} expert [${shape.rows}, ${shape.cols}]`);
  }
  if (c[0] % QK || c[1] % QK) {
    throw new UnsupportedModelError(`${fname}: cannot split ${base} (mxfp4) at columns [${c[0]}, ${c[1]}): a slice must start and end on a ${QK}-weight block boundary`);
  }
  const rows = Math.ceil((r[1] - r[0]) / step);
  const groups = shape.cols / QK;
  const [g0, g1] = [c[0] / QK, c[1] / QK];
  const blocksPerRow = g1 - g0;
  const weight: Weight = { dtype: 'mxfp4', rows, cols: c[1] - c[0], bytes: backend.allocBytes(rows * blocksPerRow * MXFP4_BLOCK_BYTES) };
  const chunk = Math.max(1, Math.floor(CHUNK_BYTES / (blocksPerRow * 16)));
  scratch.need(Math.min(chunk, rows) * blocksPerRow * 17);
  const reads: PendingRead[] = [];
  const whole = g0 === 0 && g1 === groups && step === 1;
  for (let r0 = 0; r0 < rows; r0 += chunk) {
    const n = Math.min(chunk, rows - r0);
    const nb = n * blocksPerRow;
    const blocks = () => scratch.view(0, nb * 16);
    const scales = () => scratch.view(nb * 16, nb);
    const reorder = () => hfBlocksToGguf(blocks(), scales(), nb, weight.bytes.subarray(r0 * blocksPerRow * MXFP4_BLOCK_BYTES, (r0 + n) * blocksPerRow * MXFP4_BLOCK_BYTES));
    // The tensors read as 2-D [experts, out·blocks·(16 | 1)]: expert `expert`'s rows are one span of a
    // row, or (a column slice) one span per output row.
    const spans = whole ? [[r[0] + r0, r[0] + r0 + n]] : Array.from({ length: n }, (_, i) => [r[0] + (r0 + i) * step, r[0] + (r0 + i) * step + 1]);
    spans.forEach(([a, b], k) => {
      const at = k * (whole ? 0 : blocksPerRow);
      const len = (b - a) * blocksPerRow;
      reads.push(lazyRead(ckpt.file(bName), bName, () => scratch.view(at * 16, len * 16), [expert, expert + 1], [((a * groups + g0) * 16) / unit, ((a * groups + g0 + len) * 16) / unit]));
      const last = k === spans.length - 1;
      reads.push(lazyRead(ckpt.file(sName), sName, () => scratch.view(nb * 16 + at, len), [expert, expert + 1], [a * groups + g0, a * groups + g0 + len], last ? reorder : undefined));
    });
  }
  return { weight, reads };
}
