import type { Cluster, ClusterNode } from './cluster.js';
import {
  type LinkTable,
  type MemberShare,
  type NodePerf,
  allReduceSeconds,
  layerDecodeSeconds,
  memberKvBytesPerToken,
  memberLayerBytes,
  memberShares,
  nodePerf,
} from './cost-model.js';
import { splitHeads } from './layout.js';
import { endBytes, kvCacheBytes, usableBytes, workspaceBytes } from './memory.js';
import type { ModelSpec } from './model.js';
import { reservedSequences, type PlanRequest } from './request.js';

/**
 * A unit is what becomes one pipeline stage: a single node, or a tensor-parallel group with its
 * head split. Everything the search asks about a unit for a layer range is precomputed here as
 * prefix sums over layers, so a range costs O(members).
 */
export interface Unit {
  key: string;
  nodes: string[];
  heads: number[];
  perfs: NodePerf[];
  shares: MemberShare[];
  /** decodePrefix[e] - decodePrefix[b] = decode seconds of layers [b, e) including all-reduces. */
  decodePrefix: Float64Array;
  /** Per member: memPrefix[m][e] - memPrefix[m][b] = weight + KV bytes of layers [b, e). */
  memPrefix: Float64Array[];
  /** Per member: bytes left for layers after workspace and headroom. */
  caps: number[];
  /** Mean decode seconds per layer (for ordering and bounds). */
  avgLayerSeconds: number;
  /** About how many layers fit, from the mean layer (for bounds). */
  layerCapacity: number;
  /** Layers that surely fit, counting each as the largest layer. */
  safeLayerCapacity: number;
  /** All-reduce transport of the group ('rdma' for a single node). */
  transport: 'rdma' | 'tcp';
}

export function buildUnit(model: ModelSpec, nodes: ClusterNode[], heads: number[], links: LinkTable, req: PlanRequest): Unit {
  const L = model.numLayers;
  const perfs = nodes.map((n) => nodePerf(n));
  const ids = nodes.map((n) => n.id);
  const stage = { nodes: ids, heads, layers: [0, L] as [number, number] };
  const shares = memberShares(model, stage);
  const ar = allReduceSeconds(links, ids, model.activationBytesPerToken * req.sequences);
  const arPerLayer = ids.length > 1 ? 2 * ar.seconds : 0;
  const decodePrefix = new Float64Array(L + 1);
  const memPrefix = ids.map(() => new Float64Array(L + 1));
  const kvPerLayer = shares.map((m) => memberKvBytesPerToken(model, m) * req.contextTokens * reservedSequences(req));
  for (let l = 0; l < L; l++) {
    const layer = model.layers[l];
    let slowest = 0;
    for (let i = 0; i < ids.length; i++) {
      slowest = Math.max(slowest, layerDecodeSeconds(model, layer, perfs[i], shares[i], req));
      memPrefix[i][l + 1] = memPrefix[i][l] + memberLayerBytes(layer, shares[i]) + kvPerLayer[i];
    }
    decodePrefix[l + 1] = decodePrefix[l] + slowest + arPerLayer;
  }
  const caps = nodes.map((n, i) => usableBytes(n.availableBytes, workspaceBytes(model, shares[i], req, true)));
  // Optimistic: a middle stage of mean layers. Safe: an end stage (embedding and head) of largest layers.
  const layerCapacity = Math.min(...caps.map((c, i) => Math.floor(Math.max(0, c) / (memPrefix[i][L] / L))));
  const largest = (i: number) => Math.max(...Array.from({ length: L }, (_, l) => memPrefix[i][l + 1] - memPrefix[i][l]));
  const room = caps.map((c) => Math.max(0, c - endBytes(model, true, true)));
  const safeLayerCapacity = Math.min(...room.map((r, i) => Math.floor(r / largest(i))));
  return {
    key: ids.join('+'),
    nodes: ids,
    heads,
    perfs,
    shares,
    decodePrefix,
    memPrefix,
    caps,
    avgLayerSeconds: decodePrefix[L] / L,
    layerCapacity,
    safeLayerCapacity,
    transport: ids.length > 1 ? ar.transport : 'rdma',
  };
}

/** Does layers [b, e) fit on every member, with its embedding / head bytes if first / last stage? */
export function fits(unit: Unit, model: ModelSpec, b: number, e: number, first: boolean, last: boolean): boolean {
  const size = unit.nodes.length;
  for (let i = 0; i < size; i++) {
    if (unit.memPrefix[i][e] - unit.memPrefix[i][b] + endBytes(model, first, last, { index: i, size }) > unit.caps[i]) return false;
  }
  return true;
}

/** Effective decode speed of a node for ordering: bytes it streams per second. */
export function nodeSpeed(perf: NodePerf): number {
  return perf.bandwidthBytesPerS * perf.factors.bandwidth;
}

/** Nodes sorted fastest first (ties: more memory, then id), the order every search walks. */
export function bySpeed(cluster: Cluster): ClusterNode[] {
  return [...cluster.nodes].sort((a, b) => {
    const d = nodeSpeed(nodePerf(b)) - nodeSpeed(nodePerf(a));
    if (d !== 0) return d;
    if (b.availableBytes !== a.availableBytes) return b.availableBytes - a.availableBytes;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  });
}

/**
 * Tensor-parallel head splits for a group, in whole heads, each >= 1: in proportion to speed (what
 * decode wants); speed-proportional but capped by each node's memory (water-filling, for a fast
 * node with little memory); and in proportion to memory. Duplicates dropped, order fixed.
 */
export function headSplits(model: ModelSpec, nodes: ClusterNode[], req: PlanRequest): number[][] {
  const H = model.numHeads;
  if (nodes.length > H) return [];
  const speeds = nodes.map((n) => nodeSpeed(nodePerf(n)));
  const need = model.totalBytes + kvCacheBytes(model, req.contextTokens, reservedSequences(req));
  const caps = nodes.map((n) => Math.max(0, usableBytes(n.availableBytes, 0)) / need);
  const out: number[][] = [];
  const add = (heads: number[]) => {
    if (!out.some((o) => o.every((h, i) => h === heads[i]))) out.push(heads);
  };
  add(splitHeads(H, speeds));
  add(splitHeads(H, waterFill(speeds, caps)));
  add(splitHeads(H, nodes.map((n) => n.availableBytes)));
  return out;
}

/** Shares proportional to weights, none above its cap, the excess spread over the rest. */
function waterFill(weights: number[], caps: number[]): number[] {
  const share = weights.map(() => 0);
  const free = new Set(weights.keys());
  let left = 1;
  while (free.size > 0 && left > 1e-12) {
    const total = [...free].reduce((a, i) => a + weights[i], 0);
    let capped = false;
    for (const i of [...free]) {
      const want = (weights[i] / total) * left;
      if (want >= caps[i]) {
        share[i] = caps[i];
        free.delete(i);
        capped = true;
      }
    }
    if (!capped) {
      for (const i of free) share[i] = (weights[i] / total) * left;
      break;
    }
    left = 1 - share.reduce((a, b) => a + b, 0);
  }
  return share;
}
