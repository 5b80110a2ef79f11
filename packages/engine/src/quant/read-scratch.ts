/**
 * Reading formats that are rearranged on load (MLX rows interleave their scales and biases; Hugging
 * Face MXFP4 blocks change nibble order): the file's bytes go through one bounded buffer per load plan
 * (a few MiB of rows at a time), then into the weight, so no tensor is ever held twice.
 */
import type { GgufFile } from '../gguf/read-model.js';
import type { SafetensorsFile } from '../safetensors/reader.js';

/**
 * One block of one tensor to read into `dest`, then `after` (widening) once it is in. Planned by the
 * quant readers and model/weights.ts alike, so it lives here, below both.
 */
export interface PendingRead {
  file: SafetensorsFile | GgufFile;
  name: string;
  dest: Uint8Array;
  rows: [number, number];
  cols: [number, number];
  after?: () => void;
}

/**
 * One reusable read buffer per load plan. Planning records the largest need; views are taken when a
 * read runs (reads run one after another), so the buffer is allocated once, at its final size.
 */
export class ReadScratch {
  #size = 0;
  #buf: Uint8Array | null = null;
  need(bytes: number): void {
    this.#size = Math.max(this.#size, bytes);
  }
  view(offset: number, length: number): Uint8Array {
    if (!this.#buf || this.#buf.byteLength < this.#size) this.#buf = new Uint8Array(this.#size);
    return this.#buf.subarray(offset, offset + length);
  }
}

/** Rows per read step: at most this many bytes of a tensor's rows go through the scratch at once. */
export const CHUNK_BYTES = 1 << 22;

/**
 * A read whose destination is looked up when it runs (a view of the plan's scratch). Not to be copied
 * with a spread, which would look it up while planning.
 */
export function lazyRead(file: PendingRead['file'], name: string, dest: () => Uint8Array, rows: [number, number], cols: [number, number], after?: () => void): PendingRead {
  return {
    file,
    name,
    get dest() {
      return dest();
    },
    rows,
    cols,
    after,
  };
}
