/**
 * Physical core count, the default thread count: SMT siblings share a core's SIMD units and its
 * memory port, so a second thread per core adds little to bandwidth-bound kernels.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

let cached: number | undefined;

export function physicalCores(): number {
  if (cached !== undefined) return cached;
  cached = detect() ?? availableParallelism();
  return cached;
}

function detect(): number | undefined {
  try {
    if (process.platform === 'linux') return fromCpuinfo(readFileSync('/proc/cpuinfo', 'utf8'));
    if (process.platform === 'darwin') {
      const n = Number(execFileSync('sysctl', ['-n', 'hw.physicalcpu'], { encoding: 'utf8', timeout: 2000 }).trim());
      return Number.isInteger(n) && n > 0 ? n : undefined;
    }
  } catch {
    // Unreadable: fall back to the logical count.
  }
  return undefined;
}

/** Distinct (physical id, core id) pairs in /proc/cpuinfo text; undefined when it lacks them. */
export function fromCpuinfo(text: string): number | undefined {
  const cores = new Set<string>();
  for (const block of text.split(/\n\s*\n/)) {
    const phys = /^physical id\s*:\s*(\d+)/m.exec(block)?.[1];
    const core = /^core id\s*:\s*(\d+)/m.exec(block)?.[1];
    if (phys !== undefined && core !== undefined) cores.add(`${phys}:${core}`);
  }
  return cores.size > 0 ? Math.min(cores.size, availableParallelism()) : undefined;
}
