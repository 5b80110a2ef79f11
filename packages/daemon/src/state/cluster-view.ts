/**
 * The planner's cluster JSON (`Cluster` from @orchard/partitioner) built from the shared state,
 * plus what people need to read it: node names, pod mode, coordinator, every measured path.
 * Only live nodes with a profile appear; each pair gets its best path as its `links` entry.
 */
import type { Cluster, ClusterLink, ClusterNode } from '@orchard/partitioner';
import type { LinkMeasurement } from '../links/types.js';
import type { ClusterState } from './types.js';
import type { NodeProfile } from '../profile/types.js';

export type PodMode = 'open' | 'private';

export interface ClusterNodeView extends ClusterNode {
  name: string;
  hostname: string;
  gpuCores: number | null;
  cpuCores: number;
  os: string;
  /** 1-minute load average per core, when the node reports it. */
  load: number | null;
}

export interface ClusterView extends Cluster {
  nodes: ClusterNodeView[];
  links: ClusterLink[];
  /** "open": any Orchard daemon on the LAN may join; "private": only holders of the cluster key. */
  mode: PodMode;
  coordinator: string | null;
  /** Every measured path (a pair can have several: Thunderbolt and Ethernet). */
  paths: LinkMeasurement[];
}

const KIND_RANK: Record<LinkMeasurement['kind'], number> = { rdma: 3, thunderbolt: 2, ethernet: 1, wifi: 0 };

/** Better kind first, then higher bandwidth. */
export function bestPath(paths: LinkMeasurement[]): LinkMeasurement | undefined {
  return [...paths].sort((x, y) => KIND_RANK[y.kind] - KIND_RANK[x.kind] || y.bandwidthGbps - x.bandwidthGbps)[0];
}

export function clusterView(state: ClusterState, meta: { mode: PodMode; coordinator: string | null }): ClusterView {
  const live = Object.values(state.nodes)
    .filter((n) => n.status === 'live' && n.profile)
    .sort((a, b) => (a.peerId < b.peerId ? -1 : 1));
  const ids = new Set(live.map((n) => n.peerId));
  const nodes: ClusterNodeView[] = live.map(({ peerId, name, profile: p }) => ({
    id: peerId,
    name,
    hostname: p!.hostname,
    chip: p!.chip,
    // A discrete GPU holds the weights its runners use: its own memory bounds what the node can take.
    memoryBytes: discreteGpuBytes(p!) ?? p!.memory.totalBytes,
    // less what the node keeps per instance outside any plan (its draft model, prefix cache: serving/reserved-memory.ts)
    availableBytes: Math.max(0, Math.min(p!.memory.availableBytes, discreteGpuBytes(p!) ?? Infinity) - (p!.reservedBytes ?? 0)),
    // Runners on a GPU stream weights from GPU memory: the measured GPU copy bandwidth is the node's speed.
    ...(p!.capability ? { memoryBandwidthGBps: sig(p!.gpu?.copyBandwidthGBps ?? p!.capability.memoryBandwidthGBps), tflops: sig(p!.capability.matmulGflops / 1000) } : {}),
    gpuCores: p!.gpuCores,
    cpuCores: p!.cpu.cores,
    os: `${p!.os.platform} ${p!.os.release}`,
    load: p!.load ?? null,
  }));
  const paths = Object.values(state.links).filter((l) => ids.has(l.a) && ids.has(l.b));
  const byPair = new Map<string, LinkMeasurement[]>();
  for (const l of paths) {
    const key = `${l.a}|${l.b}`;
    byPair.set(key, [...(byPair.get(key) ?? []), l]);
  }
  const links: ClusterLink[] = [...byPair.values()].map((ps) => {
    const b = bestPath(ps)!;
    return { a: b.a, b: b.b, kind: b.kind, latencyUs: sig(b.latencyUs), bandwidthGbps: sig(b.bandwidthGbps) };
  });
  links.sort((x, y) => (x.a + x.b < y.a + y.b ? -1 : 1));
  return { nodes, links, mode: meta.mode, coordinator: meta.coordinator, paths };
}

/** Four significant digits: readable, and a small positive figure never rounds to 0 (the planner rejects 0). */
/** Memory of a discrete GPU the node's runners use (not unified/system memory), bytes, else null. */
function discreteGpuBytes(p: NodeProfile): number | null {
  const g = p.gpu;
  if (!g || g.software || !g.memoryBytes) return null;
  return g.memorySource === 'nvidia-smi' || g.memorySource === 'amdgpu vram' ? g.memoryBytes : null;
}

function sig(x: number): number {
  return Number(x.toPrecision(4));
}
