/** One layer's GPU uploads under a label prefix, remembered so they are destroyed together. */
import type { Weight } from '../backend.js';
import type { GpuContext } from './context.js';
import { uploadBytes, uploadF32, uploadWeight, type GpuWeight } from './buffers.js';

export class LayerUploads {
  readonly #buffers: GPUBuffer[] = [];
  readonly #weights: GpuWeight[] = [];
  constructor(
    readonly ctx: GpuContext,
    readonly label: string,
  ) {}

  /** A matrix in its storage dtype (row-split over the binding limit, as uploadWeight does). */
  async matrix(m: Weight, name: string): Promise<GpuWeight> {
    const g = await uploadWeight(this.ctx, m, `${this.label}.${name}`);
    this.#weights.push(g);
    return g;
  }

  async vector(a: Float32Array, name: string): Promise<GPUBuffer> {
    return this.bytes(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), name);
  }

  async bytes(data: Uint8Array, name: string): Promise<GPUBuffer> {
    const b = await uploadBytes(this.ctx, data, `${this.label}.${name}`);
    this.#buffers.push(b);
    return b;
  }

  destroy(): void {
    for (const b of this.#buffers) b.destroy();
    for (const w of this.#weights) w.destroy();
  }
}
