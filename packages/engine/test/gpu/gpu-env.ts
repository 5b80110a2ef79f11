/**
 * Opens a WebGPU context for tests. On Linux it points Vulkan at Mesa's lavapipe (a CPU driver) unless
 * VK_ICD_FILENAMES is already set, and gives Dawn an XDG_RUNTIME_DIR; nothing is set globally outside
 * this process. Without an adapter the GPU suites skip with the reason, unless
 * ORCHARD_REQUIRE_GPU_TESTS=1 (CI on a machine known to have lavapipe), where that is a failure.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGpuContext, type GpuContext, type GpuContextOptions } from '../../src/kernels/gpu/context.js';

const LAVAPIPE_ICD = '/usr/share/vulkan/icd.d/lvp_icd.json';

export function useLavapipe(): void {
  if (process.platform !== 'linux') return;
  if (!process.env.VK_ICD_FILENAMES && existsSync(LAVAPIPE_ICD)) process.env.VK_ICD_FILENAMES = LAVAPIPE_ICD;
  if (!process.env.XDG_RUNTIME_DIR || !existsSync(process.env.XDG_RUNTIME_DIR)) {
    process.env.XDG_RUNTIME_DIR = mkdtempSync(join(tmpdir(), 'orchard-xdg-'));
  }
}

export type TestGpu = { ctx: GpuContext; skip: null } | { ctx: null; skip: string };

export async function openTestGpu(options: GpuContextOptions = {}): Promise<TestGpu> {
  useLavapipe();
  try {
    return { ctx: await createGpuContext({ allowSoftware: true, ...options }), skip: null };
  } catch (err) {
    const reason = `no WebGPU adapter: ${(err as Error).message}`;
    if (process.env.ORCHARD_REQUIRE_GPU_TESTS === '1') throw new Error(`ORCHARD_REQUIRE_GPU_TESTS=1 but ${reason}`);
    console.warn(`GPU tests skipped: ${reason}`);
    return { ctx: null, skip: reason };
  }
}
