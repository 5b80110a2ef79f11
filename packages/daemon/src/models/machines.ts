/**
 * Common Apple-silicon Macs by short name, for planning before there is a pod (`orchard plan MODEL
 * --machine m4-max-128 --machine m4-max-128`, or `--machine m4-max-128x2`): each becomes a cluster node,
 * several are joined pairwise by Thunderbolt 5 carrying TCP. Pure data and pure functions.
 */
import { lookupChip, type Cluster, type ClusterLink, type ClusterNode } from '@orchard/partitioner';

export interface Machine {
  /** Short name, the `--machine` value. */
  name: string;
  /** What it is, for people. */
  label: string;
  /** Chip as the profile reports it; bandwidth and TFLOP/s come from the partitioner's chip table (CHIPS,
   * Apple spec sheets, top GPU bin) so the planner sees the same numbers as for a live pod of these. */
  chip: string;
  /** Unified memory in GiB (Apple's "128GB" is 128 GiB). */
  memoryGiB: number;
}

/*
 * Memory sizes are configurations Apple sells (apple.com/mac-studio/specs, /mac-mini/specs,
 * /macbook-pro/specs; Mac Studio M2 Ultra: support.apple.com/kb/SP898). Bandwidth (Apple spec sheets,
 * also in shared/notes/published-measurements.md): M4 120 GB/s, M4 Pro 273, M4 Max 546 (the 40-core GPU
 * bin; the 32-core bin has 410), M3 Ultra 819, M2 Ultra 800.
 */
export const MACHINES: readonly Machine[] = [
  { name: 'mac-mini-m4-16', label: 'Mac mini M4, 16 GB', chip: 'Apple M4', memoryGiB: 16 },
  { name: 'mac-mini-m4-32', label: 'Mac mini M4, 32 GB', chip: 'Apple M4', memoryGiB: 32 },
  { name: 'm4-pro-24', label: 'Mac mini / MacBook Pro M4 Pro, 24 GB', chip: 'Apple M4 Pro', memoryGiB: 24 },
  { name: 'm4-pro-48', label: 'Mac mini / MacBook Pro M4 Pro, 48 GB', chip: 'Apple M4 Pro', memoryGiB: 48 },
  { name: 'm4-pro-64', label: 'Mac mini M4 Pro, 64 GB', chip: 'Apple M4 Pro', memoryGiB: 64 },
  { name: 'm4-max-64', label: 'MacBook Pro / Mac Studio M4 Max (40-core GPU), 64 GB', chip: 'Apple M4 Max', memoryGiB: 64 },
  { name: 'm4-max-128', label: 'MacBook Pro / Mac Studio M4 Max (40-core GPU), 128 GB', chip: 'Apple M4 Max', memoryGiB: 128 },
  { name: 'm2-ultra-192', label: 'Mac Studio / Mac Pro M2 Ultra (76-core GPU), 192 GB', chip: 'Apple M2 Ultra', memoryGiB: 192 },
  { name: 'm3-ultra-96', label: 'Mac Studio M3 Ultra, 96 GB', chip: 'Apple M3 Ultra', memoryGiB: 96 },
  { name: 'm3-ultra-256', label: 'Mac Studio M3 Ultra (80-core GPU), 256 GB', chip: 'Apple M3 Ultra', memoryGiB: 256 },
  { name: 'm3-ultra-512', label: 'Mac Studio M3 Ultra (80-core GPU), 512 GB', chip: 'Apple M3 Ultra', memoryGiB: 512 },
];

/*
 * What the GPU may use: macOS wires at most a share of unified memory for the GPU (Metal's
 * recommendedMaxWorkingSetSize; `sysctl iogpu.wired_limit_mb` raises it until reboot). Apple does not
 * publish the share; MLX and llama.cpp users report about 2/3 on Macs up to 36 GB and 3/4 above, which is
 * what a Mac left at its defaults gives a model. Orchard does not change the limit.
 */
export function gpuBudgetBytes(memoryGiB: number): number {
  return Math.floor(memoryGiB * 2 ** 30 * (memoryGiB <= 36 ? 2 / 3 : 3 / 4));
}

/*
 * Thunderbolt 5 carrying TCP (the default: no RDMA set-up needed), as in
 * examples/clusters/2x-m4-max-tb5-tcp.json: 52-63 Gbit/s measured with 4 streams and 0.35-0.6 ms round
 * trip on a TB5 cable rated 80 Gb/s (shared/notes/rdma-thunderbolt.md).
 */
export const TB5_TCP: Pick<ClusterLink, 'kind' | 'latencyUs' | 'bandwidthGbps'> = { kind: 'thunderbolt', latencyUs: 250, bandwidthGbps: 55 };

export class MachineError extends Error {}

/** `NAME` or `NAMExN` (N copies): the machines named, in order. */
export function parseMachines(values: readonly string[]): Machine[] {
  const out: Machine[] = [];
  for (const value of values) {
    const m = /^(.*?)(?:x(\d+))?$/.exec(value.trim().toLowerCase())!;
    const machine = MACHINES.find((x) => x.name === m[1]);
    if (!machine) throw new MachineError(`--machine ${value}: unknown machine; known: ${MACHINES.map((x) => x.name).join(', ')} (add xN for N of them, e.g. m4-max-128x2)`);
    const count = m[2] === undefined ? 1 : Number(m[2]);
    if (count < 1 || count > 16) throw new MachineError(`--machine ${value}: the count must be 1 to 16`);
    for (let i = 0; i < count; i++) out.push(machine);
  }
  if (out.length === 0) throw new MachineError('--machine: name at least one machine');
  return out;
}

/** A cluster of these machines, every pair cabled (Thunderbolt 5, TCP unless `link` says otherwise). */
export function machineCluster(machines: readonly Machine[], link = TB5_TCP): Cluster {
  const ids = machines.map((m, i) => (machines.filter((x) => x.name === m.name).length > 1 ? `${m.name}-${machines.slice(0, i + 1).filter((x) => x.name === m.name).length}` : m.name));
  const nodes: ClusterNode[] = machines.map((m, i) => {
    const chip = lookupChip(m.chip)!;
    return { id: ids[i], chip: m.chip, memoryBytes: m.memoryGiB * 2 ** 30, availableBytes: gpuBudgetBytes(m.memoryGiB), memoryBandwidthGBps: chip.bandwidthGBps, tflops: chip.tflops };
  });
  const links: ClusterLink[] = [];
  for (let a = 0; a < ids.length; a++) for (let b = a + 1; b < ids.length; b++) links.push({ a: ids[a], b: ids[b], ...link });
  return { nodes, links };
}
