import type { Cluster, ClusterNode } from './cluster.js';
import { type LinkTable, returnHopSeconds, stageHopSeconds } from './cost-model.js';
import type { Layout, StageLayout } from './layout.js';
import type { ModelSpec } from './model.js';
import type { PlanRequest } from './request.js';
import { type Unit, buildUnit, bySpeed, fits, headSplits } from './units.js';

/**
 * The search: which nodes, in which groups, in which order, with which layers. Bounded so that a
 * 16-node cluster plans in milliseconds:
 *   - units: every node alone, and tensor-parallel groups built greedily from the fastest nodes
 *     that are all pairwise linked (cliques), sizes 2..MAX_TENSOR_PARALLEL;
 *   - tilings: disjoint unit sets — all singles (pipeline), or RDMA cliques of size g plus the
 *     leftover singles (hybrid);
 *   - per tiling, a branch-and-bound picks the unit sets with the lowest compute bound, only
 *     minimal ones (dropping any unit would no longer fit);
 *   - per set, the cheapest chain through the links, then an exact DP over layer boundaries
 *     (speed-optimal split under each member's memory limit).
 */

export const MAX_TENSOR_PARALLEL = 8;
/** Unit sets per tiling that get an exact split. */
const SETS_PER_TILING = 6;
/** Node expansions allowed when looking for the cheapest chain through a set. */
const CHAIN_EXPANSIONS = 5_000;
/** Tie-break towards balanced splits between equal nodes; far below any real cost. */
const BALANCE_EPSILON = 1e-12;

export interface Candidate {
  layout: Layout;
  /** Decode seconds per token from the search's prefix sums (the planner re-predicts exactly). */
  searchSeconds: number;
}

export interface SearchResult {
  candidates: Candidate[];
  /** Things tried that could not be placed at all, with why (for alternatives). */
  notes: string[];
}

export function search(model: ModelSpec, cluster: Cluster, links: LinkTable, req: PlanRequest): SearchResult {
  const nodes = bySpeed(cluster);
  const notes: string[] = [];
  const candidates: Candidate[] = [];
  const seen = new Set<string>();
  const unitCache = new Map<string, Unit>();
  const unitFor = (members: ClusterNode[], heads: number[]): Unit => {
    const key = `${members.map((n) => n.id).join('+')}:${heads.join(',')}`;
    let u = unitCache.get(key);
    if (!u) {
      u = buildUnit(model, members, heads, links, req);
      unitCache.set(key, u);
    }
    return u;
  };
  const consider = (units: Unit[]) => {
    const c = placeSet(model, units, links);
    if (!c) return;
    const key = JSON.stringify(c.layout);
    if (seen.has(key)) return;
    seen.add(key);
    candidates.push(c);
  };

  // Single nodes, each alone.
  const singles = nodes.map((n) => unitFor([n], [model.numHeads]));
  for (const u of singles) consider([u]);

  // Tensor-parallel groups over any links and over RDMA only, each holding every layer.
  const groups = [...cliques(nodes, links, () => true), ...cliques(nodes, links, (k) => k === 'rdma')];
  const groupKeys = new Set<string>();
  for (const g of groups) {
    const key = g.map((n) => n.id).join('+');
    if (groupKeys.has(key)) continue;
    groupKeys.add(key);
    const splits = headSplits(model, g, req);
    if (splits.length === 0) notes.push(`tensor over ${g.length} nodes: the model has only ${model.numHeads} attention heads`);
    for (const heads of splits) consider([unitFor(g, heads)]);
  }

  // Pipelines over singles, hybrids over RDMA cliques plus singles.
  const tilings: Unit[][] = [singles];
  for (let g = 2; g <= Math.min(MAX_TENSOR_PARALLEL, nodes.length); g++) {
    const tiling = rdmaTiling(nodes, links, g, model, req, unitFor);
    if (tiling.some((u) => u.nodes.length > 1)) tilings.push(tiling);
  }
  for (const tiling of tilings) {
    // Every unit of the tiling in one chain: the widest pipeline / hybrid, for comparison.
    if (tiling.length > 1) consider(tiling);
    // Capacities estimated from the mean layer can be one layer too optimistic (uneven layers,
    // tight memory); counting every layer as the largest one is never optimistic. Try both.
    for (const set of boundedSets(tiling, model.numLayers, (u) => u.layerCapacity)) consider(set);
    for (const set of boundedSets(tiling, model.numLayers, (u) => u.safeLayerCapacity)) consider(set);
  }
  return { candidates, notes };
}

/**
 * Greedy cliques: from each seed (fastest first), add the fastest nodes linked to every member by
 * an allowed link kind, recording the clique at each size >= 2. Deterministic; O(n^2 k).
 */
function cliques(nodes: ClusterNode[], links: LinkTable, allowed: (kind: string) => boolean): ClusterNode[][] {
  const out: ClusterNode[][] = [];
  // The pair's best link must itself be allowed (a TCP cable beside an RDMA one does not count).
  const linked = (a: ClusterNode, b: ClusterNode) => {
    const l = links.best(a.id, b.id, 0);
    return l !== undefined && allowed(l.kind);
  };
  for (const seed of nodes) {
    const group = [seed];
    for (const n of nodes) {
      if (group.length >= MAX_TENSOR_PARALLEL) break;
      if (group.includes(n)) continue;
      if (group.every((m) => linked(m, n))) {
        group.push(n);
        out.push(orderAsCluster(group, nodes));
      }
    }
  }
  return out;
}

function orderAsCluster(group: ClusterNode[], order: ClusterNode[]): ClusterNode[] {
  return order.filter((n) => group.includes(n));
}

/** Disjoint units: RDMA cliques of up to g nodes (fastest first), the rest single nodes. */
function rdmaTiling(nodes: ClusterNode[], links: LinkTable, g: number, model: ModelSpec, req: PlanRequest, unitFor: (m: ClusterNode[], h: number[]) => Unit): Unit[] {
  const used = new Set<string>();
  const units: Unit[] = [];
  const rdma = (a: ClusterNode, b: ClusterNode) => links.best(a.id, b.id, 0)?.kind === 'rdma';
  for (const seed of nodes) {
    if (used.has(seed.id)) continue;
    const group = [seed];
    for (const n of nodes) {
      if (group.length >= g) break;
      if (used.has(n.id) || group.includes(n)) continue;
      if (group.every((m) => rdma(m, n))) group.push(n);
    }
    const splits = group.length > 1 ? headSplits(model, group, req) : [[model.numHeads]];
    if (splits.length === 0) {
      units.push(unitFor([seed], [model.numHeads]));
      used.add(seed.id);
      continue;
    }
    for (const n of group) used.add(n.id);
    units.push(unitFor(group, splits[0]));
  }
  return units;
}

/**
 * Branch and bound over units sorted by speed: include or skip each; stop adding once the set can
 * hold every layer (minimal sets only — an extra stage only adds a hop). The bound is the greedy
 * fill (fastest units take as many layers as they hold), which no split of the same set beats.
 */
function boundedSets(units: Unit[], L: number, capacity: (u: Unit) => number): Unit[][] {
  const sorted = units
    .filter((u) => capacity(u) >= 1)
    // Fastest first; among equals the roomiest first, so sets stay small.
    .sort((a, b) => a.avgLayerSeconds - b.avgLayerSeconds || capacity(b) - capacity(a) || (a.key < b.key ? -1 : 1));
  const best: { cost: number; set: Unit[] }[] = [];
  const worst = () => (best.length < SETS_PER_TILING ? Infinity : best[best.length - 1].cost);
  const chosen: Unit[] = [];
  let visits = 0;
  const walk = (i: number, left: number, cost: number) => {
    if (++visits > 200_000) return;
    if (left <= 0) {
      const entry = { cost, set: [...chosen] };
      const at = best.findIndex((b) => b.cost > cost);
      best.splice(at === -1 ? best.length : at, 0, entry);
      if (best.length > SETS_PER_TILING) best.pop();
      return;
    }
    if (i >= sorted.length) return;
    // Every remaining layer costs at least the next unit's per-layer time.
    if (cost + left * sorted[i].avgLayerSeconds >= worst()) return;
    const u = sorted[i];
    const take = Math.min(capacity(u), left);
    chosen.push(u);
    walk(i + 1, left - take, cost + take * u.avgLayerSeconds);
    chosen.pop();
    walk(i + 1, left, cost);
  };
  walk(0, L, 0);
  return best.map((b) => b.set);
}

/** Orders a unit set along the links and splits the layers; undefined if it cannot be placed. */
function placeSet(model: ModelSpec, units: Unit[], links: LinkTable): Candidate | undefined {
  if (units.length > model.numLayers) return undefined;
  const order = cheapestChain(model, units, links);
  if (!order) return undefined;
  let best: Candidate | undefined;
  for (const seq of units.length > 1 ? [order, [...order].reverse()] : [order]) {
    const split = splitLayers(model, seq);
    if (!split) continue;
    const hops = chainSeconds(model, seq, links);
    const c: Candidate = {
      layout: {
        stages: seq.map((u, i): StageLayout => ({ nodes: u.nodes, heads: u.heads, layers: [split.bounds[i], split.bounds[i + 1]] })),
      },
      searchSeconds: split.seconds + hops,
    };
    if (!best || c.searchSeconds < best.searchSeconds) best = c;
  }
  return best;
}

/**
 * Exact layer split for units in a fixed order: DP over (stage, end layer), minimising decode time,
 * every stage at least one layer, every member within memory. O(stages x L^2 x members).
 */
export function splitLayers(model: ModelSpec, seq: Unit[]): { bounds: number[]; seconds: number } | undefined {
  const L = model.numLayers;
  const S = seq.length;
  let prev = new Float64Array(L + 1).fill(Infinity);
  prev[0] = 0;
  const from: Int32Array[] = [];
  for (let s = 0; s < S; s++) {
    const u = seq[s];
    const cur = new Float64Array(L + 1).fill(Infinity);
    const arg = new Int32Array(L + 1).fill(-1);
    const first = s === 0;
    const last = s === S - 1;
    const eMin = s + 1;
    const eMax = last ? L : L - (S - 1 - s);
    for (let e = last ? L : eMin; e <= eMax; e++) {
      // Longer ranges only need more memory: walk b down from e-1 and stop at the first misfit.
      for (let b = e - 1; b >= s; b--) {
        if (!fits(u, model, b, e, first, last)) break;
        if (prev[b] === Infinity) continue;
        const n = e - b;
        const cost = prev[b] + u.decodePrefix[e] - u.decodePrefix[b] + BALANCE_EPSILON * n * n;
        if (cost <= cur[e]) {
          cur[e] = cost;
          arg[e] = b;
        }
      }
    }
    from.push(arg);
    prev = cur;
  }
  if (prev[L] === Infinity) return undefined;
  const bounds = new Array<number>(S + 1);
  bounds[S] = L;
  for (let s = S - 1; s >= 0; s--) bounds[s] = from[s][bounds[s + 1]];
  return { bounds, seconds: prev[L] };
}

/** Hop seconds along an ordered chain of units, including the token's way back. */
function chainSeconds(model: ModelSpec, seq: Unit[], links: LinkTable): number {
  if (seq.length < 2) return 0;
  let t = 0;
  for (let i = 0; i + 1 < seq.length; i++) t += stageHopSeconds(links, seq[i].nodes, seq[i + 1].nodes, model.activationBytesPerToken).seconds;
  const stages = seq.map((u) => ({ nodes: u.nodes, heads: u.heads, layers: [0, 0] as [number, number] }));
  return t + returnHopSeconds(links, stages, 4).seconds;
}

/**
 * Cheapest order of units along existing links (a Hamiltonian path, with the return hop): depth
 * first from each start in speed order, pruned by the best found, capped in expansions.
 */
function cheapestChain(model: ModelSpec, units: Unit[], links: LinkTable): Unit[] | undefined {
  const n = units.length;
  if (n === 1) return units;
  const hop = units.map((a) => units.map((b) => (a === b ? Infinity : stageHopSeconds(links, a.nodes, b.nodes, model.activationBytesPerToken).seconds)));
  const nearest = hop.map((row) => [...row.keys()].filter((j) => row[j] < Infinity).sort((x, y) => row[x] - row[y] || x - y));
  let best: Unit[] | undefined;
  let bestCost = Infinity;
  let expansions = 0;
  const path: number[] = [];
  const used = new Array<boolean>(n).fill(false);
  const walk = (cost: number) => {
    if (++expansions > CHAIN_EXPANSIONS || cost >= bestCost) return;
    if (path.length === n) {
      const seq = path.map((i) => units[i]);
      const total = cost + returnHopSeconds(links, seq.map((u) => ({ nodes: u.nodes, heads: u.heads, layers: [0, 0] })), 4).seconds;
      if (total < bestCost) {
        bestCost = total;
        best = seq;
      }
      return;
    }
    const at = path[path.length - 1];
    for (const j of nearest[at]) {
      if (used[j]) continue;
      used[j] = true;
      path.push(j);
      walk(cost + hop[at][j]);
      path.pop();
      used[j] = false;
    }
  };
  for (let s = 0; s < n; s++) {
    used[s] = true;
    path.push(s);
    walk(0);
    path.pop();
    used[s] = false;
  }
  return best;
}
