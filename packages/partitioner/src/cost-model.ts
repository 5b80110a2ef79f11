import type { Cluster, ClusterLink, ClusterNode, LinkKind } from './cluster.js';
import type { LayerSpec, ModelSpec } from './model.js';
import { type Layout, type StageLayout, kvHeadsPerMember } from './layout.js';
import type { PlanRequest } from './request.js';

/*
 * The cost model: how long a token takes on a layout. Reads top to bottom:
 *   1. chip table (spec-sheet bandwidth and compute, used when a node does not report its own)
 *   2. efficiency factors per chip class, and how they were calibrated
 *   3. nodes and links resolved to numbers
 *   4. communication: a pipeline hop and a tensor-parallel all-reduce
 *   5. one layer on one node (decode and prefill)
 *   6. a whole layout: decode tokens/s, prefill tokens/s, time to first token
 *
 * Decode on these machines is bound by memory bandwidth: every token reads every active weight
 * once. So a layer costs max(bytes / bandwidth, flops / compute) plus a fixed dispatch overhead,
 * and communication adds a pipeline hop per stage boundary or two all-reduces per layer.
 */

// ─── 1. Chip table ────────────────────────────────────────────────────────────────────────────

export type ChipClass = 'apple' | 'cpu';

export interface ChipSpec {
  name: string;
  /** Memory bandwidth, GB/s (Apple spec sheets). */
  bandwidthGBps: number;
  /** GPU fp16 throughput, TFLOP/s (Apple publishes fp32; the GPU runs fp16 at the same rate). */
  tflops: number;
  class: ChipClass;
}

/** Top bin of each chip; nodes that measured their own bandwidth/tflops override these. */
export const CHIPS: readonly ChipSpec[] = [
  { name: 'Apple M1', bandwidthGBps: 68.25, tflops: 2.6, class: 'apple' },
  { name: 'Apple M1 Pro', bandwidthGBps: 200, tflops: 5.3, class: 'apple' },
  { name: 'Apple M1 Max', bandwidthGBps: 400, tflops: 10.6, class: 'apple' },
  { name: 'Apple M1 Ultra', bandwidthGBps: 800, tflops: 21.2, class: 'apple' },
  { name: 'Apple M2', bandwidthGBps: 100, tflops: 3.6, class: 'apple' },
  { name: 'Apple M2 Pro', bandwidthGBps: 200, tflops: 6.8, class: 'apple' },
  { name: 'Apple M2 Max', bandwidthGBps: 400, tflops: 13.6, class: 'apple' },
  { name: 'Apple M2 Ultra', bandwidthGBps: 800, tflops: 27.2, class: 'apple' },
  { name: 'Apple M3', bandwidthGBps: 100, tflops: 4.1, class: 'apple' },
  { name: 'Apple M3 Pro', bandwidthGBps: 150, tflops: 7.4, class: 'apple' },
  { name: 'Apple M3 Max', bandwidthGBps: 400, tflops: 16.4, class: 'apple' },
  { name: 'Apple M3 Ultra', bandwidthGBps: 819, tflops: 28.4, class: 'apple' },
  { name: 'Apple M4', bandwidthGBps: 120, tflops: 4.3, class: 'apple' },
  { name: 'Apple M4 Pro', bandwidthGBps: 273, tflops: 9.2, class: 'apple' },
  { name: 'Apple M4 Max', bandwidthGBps: 546, tflops: 18.4, class: 'apple' },
  { name: 'Apple M5', bandwidthGBps: 153, tflops: 5.7, class: 'apple' },
];

/** Anything not in the table: a plain x86/ARM server running on its CPU. */
export const GENERIC_CPU: ChipSpec = { name: 'generic CPU', bandwidthGBps: 50, tflops: 1, class: 'cpu' };

/** Longest table name contained in the node's chip string ("Apple M4 Max (16-core)" → M4 Max). */
export function lookupChip(chip: string | undefined): ChipSpec | undefined {
  if (!chip) return undefined;
  if (chipCache.has(chip)) return chipCache.get(chip);
  const found = matchChip(chip);
  chipCache.set(chip, found);
  return found;
}

const chipCache = new Map<string, ChipSpec | undefined>();

function matchChip(chip: string): ChipSpec | undefined {
  const c = chip.toLowerCase().replace(/\s+/g, ' ');
  let best: ChipSpec | undefined;
  for (const spec of CHIPS) {
    const short = spec.name.toLowerCase().replace(/^apple /, '');
    const re = new RegExp(`(^|[^a-z0-9])${short.replace(/ /g, ' ')}($|[^a-z0-9])`);
    if (re.test(c) && (!best || spec.name.length > best.name.length)) best = spec;
  }
  return best;
}

// ─── 2. Efficiency factors and calibration ────────────────────────────────────────────────────

export interface EfficiencyFactors {
  /** Fraction of spec memory bandwidth a decode kernel reaches. */
  bandwidth: number;
  /** Fraction of spec compute a prefill matmul reaches. */
  compute: number;
  /** Fixed time per dense decoder layer per step (kernel dispatch and synchronisation), µs. */
  denseLayerUs: number;
  /** Extra fixed time per MoE layer per step (routing, top-k, gathered expert matmuls), µs. */
  moeLayerUs: number;
  /** Fixed time per generated token on the last stage (sampling, detokenising, scheduling), µs. */
  tokenUs: number;
}

/*
 * Calibration (apple): against the published 4x M3 Ultra decode table in
 * shared/notes/published-measurements.md — exo, tensor parallel over RDMA, 4-bit:
 *
 *   model                    published 1/2/4 nodes   bytes read per token (this model)
 *   Qwen3 235B A22B          19.5 / 26.2 / 31.9      12.2 GB (MLX 4-bit, 94 layers)
 *   DeepSeek V3.1 671B       21.1 / 27.8 / 32.5      20.8 GB (MLX 4-bit, 61 layers)
 *   Kimi K2 Thinking 1T       -   / 21.6 / 28.3      33.0 GB (native int4 experts, bf16 attention)
 *
 * Pure bandwidth (819 GB/s) would give Qwen3 67 tok/s and DeepSeek 39 tok/s, yet Qwen3 is the
 * slower of the two: time per token follows the number of MoE layers (94 vs 61) more than the bytes.
 * So each MoE layer carries a fixed cost, and that cost is not divided by tensor parallelism
 * (every member runs every layer), which is also why 4 nodes give ~1.6x and not 4x. A grid search
 * over (bandwidth, denseLayerUs, moeLayerUs, tokenUs) minimising the squared log error of the eight
 * points found a flat optimum around 0.8 / 10-20 / 250 / 2000-2500; rounded values are below.
 * Predicted/published: Qwen3 1.11 0.99 0.92, DeepSeek 0.96 1.01 1.09, Kimi 0.96 0.95 (worst 11%;
 * bench/calibration.ts prints the table, test/calibration.test.ts holds every point to ±25%).
 * tokenUs (2 ms) absorbs the per-token work outside the layers in exo's loop (sampling, streaming).
 * The dense-layer overhead is not pinned down by these MoE-only points; 20 µs keeps a 4-bit 8B dense
 * model on an M4 Max in the 70-100 tok/s range that MLX users report.
 * Other Apple chips run the same software stack and share the factors: only the M3 Ultra column is
 * calibrated; the rest scale with their spec (or measured) bandwidth.
 * The llama.cpp (TCP RPC) column is used only as a direction check: over ~300 µs TCP links,
 * tensor parallel must come out slower than pipeline (test/calibration.test.ts).
 */
export const FACTORS: Record<ChipClass, EfficiencyFactors> = {
  apple: { bandwidth: 0.8, compute: 0.5, denseLayerUs: 20, moeLayerUs: 250, tokenUs: 2000 },
  // CPU inference (Orchard's WASM kernels, llama.cpp-like): lower bandwidth efficiency, small dispatch
  // cost; not calibrated against published tables. tokenUs is what Orchard's own serving path measured
  // per token outside the layers on a 2-core Linux VM (bench:serve's api lines: the runner process and
  // its IPC ~60 us over the engine's step, the daemon ~40-50 us of CPU beside it, sampling and
  // detokenizing a few us): 1 ms had the bundled model predicted at ~690 tok/s against ~2,500-3,500
  // measured through the API.
  cpu: { bandwidth: 0.6, compute: 0.5, denseLayerUs: 20, moeLayerUs: 100, tokenUs: 100 },
};

// ─── 3. Nodes and links resolved to numbers ───────────────────────────────────────────────────

export interface NodePerf {
  id: string;
  /** Chip used for fallbacks (table entry or generic CPU). */
  chip: ChipSpec;
  bandwidthBytesPerS: number;
  flopsPerS: number;
  factors: EfficiencyFactors;
}

export function nodePerf(node: ClusterNode, factors: Record<ChipClass, EfficiencyFactors> = FACTORS): NodePerf {
  const chip = lookupChip(node.chip) ?? GENERIC_CPU;
  return {
    id: node.id,
    chip,
    bandwidthBytesPerS: (node.memoryBandwidthGBps ?? chip.bandwidthGBps) * 1e9,
    flopsPerS: (node.tflops ?? chip.tflops) * 1e12,
    factors: factors[chip.class],
  };
}

/** Link kinds that are a cable per pair (parallel transfers) vs a shared NIC behind a switch. */
const POINT_TO_POINT: ReadonlySet<LinkKind> = new Set(['rdma', 'thunderbolt']);

export type Transport = 'rdma' | 'tcp';

export function transportOf(kind: LinkKind): Transport {
  return kind === 'rdma' ? 'rdma' : 'tcp';
}

/** Symmetric lookup of the links between two nodes. */
export class LinkTable {
  readonly #byPair = new Map<string, ClusterLink[]>();

  constructor(cluster: Cluster) {
    for (const link of cluster.links) {
      const key = pairKey(link.a, link.b);
      const list = this.#byPair.get(key) ?? [];
      list.push(link);
      this.#byPair.set(key, list);
    }
  }

  /** The link between a and b that moves `bytes` fastest, or undefined when not connected. */
  best(a: string, b: string, bytes: number): ClusterLink | undefined {
    let best: ClusterLink | undefined;
    for (const l of this.#byPair.get(pairKey(a, b)) ?? []) {
      if (!best || hopSeconds(l, bytes) < hopSeconds(best, bytes)) best = l;
    }
    return best;
  }

  connected(a: string, b: string): boolean {
    return this.#byPair.has(pairKey(a, b));
  }

  /** Every link between a and b (two cables are two links). */
  between(a: string, b: string): readonly ClusterLink[] {
    return this.#byPair.get(pairKey(a, b)) ?? [];
  }
}

function pairKey(a: string, b: string): string {
  return a < b ? `${a}\u0000${b}` : `${b}\u0000${a}`;
}

// ─── 4. Communication ─────────────────────────────────────────────────────────────────────────

/** One message over one link: latency plus serialisation. */
export function hopSeconds(link: ClusterLink, bytes: number): number {
  return link.latencyUs * 1e-6 + (bytes * 8) / (link.bandwidthGbps * 1e9);
}

/**
 * Sends a stage's output to the next stage. Every member of a tensor-parallel stage holds the full
 * hidden state after its all-reduce, so each receiver takes it from its best-connected sender;
 * the hop lasts as long as the slowest receiver. Infinity when a receiver has no link.
 */
export function stageHopSeconds(links: LinkTable, from: string[], to: string[], bytes: number): { seconds: number; transport: Transport } {
  let worst = 0;
  let transport: Transport = 'rdma';
  for (const b of to) {
    let bestS = Infinity;
    let bestKind: LinkKind | undefined;
    for (const a of from) {
      if (a === b) {
        bestS = 0;
        bestKind = 'rdma';
        break;
      }
      const l = links.best(a, b, bytes);
      if (l && hopSeconds(l, bytes) < bestS) {
        bestS = hopSeconds(l, bytes);
        bestKind = l.kind;
      }
    }
    if (bestS === Infinity) return { seconds: Infinity, transport: 'tcp' };
    if (bestKind && transportOf(bestKind) === 'tcp') transport = 'tcp';
    worst = Math.max(worst, bestS);
  }
  return { seconds: worst, transport };
}

/**
 * All-reduce of `bytes` across a group in which every pair is linked, on the group's slowest link.
 * Over RDMA (JACCL-style mesh): everyone sends its whole buffer to every peer at once — one latency;
 * for large buffers a reduce-scatter + all-gather ring (2(k-1) steps of bytes/k) if cheaper.
 * Over TCP: the ring (what MLX's TCP backend runs), 2(k-1) latency-bound steps; one-shot over TCP
 * would need k-1 sockets per node serviced in lock step, and the published "28.6 tok/s RDMA vs
 * 6.6 tok/s TCP ring" report shows TCP all-reduces costing several one-way latencies each.
 * Behind one Ethernet/Wi-Fi NIC parallel sends queue; on per-pair cables they do not.
 */
export function allReduceSeconds(links: LinkTable, members: string[], bytes: number): { seconds: number; transport: Transport } {
  const k = members.length;
  if (k < 2) return { seconds: 0, transport: 'rdma' };
  let latency = 0;
  let bandwidth = Infinity;
  let shared = false;
  let transport: Transport = 'rdma';
  for (let i = 0; i < k; i++) {
    for (let j = i + 1; j < k; j++) {
      const l = links.best(members[i], members[j], bytes);
      if (!l) return { seconds: Infinity, transport: 'tcp' };
      latency = Math.max(latency, l.latencyUs * 1e-6);
      bandwidth = Math.min(bandwidth, (l.bandwidthGbps * 1e9) / 8);
      if (!POINT_TO_POINT.has(l.kind)) shared = true;
      if (transportOf(l.kind) === 'tcp') transport = 'tcp';
    }
  }
  const ring = 2 * (k - 1) * (latency + bytes / k / bandwidth);
  if (transport === 'tcp') return { seconds: ring, transport };
  const oneShot = latency + ((shared ? k - 1 : 1) * bytes) / bandwidth;
  return { seconds: Math.min(oneShot, ring), transport };
}

// ─── 5. One layer on one node ─────────────────────────────────────────────────────────────────

/** The slice of every layer a node holds: its fraction of query heads (and MLP columns) and of KV heads. */
export interface MemberShare {
  /** Fraction of query heads and of MLP / expert columns. */
  share: number;
  /** Fraction of the KV projections and KV cache (1 when MLA: the latent is replicated). */
  kvShare: number;
  /** Query heads held. */
  heads: number;
}

export function memberShares(model: ModelSpec, stage: StageLayout): MemberShare[] {
  const kv = kvHeadsPerMember(stage.heads, model.numHeads, model.numKvHeads);
  return stage.heads.map((h, i) => ({
    share: h / model.numHeads,
    kvShare: model.kvReplicated ? 1 : kv[i] / model.numKvHeads,
    heads: h,
  }));
}

/** Weight bytes a member stores for one layer. */
export function memberLayerBytes(layer: LayerSpec, m: MemberShare): number {
  return layer.replicatedBytes + layer.headBytes * m.share + layer.kvHeadBytes * m.kvShare + layer.mlpBytes * m.share;
}

/** KV-cache bytes a member stores per token for one layer. */
export function memberKvBytesPerToken(model: ModelSpec, m: MemberShare): number {
  return model.kvBytesPerTokenPerLayer * m.kvShare;
}

/** Seconds for one decode step of one layer on one member: read weights and the KV cache. */
export function layerDecodeSeconds(model: ModelSpec, layer: LayerSpec, node: NodePerf, m: MemberShare, req: PlanRequest): number {
  const f = node.factors;
  const weights = layer.replicatedBytes + layer.headBytes * m.share + layer.kvHeadBytes * m.kvShare + layer.mlpActiveBytes * m.share;
  const kv = req.sequences * req.promptTokens * memberKvBytesPerToken(model, m);
  const flops = req.sequences * (layer.flopsPerToken * m.share + req.promptTokens * model.attentionFlopsPerPosition * m.share);
  const memory = (weights + kv) / (node.bandwidthBytesPerS * f.bandwidth);
  const compute = flops / (node.flopsPerS * f.compute);
  return Math.max(memory, compute) + overheadSeconds(layer, f);
}

/** Prefill chunk: prompts are processed this many tokens at a time (bounds the workspace). */
export const PREFILL_CHUNK = 512;

/** Seconds for one layer of a whole prompt on one member. */
export function layerPrefillSeconds(model: ModelSpec, layer: LayerSpec, node: NodePerf, m: MemberShare, req: PlanRequest): number {
  const f = node.factors;
  const p = req.promptTokens * req.sequences;
  const chunks = Math.ceil(req.promptTokens / PREFILL_CHUNK);
  const chunkTokens = Math.min(req.promptTokens, PREFILL_CHUNK) * req.sequences;
  // Routed experts touched by a chunk: each token picks k of E, so most experts are read.
  let mlp = layer.mlpActiveBytes;
  if (layer.kind === 'moe' && model.moe) {
    const a = model.moe.expertsPerToken / model.moe.experts;
    const routed = (layer.mlpBytes - layer.mlpActiveBytes) / (1 - a);
    const touched = 1 - Math.pow(1 - a, chunkTokens);
    mlp = layer.mlpBytes - routed + routed * touched;
  }
  const weights = layer.replicatedBytes + layer.headBytes * m.share + layer.kvHeadBytes * m.kvShare + mlp * m.share;
  const flops = p * layer.flopsPerToken * m.share + req.sequences * ((req.promptTokens * req.promptTokens) / 2) * model.attentionFlopsPerPosition * m.share;
  const memory = (chunks * weights) / (node.bandwidthBytesPerS * f.bandwidth);
  const compute = flops / (node.flopsPerS * f.compute);
  return Math.max(memory, compute) + chunks * overheadSeconds(layer, f);
}

function overheadSeconds(layer: LayerSpec, f: EfficiencyFactors): number {
  return (f.denseLayerUs + (layer.kind === 'moe' ? f.moeLayerUs : 0)) * 1e-6;
}

/**
 * Seconds for the output head on one member of the last stage: its block of `share` of the vocabulary
 * rows (a tensor group splits the lm_head by rows; the sampler joins the blocks).
 */
export function headDecodeSeconds(model: ModelSpec, node: NodePerf, req: PlanRequest, share = 1): number {
  const f = node.factors;
  const memory = (share * model.lmHeadBytes) / (node.bandwidthBytesPerS * f.bandwidth);
  const compute = (2 * share * req.sequences * model.vocabSize * model.hiddenSize) / (node.flopsPerS * f.compute);
  return Math.max(memory, compute) + f.tokenUs * 1e-6;
}

// ─── 6. A whole layout ────────────────────────────────────────────────────────────────────────

export interface StageCost {
  /** Decode seconds per step for this stage's layers (slowest member per layer). */
  decodeSeconds: number;
  /** Of which all-reduce time. */
  allReduceSeconds: number;
  prefillSeconds: number;
  /** Transport of the group's all-reduce ('rdma' for single-node stages). */
  transport: Transport;
}

export interface Prediction {
  decodeTokensPerSecond: number;
  /** All sequences together (= decodeTokensPerSecond x sequences). */
  aggregateDecodeTokensPerSecond: number;
  prefillTokensPerSecond: number;
  ttftMs: number;
  /** Where a decode step's time goes, in milliseconds. */
  breakdown: { computeMs: number; allReduceMs: number; hopsMs: number; headMs: number };
  stages: StageCost[];
  /** Transport of hop i (stage i to stage i+1; the last entry is the return to the first stage). */
  hops: { seconds: number; transport: Transport }[];
}

/** Decode seconds for a stage's layer range; all-reduce included, head excluded. */
export function stageCost(model: ModelSpec, stage: StageLayout, perfs: NodePerf[], links: LinkTable, req: PlanRequest): StageCost {
  const shares = memberShares(model, stage);
  let decode = 0;
  let prefill = 0;
  const act = model.activationBytesPerToken;
  const ar = allReduceSeconds(links, stage.nodes, act * req.sequences);
  const chunkTokens = Math.min(req.promptTokens, PREFILL_CHUNK) * req.sequences;
  const chunks = Math.ceil(req.promptTokens / PREFILL_CHUNK);
  const arPrefill = stage.nodes.length > 1 ? chunks * allReduceSeconds(links, stage.nodes, act * chunkTokens).seconds : 0;
  for (let l = stage.layers[0]; l < stage.layers[1]; l++) {
    const layer = model.layers[l];
    let slowest = 0;
    let slowestPrefill = 0;
    for (let i = 0; i < perfs.length; i++) {
      slowest = Math.max(slowest, layerDecodeSeconds(model, layer, perfs[i], shares[i], req));
      slowestPrefill = Math.max(slowestPrefill, layerPrefillSeconds(model, layer, perfs[i], shares[i], req));
    }
    decode += slowest;
    prefill += slowestPrefill + 2 * arPrefill;
  }
  const layers = stage.layers[1] - stage.layers[0];
  const allReduce = stage.nodes.length > 1 ? 2 * layers * ar.seconds : 0;
  return { decodeSeconds: decode + allReduce, allReduceSeconds: allReduce, prefillSeconds: prefill, transport: ar.transport };
}

/** Predicts speed for a layout. Stages run one after another for a token; see PlanRequest for the position. */
export function predict(model: ModelSpec, cluster: Cluster, layout: Layout, req: PlanRequest, links = new LinkTable(cluster), factors = FACTORS): Prediction {
  const byId = new Map(cluster.nodes.map((n) => [n.id, n]));
  const perfsOf = (s: StageLayout) => s.nodes.map((id) => nodePerf(byId.get(id)!, factors));
  const stages = layout.stages.map((s) => stageCost(model, s, perfsOf(s), links, req));
  const act = model.activationBytesPerToken;
  const hops: Prediction['hops'] = [];
  let hopsDecode = 0;
  let hopsPrefill = 0;
  const n = layout.stages.length;
  const chunkTokens = Math.min(req.promptTokens, PREFILL_CHUNK) * req.sequences;
  const chunks = Math.ceil(req.promptTokens / PREFILL_CHUNK);
  for (let i = 0; i + 1 < n; i++) {
    const h = stageHopSeconds(links, layout.stages[i].nodes, layout.stages[i + 1].nodes, act * req.sequences);
    hops.push(h);
    hopsDecode += h.seconds;
    hopsPrefill += chunks * stageHopSeconds(links, layout.stages[i].nodes, layout.stages[i + 1].nodes, act * chunkTokens).seconds;
  }
  if (n > 1) {
    // The sampled token goes back to the first stage: directly if linked, else back along the chain.
    const back = returnHopSeconds(links, layout.stages, req.sequences * 4);
    hops.push(back);
    hopsDecode += back.seconds;
  }
  const last = layout.stages[n - 1];
  const headPerfs = perfsOf(last);
  const headShare = Math.ceil(model.vocabSize / last.nodes.length) / model.vocabSize;
  const head = Math.max(...headPerfs.map((p) => headDecodeSeconds(model, p, req, headShare)));
  const compute = stages.reduce((a, s) => a + s.decodeSeconds - s.allReduceSeconds, 0);
  const allReduce = stages.reduce((a, s) => a + s.allReduceSeconds, 0);
  const step = compute + allReduce + hopsDecode + head;
  const ttft = stages.reduce((a, s) => a + s.prefillSeconds, 0) + hopsPrefill + head;
  return {
    decodeTokensPerSecond: 1 / step,
    aggregateDecodeTokensPerSecond: req.sequences / step,
    prefillTokensPerSecond: (req.promptTokens * req.sequences) / ttft,
    ttftMs: ttft * 1000,
    breakdown: { computeMs: compute * 1000, allReduceMs: allReduce * 1000, hopsMs: hopsDecode * 1000, headMs: head * 1000 },
    stages,
    hops,
  };
}

export function returnHopSeconds(links: LinkTable, stages: StageLayout[], bytes: number): { seconds: number; transport: Transport } {
  const n = stages.length;
  const direct = stageHopSeconds(links, stages[n - 1].nodes, stages[0].nodes, bytes);
  if (direct.seconds < Infinity) return direct;
  let seconds = 0;
  let transport: Transport = 'rdma';
  for (let i = n - 1; i > 0; i--) {
    const h = stageHopSeconds(links, stages[i].nodes, stages[i - 1].nodes, bytes);
    seconds += h.seconds;
    if (h.transport === 'tcp') transport = 'tcp';
  }
  return { seconds, transport };
}
