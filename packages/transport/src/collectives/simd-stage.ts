/**
 * Receive staging inside a WebAssembly memory, for the ring's f32 sums. The SIMD add only sees
 * its own memory, so a contribution received into ordinary staging is copied in before it is
 * added (simd.ts copies both operands and the result, 3 passes). Received straight into the
 * kernel's memory, it is added where it landed: only our own block goes in and the sum comes
 * out (2 passes), which is a third of the reduce-scatter's memory traffic on a machine where
 * the ring is CPU-bound.
 *
 * One per group (collectives on a group run one at a time, and the memory is released with the
 * group); bit-identical to addF32 (same f32x4.add, same scalar tail).
 */
import { BLOCK, instantiateKernel, type KernelInstance } from './simd.js';

const PAGE = 65536;
/** Bytes before the stage: one block for our own operand and the sum (16-byte aligned). */
const STAGE_OFFSET = BLOCK * 4;

export class SimdStage {
  #kernel: KernelInstance | null | undefined;
  #mem = new Float32Array(0);

  /**
   * `elements` f32 slots inside the kernel's memory, or null where WASM SIMD is unavailable or
   * the memory cannot grow that far (wasm32 stops at 4 GiB): the caller then stages in ordinary
   * memory. Valid until the next call (growing the memory detaches earlier views).
   */
  stage(elements: number): Float32Array | null {
    this.#kernel ??= instantiateKernel();
    const k = this.#kernel;
    if (!k) return null;
    const need = STAGE_OFFSET + elements * 4;
    if (k.memory.buffer.byteLength < need) {
      try {
        k.memory.grow(Math.ceil((need - k.memory.buffer.byteLength) / PAGE));
      } catch {
        return null;
      }
    }
    if (this.#mem.buffer !== k.memory.buffer) this.#mem = new Float32Array(k.memory.buffer);
    return new Float32Array(k.memory.buffer, STAGE_OFFSET, elements);
  }

  /** out[o + i] += stage[s + i] for i in [0, n), `stage` being the last view `stage()` returned. */
  addInto(out: Float32Array, o: number, s: number, n: number): void {
    const k = this.#kernel!;
    const mem = this.#mem;
    const base = STAGE_OFFSET / 4 + s;
    for (let d = 0; d < n; d += BLOCK) {
      const m = Math.min(BLOCK, n - d);
      mem.set(out.subarray(o + d, o + d + m), 0);
      const m4 = m & ~3;
      k.add(0, 0, (base + d) * 4, m4 * 4);
      for (let i = m4; i < m; i++) mem[i] = mem[i] + mem[base + d + i];
      out.set(mem.subarray(0, m), o + d);
    }
  }

  /** Drops the memory. */
  release(): void {
    this.#kernel = undefined;
    this.#mem = new Float32Array(0);
  }
}
