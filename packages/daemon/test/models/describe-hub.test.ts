/**
 * `orchard plan --model ORG/NAME`: a hub repo described from config.json, the index and the
 * safetensors headers alone (models/describe-hub.ts, against the stand-in hub) is described exactly
 * as the same files on disk, and the CLI plans from it with HF_ENDPOINT honoured.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hfToGguf } from '@orchard/engine/gguf';
import { writeAwqModel, writeRandomModel } from '@orchard/engine/testing';
import { makePlan } from '../../src/cli/commands/plan.js';
import { describeModel } from '../../src/models/describe.js';
import { describeHubModel } from '../../src/models/describe-hub.js';
import { HubClient } from '../../src/store/index.js';
import { startFakeHub, type FakeHub } from '../../../../test/harness/fake-hub.js';

const root = resolve(import.meta.dirname, '../../../..');
let work: string;
let hub: FakeHub;
const repos: Record<string, string> = {};

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'orchard-hub-describe-test-'));
  repos['test/moe'] = writeRandomModel(join(work, 'moe'), { variant: 'deepseek-v3', numLayers: 4, shards: 3, seed: 2 }).dir;
  repos['test/llama'] = writeRandomModel(join(work, 'llama'), { variant: 'llama', numLayers: 3, seed: 2 }).dir;
  writeAwqModel(repos['test/llama'], (repos['test/awq'] = join(work, 'awq')));
  // A GGUF-only repo (no config.json) with two quantisations of a Qwen3 MoE, as llama.cpp lays them out.
  const hf = writeRandomModel(join(work, 'moe-hf'), { variant: 'qwen3-moe', mlpOnlyLayers: [], numLayers: 8, hiddenSize: 128, seed: 4 }).dir;
  mkdirSync((repos['test/moe-GGUF'] = join(work, 'moe-gguf')));
  hfToGguf(hf, join(repos['test/moe-GGUF'], 'moe-F32.gguf'), { dtype: 'f32' });
  hfToGguf(hf, join(repos['test/moe-GGUF'], 'moe-Q8_0.gguf'), { dtype: 'q8_0' });
  hub = await startFakeHub(repos);
});
afterAll(async () => {
  await hub?.close();
  rmSync(work, { recursive: true, force: true });
});

const servedOf = (repo: string) => [...hub.servedByRepo].filter(([k]) => k.startsWith(`${repo}/`));

describe('a model described from the hub before any download', () => {
  it.each(['test/moe', 'test/llama', 'test/awq'])('%s: the same description as its files on disk, from the small files and headers only', async (repo) => {
    const fromHub = await describeHubModel(repo, { hub: new HubClient({ endpoint: hub.url }) });
    // The reason names the config.json it read: the hub's copy sits in a temporary directory.
    const placeless = (d: { unsupported?: string }) => ({ ...d, unsupported: d.unsupported?.replace(/ in \/\S+config\.json/, '') });
    expect(placeless(fromHub)).toEqual(placeless(await describeModel(repos[repo], { name: repo })));
    if (repo === 'test/awq') expect(fromHub.unsupported).toMatch(/quant_method "awq" is not supported/);
    for (const [key, bytes] of servedOf(repo)) {
      const file = key.slice(repo.length + 1);
      if (file.endsWith('.safetensors')) expect(bytes, file).toBeLessThan(statSync(join(repos[repo], file)).size / 4);
      else expect(['config.json', 'generation_config.json', 'model.safetensors.index.json']).toContain(file);
    }
  });

  it('orchard plan --model ORG/NAME plans from the hub (HF_ENDPOINT) as from the directory', async () => {
    const cli = (model: string) =>
      promisify(execFile)(join(root, 'node_modules/.bin/tsx'), [join(root, 'packages/daemon/src/cli/main.ts'), 'plan', '--model', model, '--cluster', join(root, 'examples/clusters/2x-m4-max-tb5-rdma.json'), '--json'], {
        cwd: root,
        timeout: 60_000,
        env: { ...process.env, HF_ENDPOINT: hub.url },
      });
    const fromHub = JSON.parse((await cli('test/moe')).stdout);
    const local = await makePlan({ model: repos['test/moe'], cluster: join(root, 'examples/clusters/2x-m4-max-tb5-rdma.json') });
    expect(fromHub.strategy).toBeDefined();
    expect(JSON.stringify(fromHub).replaceAll('test/moe', 'moe')).toBe(JSON.stringify(local));
  }, 90_000);

  it('a GGUF-only repo: described from the chosen file\'s header, fetched by range (no tensor bytes), as the file on disk', async () => {
    const repo = 'test/moe-GGUF';
    const file = join(repos[repo], 'moe-Q8_0.gguf');
    const fromHub = await describeHubModel(repo, { hub: new HubClient({ endpoint: hub.url }), quant: 'Q8_0' });
    expect(fromHub).toEqual(await describeModel(file, { name: repo }));
    expect(fromHub.spec.moe?.experts).toBeGreaterThan(1);
    const served = Object.fromEntries(servedOf(repo).map(([k, v]) => [k.slice(repo.length + 1), v]));
    // Only the named file's first range (its header, inside the first 256 KiB) left the hub.
    expect(Object.keys(served)).toEqual(['moe-Q8_0.gguf']);
    expect(statSync(file).size).toBeGreaterThan(4 * 256 * 1024);
    expect(served['moe-Q8_0.gguf']).toBeLessThanOrEqual(256 * 1024);
    // Without a quantisation, the file `orchard pull` picks for the memory (the larger loadable one that fits).
    expect((await describeHubModel(repo, { hub: new HubClient({ endpoint: hub.url }), budgetBytes: 1e12 })).spec.totalBytes).toBe((await describeModel(join(repos[repo], 'moe-F32.gguf'))).spec.totalBytes);
    await expect(describeHubModel(repo, { hub: new HubClient({ endpoint: hub.url }), quant: 'Q4_K_M' })).rejects.toThrow(/test\/moe-GGUF: no GGUF file for :Q4_K_M \(the repo has /);
  });

  it('orchard plan --model ORG/NAME-GGUF:QUANT plans from the hub as from the .gguf on disk', async () => {
    const cluster = join(root, 'examples/clusters/2x-m4-max-tb5-rdma.json');
    const { stdout } = await promisify(execFile)(join(root, 'node_modules/.bin/tsx'), [join(root, 'packages/daemon/src/cli/main.ts'), 'plan', '--model', 'test/moe-GGUF:Q8_0', '--cluster', cluster, '--json'], {
      cwd: root,
      timeout: 60_000,
      env: { ...process.env, HF_ENDPOINT: hub.url },
    });
    const local = await makePlan({ model: join(repos['test/moe-GGUF'], 'moe-Q8_0.gguf'), cluster });
    expect(JSON.stringify(JSON.parse(stdout)).replaceAll('test/moe-GGUF', 'moe-Q8_0.gguf')).toBe(JSON.stringify(local));
  }, 90_000);
});
