/**
 * A WebGPU context for the daemon's GPU tests. On Linux Vulkan is pointed at Mesa's lavapipe (a CPU
 * driver) unless VK_ICD_FILENAMES is already set, and Dawn gets an XDG_RUNTIME_DIR; both only in this
 * process. Without an adapter `skip` holds the reason (the suites skip with it), unless
 * ORCHARD_REQUIRE_GPU_TESTS=1, where that is a failure.
 */
import { existsSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { createGpuContext, type GpuContext } from '@orchard/engine';

const LAVAPIPE = '/usr/share/vulkan/icd.d/lvp_icd.json';

export async function openTestGpu(): Promise<{ ctx: GpuContext | null; skip: string }> {
  if (process.platform === 'linux' && !process.env.VK_ICD_FILENAMES && existsSync(LAVAPIPE)) process.env.VK_ICD_FILENAMES = LAVAPIPE;
  if (!process.env.XDG_RUNTIME_DIR || !existsSync(process.env.XDG_RUNTIME_DIR)) {
    process.env.XDG_RUNTIME_DIR = join(os.tmpdir(), `orchard-xdg-${process.pid}`);
    mkdirSync(process.env.XDG_RUNTIME_DIR, { recursive: true });
  }
  try {
    return { ctx: await createGpuContext({ allowSoftware: true }), skip: '' };
  } catch (err) {
    const skip = (err as Error).message;
    if (process.env.ORCHARD_REQUIRE_GPU_TESTS === '1') throw new Error(`ORCHARD_REQUIRE_GPU_TESTS=1 but ${skip}`);
    return { ctx: null, skip };
  }
}
