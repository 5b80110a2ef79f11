/**
 * The GPU part of a node profile: the adapter the node's runners compute on, the memory it can use
 * (WebGPU does not say; taken from the OS) and a measured device copy bandwidth, which replaces the CPU
 * copy figure as the node's memory bandwidth for the planner when runners use the GPU.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { z } from 'zod';
import type { GpuAdapterSummary } from '@orchard/engine';

export const nodeGpuSchema = z.object({
  /** Adapter name as WebGPU describes it ("Apple M4 Max", "llvmpipe: Mesa 25.0.7 ..."). */
  adapter: z.string().max(256),
  vendor: z.string().max(128),
  architecture: z.string().max(128),
  /** A software adapter (lavapipe): runs on the CPU; used only when explicitly allowed. */
  software: z.boolean(),
  /** Memory the GPU can use, bytes; null when the OS does not say. */
  memoryBytes: z.number().nonnegative().nullable(),
  /** Where memoryBytes comes from ("unified memory", "amdgpu vram", "nvidia-smi", "system memory (software adapter)"). */
  memorySource: z.string().max(128),
  /** Device-to-device copy bandwidth (read + write counted, as the CPU figure), GB/s. */
  copyBandwidthGBps: z.number().nonnegative(),
  maxBufferBytes: z.number().nonnegative(),
  maxStorageBindingBytes: z.number().nonnegative(),
  measuredAt: z.number(),
});
export type NodeGpu = z.infer<typeof nodeGpuSchema>;

export type CommandRunner = (cmd: string, args: string[], timeoutMs: number) => Promise<string | null>;

const runCommand: CommandRunner = (cmd, args, timeoutMs) =>
  new Promise((resolve) => execFile(cmd, args, { timeout: timeoutMs }, (err, stdout) => resolve(err ? null : stdout)));

/** Largest `mem_info_vram_total` among DRM cards (amdgpu), bytes. */
function sysfsVram(root = '/sys/class/drm'): number | null {
  let best: number | null = null;
  let cards: string[] = [];
  try {
    cards = readdirSync(root).filter((c) => /^card\d+$/.test(c));
  } catch {
    return null;
  }
  for (const c of cards) {
    try {
      const n = Number(readFileSync(`${root}/${c}/device/mem_info_vram_total`, 'utf8').trim());
      if (Number.isFinite(n) && n > 0) best = Math.max(best ?? 0, n);
    } catch {
      /* not an amdgpu card */
    }
  }
  return best;
}

/** `nvidia-smi --query-gpu=memory.total` (MiB per GPU, one line each): the largest, in bytes. */
export function parseNvidiaSmiMemory(out: string): number | null {
  const mib = out
    .split('\n')
    .map((l) => Number(l.trim()))
    .filter((n) => Number.isFinite(n) && n > 0);
  return mib.length ? Math.max(...mib) * 2 ** 20 : null;
}

/** GPU-visible memory for an adapter, from the OS. */
export async function gpuVisibleMemory(
  adapter: GpuAdapterSummary,
  deps: { platform?: NodeJS.Platform; totalmem?: () => number; run?: CommandRunner; vram?: () => number | null } = {},
): Promise<{ memoryBytes: number | null; memorySource: string }> {
  const platform = deps.platform ?? process.platform;
  const totalmem = deps.totalmem ?? os.totalmem;
  if (adapter.software) return { memoryBytes: totalmem(), memorySource: 'system memory (software adapter)' };
  // Apple silicon: the GPU shares the unified memory (hw.memsize).
  if (platform === 'darwin') return { memoryBytes: totalmem(), memorySource: 'unified memory' };
  const who = `${adapter.vendor} ${adapter.description} ${adapter.device}`.toLowerCase();
  if (/nvidia/.test(who)) {
    const out = await (deps.run ?? runCommand)('nvidia-smi', ['--query-gpu=memory.total', '--format=csv,noheader,nounits'], 3000);
    const bytes = out === null ? null : parseNvidiaSmiMemory(out);
    if (bytes) return { memoryBytes: bytes, memorySource: 'nvidia-smi' };
  }
  const vram = (deps.vram ?? sysfsVram)();
  if (vram) return { memoryBytes: vram, memorySource: 'amdgpu vram' };
  if (/intel/.test(who)) return { memoryBytes: totalmem(), memorySource: 'shared system memory (integrated)' };
  return { memoryBytes: null, memorySource: 'unknown' };
}
