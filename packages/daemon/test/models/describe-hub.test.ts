/**
 * `orchard plan --model ORG/NAME`: a hub repo described from config.json, the index and the
 * safetensors headers alone (models/describe-hub.ts, against the stand-in hub) is described exactly
 * as the same files on disk, and the CLI plans from it with HF_ENDPOINT honoured.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
});
