import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Cluster, ClusterLink, ClusterNode, LinkKind } from '../src/cluster.js';
import { type ModelSpec, modelFromConfig } from '../src/model.js';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const readRepoJson = (p: string): unknown => JSON.parse(readFileSync(`${ROOT}${p}`, 'utf8'));
export const fixture = (name: string): Record<string, unknown> => readRepoJson(`packages/partitioner/test/fixtures/${name}.json`) as Record<string, unknown>;
export const model = (name: string, bits?: number): ModelSpec => modelFromConfig(fixture(name), { bits, name });
export const exampleCluster = (name: string): Cluster => readRepoJson(`examples/clusters/${name}.json`) as Cluster;

export const GB = 1e9;
export const GiB = 1024 ** 3;

export function node(id: string, availableGB: number, bandwidthGBps: number, extra: Partial<ClusterNode> = {}): ClusterNode {
  return { id, chip: 'Apple M4 Max', memoryBytes: availableGB * GB * 1.2, availableBytes: availableGB * GB, memoryBandwidthGBps: bandwidthGBps, tflops: 20, ...extra };
}

export function mesh(ids: string[], kind: LinkKind, latencyUs: number, bandwidthGbps: number): ClusterLink[] {
  const out: ClusterLink[] = [];
  for (let i = 0; i < ids.length; i++) for (let j = i + 1; j < ids.length; j++) out.push({ a: ids[i], b: ids[j], kind, latencyUs, bandwidthGbps });
  return out;
}

/** A small dense config with round numbers, for hand-checkable cases. */
export function denseConfig(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    architectures: ['LlamaForCausalLM'],
    hidden_size: 4096,
    intermediate_size: 16384,
    num_hidden_layers: 32,
    num_attention_heads: 32,
    num_key_value_heads: 8,
    vocab_size: 32000,
    tie_word_embeddings: false,
    torch_dtype: 'bfloat16',
    ...over,
  };
}
