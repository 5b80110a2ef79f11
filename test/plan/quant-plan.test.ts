/**
 * The planner and the engine agree on what quantized weights cost in memory (issue 17):
 * - MLX affine: the partitioner's bits per weight (mlxBitsPerWeight, used by formatFromConfig for
 *   config-only plans) times the parameters equals the engine's packed row layout for every bit width,
 *   group size and scale dtype (the two packages do not import each other; this is their agreement);
 * - `orchard plan --model` on an MLX 4-bit directory and on a Q4_K_M GGUF predicts, per node, the
 *   weight bytes the engine then holds for that node's shard within ±5% — whole model (the CLI's JSON)
 *   and the planner's memory for pipeline-2 and tensor-2 layouts against the loaded shards.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { createReferenceBackend, loadShard, type ShardSpec, type Weight } from '@orchard/engine';
import { hfToGguf } from '@orchard/engine/gguf';
import { writeMlxModel, writeRandomModel } from '@orchard/engine/testing';
import { formatFromConfig, layoutMemory, mlxBitsPerWeight, parseCluster, type Layout } from '@orchard/partitioner';
import { mlxDType, weightBytes } from '../../packages/engine/src/kernels/wasm/formats.js';
import { layerMatrices } from '../../packages/engine/src/model/weights.js';
import { describeModel } from '../../packages/daemon/src/models/describe.js';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const work = mkdtempSync(join(tmpdir(), 'orchard-qplan-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('MLX bits per weight: partitioner and engine agree', () => {
  it('mlxBitsPerWeight × parameters = the engine packed row layout, every bits / group / scale dtype', () => {
    for (const bits of [2, 3, 4, 6, 8] as const) {
      for (const groupSize of [32, 64, 128] as const) {
        for (const [scales, torch] of [['f16', 'float16'], ['bf16', 'bfloat16'], ['f32', 'float32']] as const) {
          const rows = 24;
          const cols = 384;
          const engine = weightBytes(mlxDType({ bits, groupSize, scales }), rows, cols);
          expect((rows * cols * mlxBitsPerWeight(bits, groupSize, scales === 'f32' ? 32 : 16)) / 8, `${bits}-bit g${groupSize} ${scales}`).toBe(engine);
          const format = formatFromConfig({ torch_dtype: torch, quantization: { bits, group_size: groupSize } });
          expect((rows * cols * format.bitsFor('model.layers.0.self_attn.q_proj', 'attention')) / 8).toBe(engine);
        }
      }
    }
    // per-module entries as mlx-lm writes them
    const mixed = formatFromConfig({ torch_dtype: 'bfloat16', quantization: { bits: 4, group_size: 64, 'model.layers.0.self_attn.q_proj': { bits: 8, group_size: 32 } } });
    expect(mixed.bitsFor('model.layers.0.self_attn.q_proj', 'attention')).toBe(mlxBitsPerWeight(8, 32, 16));
    expect(mixed.bitsFor('model.layers.1.self_attn.q_proj', 'attention')).toBe(mlxBitsPerWeight(4, 64, 16));
  });
});

/** Every byte of a shard's weights as the engine holds them (matrices packed, vectors widened to f32). */
function shardBytes(path: string, spec: ShardSpec): number {
  const s = loadShard(path, spec, { backend: createReferenceBackend(), allReduce: async () => {} });
  const w = s.weights;
  const mats = new Set<Weight>([...w.layers.flatMap(layerMatrices), ...(w.embed ? [w.embed] : []), ...(w.head ? [w.head] : [])]);
  let bytes = [...mats].reduce((a, m) => a + m.bytes.byteLength, 0);
  // a tied head on the embedding's rank is a view of the table, not a second copy
  if (w.head && w.embed && w.head !== w.embed && w.head.bytes.buffer === w.embed.bytes.buffer && w.head.bytes.byteOffset === w.embed.bytes.byteOffset) bytes -= w.head.bytes.byteLength;
  const vecs = [...w.layers.flatMap((l) => [l.inputNorm, l.postNorm, ...(l.attention.kind === 'gqa' ? [l.attention.qBias, l.attention.kBias, l.attention.vBias, l.attention.qNorm, l.attention.kNorm, l.attention.oBias, l.attention.sinks] : [])]), w.finalNorm];
  for (const v of vecs) if (v) bytes += v.byteLength;
  s.dispose();
  return bytes;
}

const cluster = {
  nodes: ['a', 'b'].map((id) => ({ id, chip: 'Apple M4 Max', memoryBytes: 137438953472, availableBytes: 120259084288, memoryBandwidthGBps: 546, tflops: 18.4 })),
  links: [{ a: 'a', b: 'b', kind: 'thunderbolt', latencyUs: 250, bandwidthGbps: 55 }],
};
const request = { contextTokens: 1024, promptTokens: 128, sequences: 1 };

describe('orchard plan predicts the weight memory the engine takes (±5%)', () => {
  const hf = join(work, 'hf');
  writeRandomModel(hf, { variant: 'llama', hiddenSize: 512, intermediateSize: 1536, numLayers: 4, numHeads: 8, numKvHeads: 4, extraVocab: 2048 - 259, dtype: 'bf16', seed: 2 });
  const mlx = join(work, 'mlx-4bit');
  writeMlxModel(hf, mlx, { bits: 4, groupSize: 64 });
  const gguf = join(work, 'model-q4_k_m.gguf');
  hfToGguf(hf, gguf, { dtype: 'q4_k_m' });
  const clusterFile = join(work, 'cluster.json');
  writeFileSync(clusterFile, JSON.stringify({ ...cluster, nodes: cluster.nodes.slice(0, 1), links: [] }));

  for (const [label, path] of [['MLX 4-bit g64', mlx], ['GGUF Q4_K_M', gguf]] as const) {
    it(`${label}: the CLI's single-node plan, and pipeline-2 / tensor-2 layouts`, async () => {
      const { stdout } = await run(join(root, 'node_modules/.bin/tsx'), [join(root, 'packages/daemon/src/cli/main.ts'), 'plan', '--model', path, '--cluster', clusterFile, '--context', '1024', '--json'], { cwd: root, timeout: 60_000 });
      const plan = JSON.parse(stdout) as { strategy: string; memory: Record<string, { weightsBytes: number }> };
      expect(plan.strategy).toBe('single');
      const whole = shardBytes(path, { layers: [0, 4], tensor: { rank: 0, size: 1 }, embed: true, head: true });
      console.log(`${label} single: predicted ${plan.memory.a.weightsBytes} B, engine ${whole} B (${(plan.memory.a.weightsBytes / whole).toFixed(4)}x)`);
      expect(Math.abs(plan.memory.a.weightsBytes / whole - 1), `predicted ${plan.memory.a.weightsBytes}, engine ${whole}`).toBeLessThanOrEqual(0.05);
      // the packed bytes, not 16-bit: ~4.5 bits per weight plus f32 norms
      expect(whole).toBeLessThan(0.4 * (4 * (2 * 512 * 512 + 2 * 512 * 256 + 3 * 512 * 1536) + 2 * 2048 * 512) * 2);

      const model = (await describeModel(path)).spec;
      const c = parseCluster(cluster);
      const layouts: Array<[Layout, ShardSpec[]]> = [
        [{ stages: [{ nodes: ['a'], heads: [8], layers: [0, 2] }, { nodes: ['b'], heads: [8], layers: [2, 4] }] }, [
          { layers: [0, 2], tensor: { rank: 0, size: 1 }, embed: true, head: false },
          { layers: [2, 4], tensor: { rank: 0, size: 1 }, embed: false, head: true },
        ]],
        [{ stages: [{ nodes: ['a', 'b'], heads: [4, 4], layers: [0, 4] }] }, [
          { layers: [0, 4], tensor: { rank: 0, size: 2 }, embed: true, head: true },
          { layers: [0, 4], tensor: { rank: 1, size: 2 }, embed: true, head: true },
        ]],
      ];
      for (const [layout, specs] of layouts) {
        const mem = layoutMemory(model, c, layout, request);
        specs.forEach((spec, i) => {
          const id = ['a', 'b'][i];
          const engine = shardBytes(path, spec);
          console.log(`${label} ${layout.stages.length > 1 ? 'pipeline-2' : 'tensor-2'} node ${id}: predicted ${Math.round(mem[id].weightsBytes)} B, engine ${engine} B (${(mem[id].weightsBytes / engine).toFixed(4)}x)`);
          expect(Math.abs(mem[id].weightsBytes / engine - 1), `${JSON.stringify(layout.stages.map((s) => s.layers))} node ${id}: predicted ${mem[id].weightsBytes}, engine ${engine}`).toBeLessThanOrEqual(0.05);
        });
      }
    }, 120_000);
  }
});
