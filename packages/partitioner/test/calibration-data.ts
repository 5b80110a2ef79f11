import type { Cluster } from '../src/cluster.js';
import { type EfficiencyFactors, type ChipClass, FACTORS, predict } from '../src/cost-model.js';
import type { Layout } from '../src/layout.js';
import { type ModelSpec, modelFromConfig } from '../src/model.js';
import { resolveRequest } from '../src/request.js';
import { splitHeads } from '../src/layout.js';

/**
 * The published 4x M3 Ultra decode table (shared/notes/published-measurements.md) and the layouts
 * that produced it, shared by the calibration test and bench/calibration.ts.
 */
export const PUBLISHED = {
  // exo: tensor parallel over RDMA; llama.cpp: layer split (RPC) over TCP.
  qwen3: { fixture: 'qwen3-235b-a22b', bits: 4 as number | undefined, exo: [19.5, 26.2, 31.9], llamaCpp: [20.4, 17.2, 15.2] },
  deepseek: { fixture: 'deepseek-v3.1', bits: 4 as number | undefined, exo: [21.1, 27.8, 32.5], llamaCpp: [14.8, 16.0, 14.6] },
  // Kimi K2 Thinking ships int4 experts (compressed-tensors) with bf16 attention: its own config says so.
  kimi: { fixture: 'kimi-k2-thinking', bits: undefined as number | undefined, exo: [NaN, 21.6, 28.3], llamaCpp: [NaN, 18.5, 16.4] },
} as const;

export const NODE_COUNTS = [1, 2, 4] as const;

export interface CalibrationRow {
  model: string;
  nodes: number;
  layout: 'tensor/rdma' | 'pipeline/tcp' | 'tensor/tcp';
  predicted: number;
  published?: number;
}

export type ReadJson = (repoPath: string) => unknown;

export function loadModel(read: ReadJson, fixture: string, bits?: number): ModelSpec {
  return modelFromConfig(read(`packages/partitioner/test/fixtures/${fixture}.json`), { bits });
}

/** Tensor parallel over the first k nodes (the 512 GB ones first, as the published runs did). */
export function tensorLayout(model: ModelSpec, cluster: Cluster, k: number): Layout {
  const nodes = cluster.nodes.slice(0, k).map((n) => n.id);
  return { stages: [{ nodes, heads: splitHeads(model.numHeads, nodes.map(() => 1)), layers: [0, model.numLayers] }] };
}

/** Layers split evenly over the first k nodes (what llama.cpp's RPC does for equal nodes). */
export function pipelineLayout(model: ModelSpec, cluster: Cluster, k: number): Layout {
  const L = model.numLayers;
  const stages = cluster.nodes.slice(0, k).map((n, i) => ({
    nodes: [n.id],
    heads: [model.numHeads],
    layers: [Math.round((i * L) / k), Math.round(((i + 1) * L) / k)] as [number, number],
  }));
  return { stages };
}

export function calibrationRows(read: ReadJson, factors: Record<ChipClass, EfficiencyFactors> = FACTORS): CalibrationRow[] {
  const rdma = read('examples/clusters/4x-m3-ultra-tb5-rdma.json') as Cluster;
  const tcp = read('examples/clusters/4x-m3-ultra-tb5-tcp.json') as Cluster;
  const req = resolveRequest({ promptTokens: 128 });
  const rows: CalibrationRow[] = [];
  for (const [name, p] of Object.entries(PUBLISHED)) {
    const model = loadModel(read, p.fixture, p.bits);
    NODE_COUNTS.forEach((k, i) => {
      const exo = p.exo[i];
      if (!Number.isNaN(exo)) {
        rows.push({ model: name, nodes: k, layout: 'tensor/rdma', published: exo, predicted: predict(model, rdma, tensorLayout(model, rdma, k), req, undefined, factors).decodeTokensPerSecond });
      }
      if (k > 1) {
        rows.push({ model: name, nodes: k, layout: 'pipeline/tcp', published: p.llamaCpp[i], predicted: predict(model, tcp, pipelineLayout(model, tcp, k), req, undefined, factors).decodeTokensPerSecond });
        rows.push({ model: name, nodes: k, layout: 'tensor/tcp', predicted: predict(model, tcp, tensorLayout(model, tcp, k), req, undefined, factors).decodeTokensPerSecond });
      }
    });
  }
  return rows;
}
