import type { Cluster, ClusterLink, ClusterNode, LinkKind } from './cluster.js';
import { InputError } from './errors.js';

/**
 * Checks a cluster description (hand-written or from the daemon) and returns it typed. Every error
 * names the offending field by path, e.g. `nodes[2].availableBytes`.
 */

const SOURCE = 'cluster';
const KINDS: readonly LinkKind[] = ['rdma', 'thunderbolt', 'ethernet', 'wifi'];

export function parseCluster(raw: unknown): Cluster {
  const root = record(raw, '(root)');
  if (!Array.isArray(root.nodes)) throw new InputError(SOURCE, 'nodes', 'must be a list of nodes');
  if (root.nodes.length === 0) throw new InputError(SOURCE, 'nodes', 'is empty: a cluster needs at least one node');
  const ids = new Set<string>();
  const nodes: ClusterNode[] = root.nodes.map((n: unknown, i: number) => {
    const f = `nodes[${i}]`;
    const o = record(n, f);
    const id = o.id;
    if (typeof id !== 'string' || id.length === 0) throw new InputError(SOURCE, `${f}.id`, 'must be a non-empty string');
    if (ids.has(id)) throw new InputError(SOURCE, `${f}.id`, `"${id}" is used by two nodes`);
    ids.add(id);
    const memoryBytes = positive(o.memoryBytes, `${f}.memoryBytes`);
    // Zero is a node with nothing to give (the daemon reports what is free); it simply holds no layers.
    const availableBytes = nonNegative(o.availableBytes, `${f}.availableBytes`);
    if (availableBytes > memoryBytes) throw new InputError(SOURCE, `${f}.availableBytes`, `(${availableBytes}) exceeds memoryBytes (${memoryBytes})`);
    if (o.chip !== undefined && typeof o.chip !== 'string') throw new InputError(SOURCE, `${f}.chip`, 'must be a string');
    const node: ClusterNode = { id, memoryBytes, availableBytes };
    if (o.chip !== undefined) node.chip = o.chip as string;
    if (o.memoryBandwidthGBps !== undefined && o.memoryBandwidthGBps !== null) node.memoryBandwidthGBps = positive(o.memoryBandwidthGBps, `${f}.memoryBandwidthGBps`);
    if (o.tflops !== undefined && o.tflops !== null) node.tflops = positive(o.tflops, `${f}.tflops`);
    return node;
  });
  const rawLinks = root.links === undefined ? [] : root.links;
  if (!Array.isArray(rawLinks)) throw new InputError(SOURCE, 'links', 'must be a list of links');
  const links: ClusterLink[] = rawLinks.map((l: unknown, i: number) => {
    const f = `links[${i}]`;
    const o = record(l, f);
    for (const end of ['a', 'b'] as const) {
      if (typeof o[end] !== 'string') throw new InputError(SOURCE, `${f}.${end}`, 'must be a node id');
      if (!ids.has(o[end] as string)) throw new InputError(SOURCE, `${f}.${end}`, `"${o[end]}" is not a node in this cluster`);
    }
    if (o.a === o.b) throw new InputError(SOURCE, `${f}.b`, `links "${o.a}" to itself`);
    if (!KINDS.includes(o.kind as LinkKind)) throw new InputError(SOURCE, `${f}.kind`, `is ${JSON.stringify(o.kind)}, expected one of ${KINDS.join(', ')}`);
    const latencyUs = o.latencyUs;
    if (typeof latencyUs !== 'number' || !Number.isFinite(latencyUs) || latencyUs < 0) {
      throw new InputError(SOURCE, `${f}.latencyUs`, `must be a non-negative number, got ${JSON.stringify(latencyUs)}`);
    }
    return { a: o.a as string, b: o.b as string, kind: o.kind as LinkKind, latencyUs, bandwidthGbps: positive(o.bandwidthGbps, `${f}.bandwidthGbps`) };
  });
  return { nodes, links };
}

function record(v: unknown, field: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new InputError(SOURCE, field, 'must be an object');
  return v as Record<string, unknown>;
}

function positive(v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) {
    throw new InputError(SOURCE, field, v === undefined ? 'is missing (expected a positive number)' : `must be a positive number, got ${JSON.stringify(v)}`);
  }
  return v;
}

function nonNegative(v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
    throw new InputError(SOURCE, field, v === undefined ? 'is missing (expected a number of bytes)' : `must be a non-negative number, got ${JSON.stringify(v)}`);
  }
  return v;
}
