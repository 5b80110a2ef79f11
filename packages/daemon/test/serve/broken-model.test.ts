/**
 * A model that cannot load, as a person would meet it. Truncated weights, and whole files that do not
 * fit their config (an intermediate_size its tensors do not have), are found by the engine's check of
 * the headers before anything is placed: the request is answered at once naming the file and tensor,
 * and nothing is fetched from the hub meanwhile (a mock hub counts its requests). What only a runner
 * can find (a tokenizer that does not build) is test/daemon/load-failures.test.ts's and
 * runner-load-failure.test.ts's. The same daemon also
 * shows that a stream ends right after `[DONE]` when the client sends `Connection: close`.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomModel } from '@orchard/engine/testing';
import { startFakeHub, type FakeHub } from '../../../../test/harness/fake-hub.js';
import { resolveOptions } from '../../src/config/options.js';
import { startOrchard, type Orchard } from '../../src/orchard.js';
import { waitFor } from './in-process-pod.js';

const TRUNCATED = 'test/truncated-llama';
/** Whole files, but tensors shaped for another config: only a runner's load finds it. */
const BROKEN = 'test/misshapen-llama';
const GOOD = 'test/good-llama';
let node: Orchard;
let hub: FakeHub;
let dataDir: string;
/** Every instance id of the broken model placed while the test ran. */
const placed = new Set<string>();

beforeAll(async () => {
  dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-broken-'));
  for (const repo of [TRUNCATED, BROKEN, GOOD]) {
    const dir = join(dataDir, 'models', ...repo.split('/'));
    mkdirSync(dir, { recursive: true });
    writeRandomModel(dir, { numLayers: 2, hiddenSize: 64, seed: 21, maxPositionEmbeddings: 256 });
  }
  const truncated = join(dataDir, 'models', ...TRUNCATED.split('/'), 'model.safetensors');
  truncateSync(truncated, Math.floor(statSync(truncated).size / 2));
  const config = join(dataDir, 'models', ...BROKEN.split('/'), 'config.json');
  writeFileSync(config, JSON.stringify({ ...JSON.parse(readFileSync(config, 'utf8')), intermediate_size: 96 }));
  // The hub holds the model: a daemon that reached for it would be seen here.
  hub = await startFakeHub({ [BROKEN]: join(dataDir, 'models', ...GOOD.split('/')) });
  const options = resolveOptions({ dataDir, listen: ['/ip4/127.0.0.1/tcp/0'], apiPort: 0, mdns: false, heartbeatMs: 300 } as never, { HF_ENDPOINT: hub.url });
  node = await startOrchard(options, pino({ level: process.env.SERVE_TEST_LOG ?? 'silent' }), { dashboard: false });
  node.daemon.onChange(() => {
    for (const e of Object.values(node.daemon.replica.state.instances)) if (e.model === BROKEN || e.model === TRUNCATED) placed.add(e.id);
  });
  await waitFor('a profile in the state', () => node.daemon.cluster().nodes.length === 1 || undefined, 30_000, 100);
  await waitFor('the model checked and listed', async () => ((await (await fetch(`http://127.0.0.1:${node.apiPort}/v1/models`)).json()) as { data: { id: string }[] }).data.some((m) => m.id === BROKEN) || undefined, 30_000, 100);
}, 60_000);

afterAll(async () => {
  await node?.stop();
  await hub?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const complete = async (model: string) => {
  const res = await fetch(`http://127.0.0.1:${node.apiPort}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, prompt: 'In the beginning', max_tokens: 4, temperature: 0 }) });
  return { status: res.status, body: (await res.json()) as { error?: { message: string; code: string } } };
};

describe('a model that cannot load', () => {
  it('truncated weights are named before anything is placed, and again at once however often asked', async () => {
    for (let i = 0; i < 3; i++) {
      const t0 = Date.now();
      const r = await complete(TRUNCATED);
      expect(r.status, JSON.stringify(r.body)).toBe(503);
      expect(r.body.error!.code).toBe('model_load_failed');
      expect(r.body.error!.message).toMatch(/^test\/truncated-llama cannot be loaded: model\.safetensors: .*truncated/);
      expect(Date.now() - t0).toBeLessThan(2000);
    }
    expect(placed.size).toBe(0);
    expect(hub.requests).toEqual([]);
  });

  it('whole files that disagree with their config are named from the headers, before any placement, until they change', async () => {
    for (let i = 0; i < 3; i++) {
      const t0 = Date.now();
      const r = await complete(BROKEN);
      expect(r.status, JSON.stringify(r.body)).toBe(503);
      expect(r.body.error!.code).toBe('model_load_failed');
      expect(r.body.error!.message).toMatch(/model\.safetensors: tensor model\.layers\.0\.mlp\.gate_proj\.weight has shape \[128,64\], expected \[96,64\] from config\.json/);
      expect(Date.now() - t0).toBeLessThan(2000);
    }
    expect(placed.size).toBe(0);
    expect(hub.requests).toEqual([]);
    // Fixed files are served again without a restart.
    const config = join(dataDir, 'models', ...BROKEN.split('/'), 'config.json');
    writeFileSync(config, JSON.stringify({ ...JSON.parse(readFileSync(config, 'utf8')), intermediate_size: 128 }));
    const fixed = await complete(BROKEN);
    expect(fixed.status, JSON.stringify(fixed.body)).toBe(200);
  }, 120_000);
});

describe('streams end', () => {
  it('with Connection: close the response ends right after [DONE]', async () => {
    expect((await complete(GOOD)).status).toBe(200); // loaded
    const body = JSON.stringify({ model: GOOD, prompt: 'And God said', max_tokens: 8, temperature: 0, stream: true });
    const { doneAt, endAt, text } = await new Promise<{ doneAt: number; endAt: number; text: string }>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: node.apiPort, path: '/v1/completions', method: 'POST', headers: { 'content-type': 'application/json', connection: 'close', 'content-length': Buffer.byteLength(body) } }, (res) => {
        let text = '';
        let doneAt = 0;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
          if (!doneAt && text.includes('data: [DONE]')) doneAt = Date.now();
        });
        res.socket.on('close', () => resolve({ doneAt, endAt: Date.now(), text }));
      });
      req.on('error', reject);
      req.end(body);
    });
    expect(text).toContain('data: [DONE]');
    expect(doneAt).toBeGreaterThan(0);
    expect(endAt - doneAt).toBeLessThan(1000);
  }, 60_000);
});
