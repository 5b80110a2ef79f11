/**
 * GPU buffers: activations, uploads, readbacks, and weights uploaded once in their storage dtype.
 * A weight larger than the storage-binding limit is split by rows into chunks, each its own buffer and
 * its own dispatch, so tensors like a 150k-row vocabulary projection fit any device's limits.
 */
import type { DType, Weight } from '../backend.js';
import { rowBytes } from '../wasm/formats.js';
import { GpuValidationError, guarded, type GpuContext } from './context.js';

/** GPUBufferUsage / GPUMapMode values (Dawn exposes them only on its module's globals). */
export const Usage = { MAP_READ: 1, MAP_WRITE: 2, COPY_SRC: 4, COPY_DST: 8, UNIFORM: 64, STORAGE: 128 } as const;
const MAP_READ_MODE = 1;

const align4 = (n: number) => Math.max(4, Math.ceil(n / 4) * 4);

/** Bytes of one row of `cols` elements in `dtype`'s storage layout (one definition for every backend). */
export { rowBytes };

/** A storage buffer for f32 activations; `label` names it in errors. Contents start zeroed. */
export async function createStorage(ctx: GpuContext, bytes: number, label: string, extraUsage = 0): Promise<GPUBuffer> {
  const size = align4(bytes);
  if (size > ctx.limits.maxStorageBufferBindingSize) {
    throw new GpuValidationError(
      `${label}: ${size} bytes exceeds the GPU storage binding limit of ${ctx.limits.maxStorageBufferBindingSize} bytes`,
    );
  }
  return guarded(ctx, label, () =>
    ctx.device.createBuffer({ label, size, usage: Usage.STORAGE | Usage.COPY_SRC | Usage.COPY_DST | extraUsage }),
  );
}

/** A storage buffer holding `data` (written at creation; no staging copy). */
export async function uploadBytes(ctx: GpuContext, data: Uint8Array, label: string): Promise<GPUBuffer> {
  const size = align4(data.byteLength);
  if (size > ctx.limits.maxStorageBufferBindingSize) {
    throw new GpuValidationError(
      `${label}: ${size} bytes exceeds the GPU storage binding limit of ${ctx.limits.maxStorageBufferBindingSize} bytes`,
    );
  }
  const buffer = await guarded(ctx, label, () =>
    ctx.device.createBuffer({ label, size, usage: Usage.STORAGE | Usage.COPY_SRC | Usage.COPY_DST, mappedAtCreation: true }),
  );
  new Uint8Array(buffer.getMappedRange()).set(data);
  buffer.unmap();
  return buffer;
}

export function uploadF32(ctx: GpuContext, data: Float32Array, label: string): Promise<GPUBuffer> {
  return uploadBytes(ctx, new Uint8Array(data.buffer, data.byteOffset, data.byteLength), label);
}

/** A reusable MAP_READ staging buffer for reading results back. */
export class Readback {
  #buffer: GPUBuffer;
  constructor(
    private readonly ctx: GpuContext,
    readonly capacity: number,
    label = 'readback',
  ) {
    this.#buffer = ctx.device.createBuffer({ label, size: align4(capacity), usage: Usage.MAP_READ | Usage.COPY_DST });
  }

  /** Records a copy of `bytes` from `src` into the staging buffer; call `read` after submitting. */
  encodeCopy(encoder: GPUCommandEncoder, src: GPUBuffer, bytes: number, srcOffset = 0): void {
    if (bytes > this.capacity) throw new GpuValidationError(`readback of ${bytes} bytes exceeds its ${this.capacity}-byte buffer`);
    encoder.copyBufferToBuffer(src, srcOffset, this.#buffer, 0, align4(bytes));
  }

  /** Waits for the GPU and copies the first `bytes` out. */
  async read(bytes: number): Promise<ArrayBuffer> {
    try {
      await this.#buffer.mapAsync(MAP_READ_MODE, 0, align4(bytes));
    } catch (err) {
      this.ctx.assertAlive();
      throw err;
    }
    const out = this.#buffer.getMappedRange(0, align4(bytes)).slice(0, bytes);
    this.#buffer.unmap();
    this.ctx.assertAlive();
    return out;
  }

  destroy(): void {
    this.#buffer.destroy();
  }
}

/** One-off read of `count` f32 values from `src` (tests, debugging). */
export async function readF32(ctx: GpuContext, src: GPUBuffer, count: number, offset = 0): Promise<Float32Array> {
  const rb = new Readback(ctx, count * 4);
  try {
    const enc = ctx.device.createCommandEncoder();
    rb.encodeCopy(enc, src, count * 4, offset * 4);
    ctx.device.queue.submit([enc.finish()]);
    return new Float32Array(await rb.read(count * 4));
  } finally {
    rb.destroy();
  }
}

export interface GpuWeightChunk {
  buffer: GPUBuffer;
  /** First row of the tensor held by this chunk. */
  rowStart: number;
  rows: number;
}

export interface GpuWeight {
  readonly name: string;
  readonly dtype: DType;
  readonly rows: number;
  readonly cols: number;
  readonly chunks: readonly GpuWeightChunk[];
  /** Bytes held on the GPU. */
  readonly bytes: number;
  destroy(): void;
}

/**
 * Uploads a weight once, in its storage dtype, split by rows when it exceeds the binding limit.
 * Chunk boundaries keep each chunk 4-byte aligned, as storage bindings require.
 */
export async function uploadWeight(ctx: GpuContext, w: Weight, name: string): Promise<GpuWeight> {
  if ((w.dtype === 'q8_0' || w.dtype === 'q4_0') && w.cols % 32 !== 0) {
    throw new GpuValidationError(`${name}: ${w.dtype} needs columns in whole 32-element blocks, got ${w.cols}`);
  }
  const rb = rowBytes(w.dtype, w.cols);
  if (w.bytes.byteLength !== rb * w.rows) {
    throw new GpuValidationError(
      `${name}: ${w.bytes.byteLength} bytes but [${w.rows}, ${w.cols}] ${w.dtype} needs ${rb * w.rows}`,
    );
  }
  const limit = ctx.limits.maxStorageBufferBindingSize;
  // Rows per chunk: as many as fit, rounded down to a multiple that keeps chunk starts 4-byte aligned.
  const step = rb % 4 === 0 ? 1 : rb % 2 === 0 ? 2 : 4;
  let perChunk = Math.floor(limit / rb);
  perChunk -= perChunk % step;
  if (perChunk < 1) throw new GpuValidationError(`${name}: one row (${rb} bytes) exceeds the GPU binding limit of ${limit} bytes`);
  const chunks: GpuWeightChunk[] = [];
  try {
    for (let rowStart = 0; rowStart < w.rows; rowStart += perChunk) {
      const rows = Math.min(perChunk, w.rows - rowStart);
      const data = w.bytes.subarray(rowStart * rb, (rowStart + rows) * rb);
      const label = chunks.length || rows < w.rows ? `${name}[rows ${rowStart}..${rowStart + rows})` : name;
      chunks.push({ buffer: await uploadBytes(ctx, data, label), rowStart, rows });
    }
  } catch (err) {
    for (const c of chunks) c.buffer.destroy();
    throw err;
  }
  const bytes = chunks.reduce((s, c) => s + c.buffer.size, 0);
  return {
    name,
    dtype: w.dtype,
    rows: w.rows,
    cols: w.cols,
    chunks,
    bytes,
    destroy: () => chunks.forEach((c) => c.buffer.destroy()),
  };
}
