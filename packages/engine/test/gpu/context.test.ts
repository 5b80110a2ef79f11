/**
 * Device setup and its failure modes: no adapter, software adapter refused unless asked for, device
 * lost (destroyed) while work is pending, and buffers over the binding limit — each a typed error with
 * a readable message, never a hang.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createStorage, readF32, uploadF32 } from '../../src/kernels/gpu/buffers.js';
import { GpuDeviceLostError, GpuValidationError, createGpuContext } from '../../src/kernels/gpu/context.js';
import { chooseGpu, profileGpu } from '../../src/kernels/gpu/probe.js';
import { openTestGpu, useLavapipe } from './gpu-env.js';

const gpu = await openTestGpu();
const helper = fileURLToPath(new URL('./open-context.ts', import.meta.url));
const root = fileURLToPath(new URL('../../../../', import.meta.url));

function openInChild(env: Record<string, string>, software: boolean) {
  const out = execFileSync(process.execPath, ['--import', 'tsx', helper, ...(software ? ['--software'] : [])], {
    cwd: root,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
    timeout: 30_000,
  });
  return JSON.parse(out.trim().split('\n').pop()!);
}

describe('GPU context errors', () => {
  it.skipIf(process.platform !== 'linux')('no Vulkan driver: GpuUnavailableError saying what to install', () => {
    useLavapipe();
    const r = openInChild({ VK_ICD_FILENAMES: '/nonexistent/orchard-icd.json' }, true);
    expect(r.ok).toBe(false);
    expect(r.name).toBe('GpuUnavailableError');
    expect(r.message).toMatch(/no WebGPU adapter found.*mesa-vulkan-drivers/);
  });

  it.skipIf(!gpu.ctx?.adapter.software)('a software adapter is refused unless allowSoftware', async () => {
    await expect(createGpuContext()).rejects.toThrow(/only a software WebGPU adapter was found \(llvmpipe.*\(software\)\)/);
  });

  it.skipIf(!gpu.ctx)('device destroyed: pending and later work fail with GpuDeviceLostError', async () => {
    const ctx = gpu.ctx!;
    const buf = await uploadF32(ctx, new Float32Array([1, 2, 3]), 'x');
    expect([...(await readF32(ctx, buf, 3))]).toEqual([1, 2, 3]);
    const pending = readF32(ctx, buf, 3);
    ctx.destroy();
    await expect(pending).rejects.toThrow(GpuDeviceLostError);
    await expect(createStorage(ctx, 16, 'after')).rejects.toThrow(/GPU device was destroyed/);
    expect(await ctx.lost).toBe('destroyed');
  });

  it.skipIf(!gpu.ctx)('a buffer over the storage binding limit is refused, naming it', async () => {
    const ctx = (await openTestGpu({ maxBindingBytes: 1 << 20 })).ctx!;
    try {
      await expect(createStorage(ctx, (1 << 20) + 4, 'KV cache k, layer 3')).rejects.toThrow(GpuValidationError);
      await expect(createStorage(ctx, (1 << 20) + 4, 'KV cache k, layer 3')).rejects.toThrow(
        /KV cache k, layer 3: 1048580 bytes exceeds the GPU storage binding limit of 1048576 bytes/,
      );
    } finally {
      ctx.destroy();
    }
  });
});

describe('Dawn instance lifetime', () => {
  it.skipIf(!gpu.ctx)('every context, failed probes included, comes from one Dawn instance that outlives its devices', async () => {
    const a = (await openTestGpu()).ctx!;
    a.destroy();
    await chooseGpu('auto');
    const b = (await openTestGpu()).ctx!;
    try {
      // A second instance would be freed by the garbage collector once its context is dropped, while
      // dawn.node may still run its queued callbacks: the crash this guards against.
      expect(b.gpu).toBe(a.gpu);
      expect(b.gpu).toBe(gpu.ctx!.gpu);
    } finally {
      b.destroy();
    }
  });

  it.skipIf(!gpu.ctx)('a process that opened and destroyed a device exits on its own with the instance kept', () => {
    // execFileSync waits for the child to exit; a kept instance that held the event loop open would
    // hit the timeout here instead.
    const r = openInChild({}, true);
    expect(r.ok).toBe(true);
    expect(r.adapter.software).toBe(true);
  });
});

describe('GPU choice and profile', () => {
  it.skipIf(!gpu.ctx?.adapter.software)('auto falls back to the CPU (null + reason) when only a software adapter exists; gpu with allowSoftware opens it', async () => {
    const auto = await chooseGpu('auto');
    expect(auto.ctx).toBeNull();
    expect(auto.reason).toMatch(/software/);
    const forced = await chooseGpu('gpu', { allowSoftware: true });
    expect(forced.ctx?.adapter.software).toBe(true);
    forced.ctx?.destroy();
  });

  it.skipIf(!gpu.ctx)('profile reports the adapter, limits and a positive copy bandwidth', async () => {
    const ctx = (await openTestGpu()).ctx!;
    try {
      const p = await profileGpu(ctx, 8 << 20);
      expect(p.name).toContain(ctx.adapter.description || ctx.adapter.device);
      expect(p.maxBufferSize).toBe(ctx.limits.maxBufferSize);
      expect(p.copyBandwidth).toBeGreaterThan(1e7);
      expect(p.copyBandwidth).toBeLessThan(1e13);
    } finally {
      ctx.destroy();
    }
  });
});
