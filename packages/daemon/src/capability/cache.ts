/**
 * The capability figures are cached per machine in the data dir: re-measured when the machine
 * changes (a copied data dir, new hardware) or on demand, not at every start.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { capabilitySchema, type Capability } from '../profile/types.js';
import { runMicrobench, type MicrobenchOptions } from './microbench.js';

export const CAPABILITY_FILE = 'capability.json';

/** Bump when the benchmark changes, so cached figures from an older benchmark are re-measured. */
export const BENCH_VERSION = 2;

const cacheSchema = z.object({ machine: z.string(), version: z.literal(BENCH_VERSION), capability: capabilitySchema });

/** What must stay the same for a cached figure to still describe this machine. */
export function machineFingerprint(): string {
  const cpu = os.cpus()[0]?.model ?? 'unknown';
  return [os.hostname(), process.platform, process.arch, cpu, os.cpus().length, os.totalmem()].join('|');
}

export function readCachedCapability(dataDir: string, machine = machineFingerprint()): Capability | null {
  const path = join(dataDir, CAPABILITY_FILE);
  if (!existsSync(path)) return null;
  try {
    const parsed = cacheSchema.safeParse(JSON.parse(readFileSync(path, 'utf8')));
    return parsed.success && parsed.data.machine === machine ? parsed.data.capability : null;
  } catch {
    return null;
  }
}

export async function measureCapability(
  dataDir: string,
  opts: { force?: boolean; bench?: MicrobenchOptions; machine?: string } = {},
): Promise<{ capability: Capability; cached: boolean }> {
  const machine = opts.machine ?? machineFingerprint();
  if (!opts.force) {
    const cached = readCachedCapability(dataDir, machine);
    if (cached) return { capability: cached, cached: true };
  }
  const capability = await runMicrobench(opts.bench);
  writeFileSync(join(dataDir, CAPABILITY_FILE), JSON.stringify({ machine, version: BENCH_VERSION, capability }, null, 2));
  return { capability, cached: false };
}
