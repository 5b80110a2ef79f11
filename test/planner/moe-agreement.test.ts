/**
 * Issue 16: the planner and the engine agree on mixture-of-experts and latent-attention models (the
 * two packages do not import each other; this test holds them to the same numbers):
 * - per node, the plan's weight bytes equal the bytes the engine's shard reads from disk (±5%), for
 *   single, pipeline (3 uneven stages), tensor/expert 2 and 4, and pipeline 2 × tensor 2 layouts;
 * - per node, the plan's KV-cache bytes are the engine's own formula (kvCacheValuesPerToken f32 values
 *   per token per layer: K/V of the node's KV heads, or MLA's latent on every rank);
 * - the plan's active bytes per token equal what a decode step reads (±5%): every matrix a decode
 *   step multiplies by (the chosen experts only) plus the 1-D tensors (norms, biases).
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createReferenceBackend, kvCacheValuesPerToken, loadShard, type Backend, type Weight } from '@orchard/engine';
import { writeRandomModel, type RandomModelOptions } from '@orchard/engine/testing';
import { layoutMemory, resolveRequest, type Cluster, type Layout } from '@orchard/partitioner';
import { loadModel } from '@orchard/partitioner/loader';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';

const work = mkdtempSync(join(tmpdir(), 'orchard-moe-plan-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const LAYERS = 4;
const VARIANTS: Record<string, RandomModelOptions> = {
  'qwen3-moe (a dense layer)': { variant: 'qwen3-moe' },
  mixtral: { variant: 'mixtral' },
  'deepseek-v3 (MLA, shared expert, dense layer 0)': { variant: 'deepseek-v3' },
  'deepseek-v3 plain q_proj, bf16': { variant: 'deepseek-v3', qLoraRank: null, dtype: 'bf16' },
  'gpt-oss (merged experts, sinks)': { variant: 'gpt-oss' },
  'llama (dense, for reference)': { variant: 'llama' },
};

/** Layouts as [layers per stage], tensor ranks per stage. */
const LAYOUTS: Record<string, { stages: number[]; tensor: number }> = {
  single: { stages: [4], tensor: 1 },
  'pipeline 3 uneven (2,1,1)': { stages: [2, 1, 1], tensor: 1 },
  'tensor 2': { stages: [4], tensor: 2 },
  'tensor 4': { stages: [4], tensor: 4 },
  'pipeline 2 × tensor 2': { stages: [2, 2], tensor: 2 },
};

const CONTEXT = 256;
const cluster = (n: number): Cluster => ({
  nodes: Array.from({ length: n }, (_, i) => ({ id: `n${i}`, chip: 'Apple M4 Max', memoryBytes: 64 * 2 ** 30, availableBytes: 48 * 2 ** 30 })),
  links: [],
});

/** A reference backend remembering every matrix a kernel multiplies by. */
function recording(): { backend: Backend; used: Set<Weight> } {
  const inner = createReferenceBackend();
  const used = new Set<Weight>();
  return {
    used,
    backend: {
      ...inner,
      matvec: (out, w, x) => (used.add(w), inner.matmul(out, w, x, 1)),
      matmul: (out, w, x, n) => (used.add(w), inner.matmul(out, w, x, n)),
    },
  };
}

describe.each(Object.entries(VARIANTS))('%s: plan and engine', (name, options) => {
  const dir = join(work, name.replace(/[^a-z0-9]+/gi, '-'));
  writeRandomModel(dir, { seed: 3, numLayers: LAYERS, ...options });

  it.each(Object.entries(LAYOUTS))('%s: per-node weight bytes (±5%) and KV-cache bytes (exact)', async (_l, { stages, tensor }) => {
    const model = await loadModel(dir);
    let start = 0;
    const layout: Layout = {
      stages: stages.map((count, s) => {
        const layers: [number, number] = [start, start + count];
        start += count;
        return { nodes: Array.from({ length: tensor }, (_, r) => `n${s * tensor + r}`), heads: new Array(tensor).fill(model.numHeads / tensor), layers };
      }),
    };
    const memory = layoutMemory(model, cluster(stages.length * tensor), layout, resolveRequest({ contextTokens: CONTEXT, promptTokens: 16 }));
    layout.stages.forEach((stage, s) => {
      stage.nodes.forEach((id, rank) => {
        const spec = { layers: stage.layers, tensor: { rank, size: tensor }, embed: s === 0, head: s === stages.length - 1 };
        const shard = loadShard(dir, spec, { allReduce: async () => {} });
        const planned = memory[id];
        const ratio = planned.weightsBytes / shard.bytesRead;
        expect(ratio, `${id}: plan ${planned.weightsBytes} B, engine read ${shard.bytesRead} B`).toBeGreaterThan(0.95);
        expect(ratio, `${id}: plan ${planned.weightsBytes} B, engine read ${shard.bytesRead} B`).toBeLessThan(1.05);
        const engineKv = (stage.layers[1] - stage.layers[0]) * kvCacheValuesPerToken(shard.config, shard.slice) * 4 * CONTEXT;
        expect(planned.kvCacheBytes, `${id}: KV cache`).toBe(engineKv);
      });
    });
  });

  it('active bytes per token: the plan equals what a decode step reads (±5%)', async () => {
    const model = await loadModel(dir);
    const rec = recording();
    const shard = loadShard(dir, { layers: [0, LAYERS], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend: rec.backend });
    const cache = shard.newCache(32);
    await shard.forward({ tokens: [5, 6, 7, 8] }, cache);
    rec.used.clear();
    await shard.forward({ tokens: [9] }, cache);
    const matrices = [...rec.used].reduce((s, w) => s + w.bytes.byteLength, 0);
    // 1-D tensors (norms, biases, sinks, routers' biases) are read whole every step; the embedding gives one row.
    const vectors = shard.weights.layers.reduce((s, L) => s + vectorBytes(L), 0) + shard.weights.finalNorm!.byteLength;
    const dtypeBytes = options.dtype === 'bf16' ? 2 : 4;
    const read = matrices + vectors * (dtypeBytes / 4) + shard.config.hiddenSize * dtypeBytes;
    const ratio = model.activeBytesPerToken / read;
    expect(ratio, `plan ${model.activeBytesPerToken} B, decode read ${read} B`).toBeGreaterThan(0.95);
    expect(ratio, `plan ${model.activeBytesPerToken} B, decode read ${read} B`).toBeLessThan(1.05);
  });
});

/** Bytes (as f32) of a layer's 1-D tensors: what the engine widens and reads every step besides matrices. */
function vectorBytes(L: ReturnType<typeof loadShard>['weights']['layers'][number]): number {
  const vs: (Float32Array | null)[] = [L.inputNorm, L.postNorm];
  const a = L.attention;
  if (a.kind === 'gqa') vs.push(a.qBias, a.kBias, a.vBias, a.oBias, a.qNorm, a.kNorm, a.sinks);
  else vs.push(a.qANorm, a.kvANorm);
  const m = L.mlp;
  if (m.kind === 'moe') vs.push(m.routerBias, m.correctionBias);
  return vs.reduce((s, v) => s + (v ? v.byteLength : 0), 0);
}
