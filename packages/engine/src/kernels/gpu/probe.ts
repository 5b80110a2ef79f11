/**
 * What the node profile and `--backend auto` need to know about the GPU: whether a usable adapter
 * exists, what it is, how much it can hold, and a measured device copy bandwidth for the planner.
 */
import { Readback, createStorage } from './buffers.js';
import { GpuUnavailableError, createGpuContext, describeAdapter, type GpuAdapterSummary, type GpuContext } from './context.js';

export type GpuChoice = { ctx: GpuContext; reason: null } | { ctx: null; reason: string };

/**
 * `auto`: a hardware adapter, or null with the reason (the caller runs on the CPU). `gpu`: an adapter,
 * software ones included only with `allowSoftware`; failures throw. Errors other than "no usable
 * adapter" (a driver that fails to open a device) are also a CPU fallback under `auto`.
 */
export async function chooseGpu(mode: 'auto' | 'gpu', options: { allowSoftware?: boolean } = {}): Promise<GpuChoice> {
  if (mode === 'gpu') return { ctx: await createGpuContext({ allowSoftware: options.allowSoftware }), reason: null };
  try {
    return { ctx: await createGpuContext({ allowSoftware: false }), reason: null };
  } catch (err) {
    if (err instanceof GpuUnavailableError) return { ctx: null, reason: err.message };
    return { ctx: null, reason: `GPU unusable: ${(err as Error).message}` };
  }
}

export interface GpuProfile {
  adapter: GpuAdapterSummary;
  name: string;
  /** Largest single buffer and largest storage binding, bytes. */
  maxBufferSize: number;
  maxStorageBufferBindingSize: number;
  /** Device-to-device copy bandwidth, bytes per second (read + write counted). */
  copyBandwidth: number;
}

/** Measures copy bandwidth with `bytes`-sized buffers (default 64 MiB, or less if the limits say so). */
export async function profileGpu(ctx: GpuContext, bytes = 64 << 20): Promise<GpuProfile> {
  const size = Math.min(bytes, ctx.limits.maxStorageBufferBindingSize, ctx.limits.maxBufferSize);
  const a = await createStorage(ctx, size, 'profile copy a');
  const b = await createStorage(ctx, size, 'profile copy b');
  const tick = new Readback(ctx, 4, 'profile completion');
  const dev = ctx.device;
  const run = async (copies: number) => {
    const enc = dev.createCommandEncoder();
    for (let i = 0; i < copies; i++) enc.copyBufferToBuffer(i % 2 ? b : a, 0, i % 2 ? a : b, 0, size);
    tick.encodeCopy(enc, a, 4);
    dev.queue.submit([enc.finish()]);
    await tick.read(4);
  };
  const median = async (copies: number) => {
    const t: number[] = [];
    for (let i = 0; i < 3; i++) {
      const s = performance.now();
      await run(copies);
      t.push(performance.now() - s);
    }
    return t.sort((x, y) => x - y)[1] / 1000;
  };
  try {
    await run(1); // first use: lazy zero-initialisation and driver warm-up
    // Subtract the fixed submit + readback cost measured with no copies; never below a quarter of the total.
    const fixed = await median(0);
    const copies = 8;
    const total = await median(copies);
    const perCopy = Math.max(total - fixed, total / 4) / copies;
    return {
      adapter: ctx.adapter,
      name: describeAdapter(ctx.adapter),
      maxBufferSize: ctx.limits.maxBufferSize,
      maxStorageBufferBindingSize: ctx.limits.maxStorageBufferBindingSize,
      copyBandwidth: (2 * size) / perCopy,
    };
  } finally {
    a.destroy();
    b.destroy();
    tick.destroy();
  }
}
