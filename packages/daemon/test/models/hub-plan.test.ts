/**
 * The pod's plan for a hub model before its pull (models/hub-plan.ts, the dashboard's Download form),
 * against the stand-in hub: a GGUF MoE repo fits a 2-Mac cluster with each node's share of its bytes;
 * a config far larger than the pod does not fit, with the planner's reason; AWQ weights are not
 * loadable, with the engine's reason. Only small files and headers leave the hub.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hfToGguf } from '@orchard/engine/gguf';
import { writeAwqModel, writeRandomModel } from '@orchard/engine/testing';
import { parseCluster } from '@orchard/partitioner';
import { describeModel } from '../../src/models/describe.js';
import { planHubModel } from '../../src/models/hub-plan.js';
import { HubClient } from '../../src/store/index.js';
import { startFakeHub, type FakeHub } from '../../../../test/harness/fake-hub.js';

const root = resolve(import.meta.dirname, '../../../..');
const cluster = parseCluster(JSON.parse(readFileSync(join(root, 'examples/clusters/2x-m4-max-tb5-rdma.json'), 'utf8')));
let work: string;
let hub: FakeHub;
const repos: Record<string, string> = {};

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'orchard-hub-plan-test-'));
  const hf = writeRandomModel(join(work, 'hf'), { variant: 'qwen3-moe', mlpOnlyLayers: [], numLayers: 8, hiddenSize: 128, seed: 5 }).dir;
  mkdirSync((repos['t/moe-GGUF'] = join(work, 'gguf')));
  hfToGguf(hf, join(repos['t/moe-GGUF'], 'moe-Q8_0.gguf'), { dtype: 'q8_0' });
  mkdirSync((repos['t/huge'] = join(work, 'huge')));
  const config = JSON.parse(readFileSync(join(hf, 'config.json'), 'utf8'));
  writeFileSync(join(repos['t/huge'], 'config.json'), JSON.stringify({ ...config, architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: 32768, intermediate_size: 106496, num_hidden_layers: 200, num_attention_heads: 256, num_key_value_heads: 8, vocab_size: 128256, torch_dtype: 'bfloat16' }));
  const llama = writeRandomModel(join(work, 'llama'), { numLayers: 2, seed: 5 }).dir;
  writeAwqModel(llama, (repos['t/awq'] = join(work, 'awq')));
  hub = await startFakeHub(repos);
});
afterAll(async () => {
  await hub?.close();
  rmSync(work, { recursive: true, force: true });
});

describe("a hub model's plan on the pod before its pull", () => {
  it('a GGUF MoE repo fits, each node holding part of its bytes, from its header alone', async () => {
    const p = await planHubModel('t/moe-GGUF:Q8_0', { hub: new HubClient({ endpoint: hub.url }), cluster, names: new Map(cluster.nodes.map((n, i) => [n.id, `mac-${i}`])) });
    const file = join(repos['t/moe-GGUF'], 'moe-Q8_0.gguf');
    expect(p).toMatchObject({ repo: 't/moe-GGUF:Q8_0', loadable: true, fits: true, reason: null });
    expect(p.weightsBytes).toBe((await describeModel(file)).spec.totalBytes);
    expect(p.nodes.length).toBeGreaterThan(0);
    for (const n of p.nodes) {
      expect(n.name).toMatch(/^mac-\d$/);
      expect(n.weightsBytes).toBeGreaterThan(0);
      expect(n.totalBytes).toBeGreaterThanOrEqual(n.weightsBytes);
      expect(n.totalBytes).toBeLessThanOrEqual(n.availableBytes);
    }
    expect(p.nodes.reduce((a, n) => a + n.weightsBytes, 0)).toBeGreaterThanOrEqual(p.weightsBytes * 0.99);
    expect(p.decodeTokensPerSecond).toBeGreaterThan(0);
    expect(hub.servedByRepo.get('t/moe-GGUF/moe-Q8_0.gguf')).toBeLessThan(statSync(file).size / 4);
  });

  it('a model larger than the pod does not fit, and says why', async () => {
    const p = await planHubModel('t/huge', { hub: new HubClient({ endpoint: hub.url }), cluster });
    expect(p).toMatchObject({ loadable: true, fits: false, nodes: [], strategy: null });
    expect(p.weightsBytes).toBeGreaterThan(cluster.nodes.reduce((a, n) => a + n.availableBytes, 0));
    expect(p.reason).toMatch(/\S/);
  });

  it('AWQ weights are not loadable, with the engine\'s reason', async () => {
    const p = await planHubModel('t/awq', { hub: new HubClient({ endpoint: hub.url }), cluster });
    expect(p).toMatchObject({ loadable: false, fits: false });
    expect(p.reason).toMatch(/awq/);
    for (const [key, n] of hub.servedByRepo) if (key.startsWith('t/awq/') && key.endsWith('.safetensors')) expect(n).toBeLessThan(statSync(join(repos['t/awq'], key.slice(6))).size / 4);
  });
});
