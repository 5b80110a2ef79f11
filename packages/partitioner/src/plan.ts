import type { Cluster } from './cluster.js';
import { LinkTable, type Prediction, predict } from './cost-model.js';
import { InfeasibleError } from './errors.js';
import { type Layout, type Strategy, strategyOf } from './layout.js';
import { type MemoryBreakdown, kvCacheBytes, layoutMemory, usableBytes, withHeadroom, workspaceBytes } from './memory.js';
import type { ModelSpec } from './model.js';
import { type PlanRequest, reservedSequences, resolveRequest } from './request.js';
import { expectedLoad, type LoadEstimate, type WeightSources } from './load-time.js';
import { search } from './search.js';

/**
 * The planner's entry point: model + cluster + request in, the fastest feasible plan out, with the
 * runners-up and why each lost. Deterministic: candidates are generated in a fixed order and ties
 * are broken by fewer nodes, then by the layout's text.
 */

export interface PlanStage {
  nodes: string[];
  /** [start, end): start inclusive, end exclusive. */
  layers: [number, number];
  tensorParallel: number;
  /** Tensor-parallel stage: the all-reduce's transport. Otherwise: the hop out of this stage
   * (the last stage's hop is the token going back to the first). 'local' for a one-node plan. */
  transport: 'rdma' | 'tcp' | 'local';
  /** Query heads per node (uneven when nodes differ). */
  heads: number[];
  /** Transport of the hop out of this stage (to the next; from the last, back to the first);
   * absent for a one-stage plan. */
  hopTransport?: 'rdma' | 'tcp';
}

export interface PlanPrediction {
  decodeTokensPerSecond: number;
  prefillTokensPerSecond: number;
  ttftMs: number;
}

export interface Alternative {
  strategy: Strategy;
  nodes: string[];
  stages: PlanStage[];
  /** Null when the layout cannot be placed at all. */
  predicted: PlanPrediction | null;
  rejected: string;
}

export interface Plan {
  strategy: Strategy;
  stages: PlanStage[];
  predicted: PlanPrediction & {
    aggregateDecodeTokensPerSecond: number;
    /** Milliseconds of one decode step by cause. */
    breakdown: Prediction['breakdown'];
  };
  memory: Record<string, MemoryBreakdown>;
  alternatives: Alternative[];
  model: { name: string; format: string; layers: number; weightsBytes: number; activeBytesPerToken: number; kvBytesPerToken: number; bytesFrom: string };
  request: PlanRequest;
  /** Expected time to get the weights onto the nodes (when the caller said where they are). */
  load?: LoadEstimate;
  /** A few sentences on why this plan. */
  explanation: string[];
}

/** What the planner is told about the engine that will run the plan, and about the model's bytes. */
export interface PlanOptions {
  /**
   * The engine's capabilities: whether it runs a layout (`true`), or why not. Layouts it refuses are
   * never chosen; they appear among the alternatives with the engine's reason. @default every layout
   */
  runnable?: (layout: Layout) => true | string;
  /** Where the model's bytes are now: with it, the plan predicts its load time, and between equally
   * fast layouts prefers the one that loads sooner (nodes that already hold the model). */
  weights?: WeightSources;
}

interface Evaluated {
  layout: Layout;
  strategy: Strategy;
  prediction: Prediction;
  memory: Record<string, MemoryBreakdown>;
  nodes: string[];
  load?: LoadEstimate;
}

const MAX_ALTERNATIVES = 8;

export function plan(model: ModelSpec, cluster: Cluster, request: Partial<PlanRequest> = {}, options: PlanOptions = {}): Plan {
  const req = resolveRequest(request);
  const links = new LinkTable(cluster);
  const found = search(model, cluster, links, req);
  const evaluated: Evaluated[] = [];
  const refused: Alternative[] = [];
  for (const c of found.candidates) {
    const memory = layoutMemory(model, cluster, c.layout, req);
    if (Object.values(memory).some((m) => m.totalBytes > m.availableBytes)) continue;
    const verdict = options.runnable?.(c.layout) ?? true;
    if (verdict !== true) {
      const nodes = c.layout.stages.flatMap((s) => s.nodes);
      const strategy = strategyOf(c.layout);
      if (!refused.some((r) => r.strategy === strategy && r.nodes.length === nodes.length)) {
        refused.push({ strategy, nodes, stages: [], predicted: null, rejected: `the engine cannot run it: ${verdict}` });
      }
      continue;
    }
    const prediction = predict(model, cluster, c.layout, req, links);
    if (!Number.isFinite(prediction.decodeTokensPerSecond) || prediction.decodeTokensPerSecond <= 0) continue;
    const load = options.weights && expectedLoad(model, c.layout, options.weights, links);
    evaluated.push({ layout: c.layout, strategy: strategyOf(c.layout), prediction, memory, nodes: c.layout.stages.flatMap((s) => s.nodes), ...(load ? { load } : {}) });
  }
  if (evaluated.length === 0) {
    if (refused.length > 0) throw new InfeasibleError(`${model.name}: no layout that fits is one the engine runs (${refused.map((r) => `${r.strategy} over ${r.nodes.length} node(s): ${r.rejected.replace(/^the engine cannot run it: /, '')}`).join('; ')})`, 0, 0, []);
    throw infeasible(model, cluster, req);
  }
  evaluated.sort(compare);
  const best = evaluated[0];
  return {
    strategy: best.strategy,
    stages: stagesOf(best),
    predicted: {
      ...rounded(best.prediction),
      aggregateDecodeTokensPerSecond: round(best.prediction.aggregateDecodeTokensPerSecond, 2),
      breakdown: {
        computeMs: round(best.prediction.breakdown.computeMs, 2),
        allReduceMs: round(best.prediction.breakdown.allReduceMs, 2),
        hopsMs: round(best.prediction.breakdown.hopsMs, 2),
        headMs: round(best.prediction.breakdown.headMs, 2),
      },
    },
    memory: best.memory,
    alternatives: [...alternatives(model, cluster, req, best, evaluated, found.notes), ...refused].slice(0, MAX_ALTERNATIVES + 2),
    model: {
      name: model.name,
      format: model.format,
      layers: model.numLayers,
      weightsBytes: Math.round(model.totalBytes),
      activeBytesPerToken: Math.round(model.activeBytesPerToken),
      kvBytesPerToken: model.kvBytesPerTokenPerLayer * model.numLayers,
      bytesFrom: model.bytesFrom,
    },
    request: req,
    ...(best.load ? { load: best.load } : {}),
    explanation: explain(model, best),
  };
}

/** Faster first; equal speed (within 0.1%): fewer nodes, sooner loaded, shorter TTFT, then layout text. */
function compare(a: Evaluated, b: Evaluated): number {
  const ta = a.prediction.decodeTokensPerSecond;
  const tb = b.prediction.decodeTokensPerSecond;
  if (Math.abs(ta - tb) > 1e-3 * Math.max(ta, tb)) return tb - ta;
  if (a.nodes.length !== b.nodes.length) return a.nodes.length - b.nodes.length;
  if (a.load && b.load && Math.abs(a.load.seconds - b.load.seconds) > 1e-3 * Math.max(a.load.seconds, b.load.seconds)) return a.load.seconds - b.load.seconds;
  if (a.prediction.ttftMs !== b.prediction.ttftMs) return a.prediction.ttftMs - b.prediction.ttftMs;
  const ka = JSON.stringify(a.layout);
  const kb = JSON.stringify(b.layout);
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

function stagesOf(e: Evaluated): PlanStage[] {
  const n = e.layout.stages.length;
  return e.layout.stages.map((s, i) => ({
    nodes: s.nodes,
    layers: s.layers,
    tensorParallel: s.nodes.length,
    transport: s.nodes.length > 1 ? e.prediction.stages[i].transport : n === 1 ? 'local' : e.prediction.hops[i].transport,
    heads: s.heads,
    ...(n > 1 ? { hopTransport: e.prediction.hops[i].transport } : {}),
  }));
}

function rounded(p: Prediction): PlanPrediction {
  return { decodeTokensPerSecond: round(p.decodeTokensPerSecond, 2), prefillTokensPerSecond: round(p.prefillTokensPerSecond, 1), ttftMs: round(p.ttftMs, 1) };
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** The best layout of each other (strategy, node count), with the reason it lost. */
function alternatives(model: ModelSpec, cluster: Cluster, req: PlanRequest, best: Evaluated, all: Evaluated[], notes: string[]): Alternative[] {
  const out: Alternative[] = [];
  const seen = new Set<string>([`${best.strategy}:${best.nodes.length}`]);
  for (const e of all.slice(1)) {
    const key = `${e.strategy}:${e.nodes.length}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ strategy: e.strategy, nodes: e.nodes, stages: stagesOf(e), predicted: rounded(e.prediction), rejected: reason(model, e, best) });
    if (out.length >= MAX_ALTERNATIVES) break;
  }
  if (!all.some((e) => e.strategy === 'single')) {
    const need = model.totalBytes + kvCacheBytes(model, req.contextTokens, reservedSequences(req));
    const largest = [...cluster.nodes].sort((a, b) => b.availableBytes - a.availableBytes || (a.id < b.id ? -1 : 1))[0];
    out.push({
      strategy: 'single',
      nodes: [largest.id],
      stages: [],
      predicted: null,
      rejected: `does not fit on one node: needs ${gb(withHeadroom(need) + need)} with KV cache for ${req.contextTokens} tokens; the largest node (${largest.id}) has ${gb(largest.availableBytes)} available`,
    });
  }
  for (const note of notes) out.push({ strategy: 'tensor', nodes: [], stages: [], predicted: null, rejected: note });
  return out;
}

function reason(model: ModelSpec, alt: Evaluated, best: Evaluated): string {
  const a = alt.prediction;
  const b = best.prediction;
  const vs = `${a.decodeTokensPerSecond.toFixed(1)} tok/s vs ${b.decodeTokensPerSecond.toFixed(1)} tok/s for the chosen ${best.strategy}`;
  if (Math.abs(a.decodeTokensPerSecond - b.decodeTokensPerSecond) <= 1e-3 * b.decodeTokensPerSecond) {
    return `as fast (${vs}) but uses ${alt.nodes.length} nodes where ${best.nodes.length} suffice`;
  }
  const step = a.breakdown.computeMs + a.breakdown.allReduceMs + a.breakdown.hopsMs + a.breakdown.headMs;
  if (a.breakdown.allReduceMs > 0.3 * step) {
    const tcp = alt.prediction.stages.some((s) => s.transport === 'tcp');
    return `slower (${vs}): all-reduces over ${tcp ? 'TCP' : 'RDMA'} take ${a.breakdown.allReduceMs.toFixed(1)} ms of each ${step.toFixed(1)} ms token (2 per layer), more than splitting the weights saves`;
  }
  if (alt.strategy === 'pipeline' || alt.strategy === 'hybrid') {
    return `slower (${vs}): pipeline stages run one after another for each token, so more stages add memory, not speed${a.breakdown.hopsMs > 0.05 ? `; hops add ${a.breakdown.hopsMs.toFixed(2)} ms per token` : ''}`;
  }
  if (alt.strategy === 'single') {
    return `slower (${vs}): one node streams all ${gb(model.activeBytesPerToken)} of active weights per token`;
  }
  if (alt.nodes.length < best.nodes.length) {
    return `slower (${vs}): ${alt.nodes.length} nodes each read a larger share of the weights (${a.breakdown.computeMs.toFixed(1)} ms of layers per token vs ${b.breakdown.computeMs.toFixed(1)} ms)`;
  }
  return `slower (${vs}): its slowest member sets the pace (${a.breakdown.computeMs.toFixed(1)} ms of layers per token vs ${b.breakdown.computeMs.toFixed(1)} ms)`;
}

function explain(model: ModelSpec, best: Evaluated): string[] {
  const p = best.prediction;
  const lines = [
    `${model.name}: ${model.numLayers} layers, ${gb(model.totalBytes)} of weights (${model.format}), ${gb(model.activeBytesPerToken)} read per token.`,
  ];
  const n = best.nodes.length;
  switch (best.strategy) {
    case 'single':
      lines.push(`Fits on ${best.nodes[0]}, and no split over the available links beats one node.`);
      break;
    case 'tensor':
      lines.push(`Tensor parallel over ${n} nodes: each reads only its share of every layer, paying 2 all-reduces per layer (${p.breakdown.allReduceMs.toFixed(2)} ms per token over ${p.stages[0].transport.toUpperCase()}).`);
      break;
    case 'pipeline':
      lines.push(`Pipeline over ${n} nodes because the model needs their memory; faster nodes hold more layers. Hops cost ${p.breakdown.hopsMs.toFixed(2)} ms per token.`);
      break;
    case 'hybrid':
      lines.push(`Hybrid: tensor parallel inside ${best.layout.stages.filter((s) => s.nodes.length > 1).length} RDMA group(s), pipeline across ${best.layout.stages.length} stages.`);
      break;
  }
  lines.push(
    `Per token: ${p.breakdown.computeMs.toFixed(1)} ms in layers, ${p.breakdown.allReduceMs.toFixed(1)} ms all-reduce, ${p.breakdown.hopsMs.toFixed(2)} ms hops, ${p.breakdown.headMs.toFixed(1)} ms output head and sampling.`,
  );
  if (best.load) {
    const peers = Object.values(best.load.perNode).reduce((n, x) => n + x.fromPeersBytes, 0);
    const from = [peers > 0 ? `${gb(peers)} from nodes that hold the model` : '', best.load.hubBytes > 0 ? `${gb(best.load.hubBytes)} from the hub` : ''].filter(Boolean).join(', ');
    lines.push(`Loading: about ${best.load.seconds.toFixed(1)} s (${from || 'every byte already where it runs'}).`);
  }
  return lines;
}

/** Builds the "does not fit" error with the numbers and what would help. */
function infeasible(model: ModelSpec, cluster: Cluster, req: PlanRequest): InfeasibleError {
  const kv = kvCacheBytes(model, req.contextTokens, reservedSequences(req));
  const used = model.totalBytes + kv;
  // The least any placement needs: everything once, one workspace, headroom on that.
  const ws = workspaceBytes(model, { share: 1, kvShare: 1, heads: model.numHeads }, req, true);
  const needed = used + ws + withHeadroom(used + ws);
  const available = cluster.nodes.reduce((a, n) => a + n.availableBytes, 0);
  const suggestions: string[] = [];
  if (needed > available) {
    const missing = needed - available;
    const largest = Math.max(...cluster.nodes.map((n) => n.availableBytes));
    suggestions.push(`more nodes: at least ${gb(missing)} more available memory (${Math.ceil(missing / largest)} more node(s) like the largest one)`);
    const room = usableBytes(available, ws) - kv;
    const bits = [8, 6, 5, 4, 3, 2].find((b) => model.totalParams * ((b + 0.5) / 8) < room);
    if (bits !== undefined && model.totalParams > 0 && (bits + 0.5) * model.totalParams < model.totalBytes * 8) {
      suggestions.push(`fewer bits: --bits ${bits} brings the weights to about ${gb((model.totalParams * (bits + 0.5)) / 8)}`);
    }
    if (kv > missing * 1.1) {
      // 10% margin for headroom and per-node rounding; whole KiB of tokens when that large.
      const perToken = kv / req.contextTokens;
      const raw = Math.floor((kv - missing * 1.1) / perToken);
      const context = raw >= 2048 ? raw - (raw % 1024) : raw;
      if (context >= 1) suggestions.push(`shorter context: --context ${context} frees ${gb(kv - context * perToken)} of KV cache`);
    }
    return new InfeasibleError(
      `${model.name} does not fit: needs ${gb(needed)} (weights ${gb(model.totalBytes)}, KV cache ${gb(kv)} for ${req.contextTokens} tokens x ${reservedSequences(req)}, plus workspace and headroom), the cluster has ${gb(available)} available. Would fit with: ${suggestions.join('; ') || 'a larger cluster'}.`,
      needed,
      available,
      suggestions,
    );
  }
  suggestions.push('link the nodes so a pipeline can chain through them (every consecutive pair needs a link)');
  suggestions.push('fewer bits or a shorter context, so fewer nodes are needed');
  return new InfeasibleError(
    `${model.name} does not fit any placement: it needs ${gb(needed)} and the cluster has ${gb(available)} in total, but no chain of linked nodes holds it within each node's memory. Would fit with: ${suggestions.join('; ')}.`,
    needed,
    available,
    suggestions,
  );
}

/** Bytes in the explanation's words: GB with one decimal, MB below 0.1 GB (a small model is not "0.0 GB"). */
export function gb(bytes: number): string {
  return bytes < 1e8 ? `${(bytes / 1e6).toFixed(1)} MB` : `${(bytes / 1e9).toFixed(1)} GB`;
}
