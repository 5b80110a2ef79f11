/**
 * Models that cannot load, met through the official clients of the three dialects against a real
 * daemon process (`orchard start` on loopback): a directory without tokenizer.json, one whose
 * tokenizer.json cannot be built, a garbage config.json, truncated weights, an architecture the engine does not run, and a pull cut off half
 * way. Each request is answered in under 2 s with the reason in the dialect's own error shape (never
 * a 500 `internal error`, never a hang), the daemon logs the reason once, the cut-off pull is not
 * listed and says which files are missing and `orchard pull`, and a model whose files are fixed is
 * served without a restart.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomModel } from '@orchard/engine/testing';
import { HubClient, ModelStore } from '../../packages/daemon/src/store/index.js';
import { freePort, startLoopbackDaemon, waitFor, type LoopbackDaemon } from '../harness/daemons.js';
import { startFakeHub } from '../harness/fake-hub.js';

const GOOD = 't/good';
const PARTIAL = 't/partial';
/**
 * Each broken model, and what its error must say (the same words through every dialect). The SDKs
 * run with their default retries (two for a 503): a cause retrying cannot fix says so
 * (`x-should-retry: false`), so the answer still comes at once. A placement refusal may pass (memory
 * frees up, a node joins), so the SDKs may retry it: that case is asked without retries.
 */
const BROKEN: Record<string, { status: number; says: RegExp; retried?: boolean }> = {
  't/no-tokenizer': { status: 503, says: /t\/no-tokenizer cannot be loaded: tokenizer\.json: file not found in .*no-tokenizer \(nor tiktoken\.model, tokenizer\.model\)/ },
  // Present but not buildable: found when the daemon builds it for the runners it just started.
  't/bad-tokenizer': { status: 503, says: /t\/bad-tokenizer .*tokenizer\.json: cannot build the tokenizer/ },
  't/bad-config': { status: 503, says: /t\/bad-config cannot be loaded: config\.json: not valid JSON/ },
  't/truncated': { status: 503, says: /t\/truncated cannot be loaded: model\.safetensors: .*truncated/ },
  't/unsupported': { status: 503, says: /cannot place t\/unsupported: .*MambaForCausalLM/, retried: true },
  [PARTIAL]: { status: 404, says: /model 't\/partial' is incomplete on this node \(a pull did not finish\): missing .*model\.safetensors.*; run `orchard pull t\/partial` to finish it/ },
};

let daemon: LoopbackDaemon;
let dataDir: string;
const dirOf = (id: string) => join(dataDir, 'models', ...id.split('/'));

beforeAll(async () => {
  dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-load-failures-'));
  const model = (id: string, seed: number) => {
    mkdirSync(dirOf(id), { recursive: true });
    writeRandomModel(dirOf(id), { numLayers: 2, hiddenSize: 64, seed, maxPositionEmbeddings: 256 });
    return dirOf(id);
  };
  model(GOOD, 1);
  unlinkSync(join(model('t/no-tokenizer', 2), 'tokenizer.json'));
  writeFileSync(join(model('t/bad-tokenizer', 7), 'tokenizer.json'), JSON.stringify({ model: { type: 'NoSuchModel' } }));
  writeFileSync(join(model('t/bad-config', 3), 'config.json'), '{"architectures": ["LlamaForCausalLM"], "hidden_size": 64,, garbage');
  const weights = join(model('t/truncated', 4), 'model.safetensors');
  truncateSync(weights, Math.floor(statSync(weights).size / 2));
  const unsupported = join(model('t/unsupported', 5), 'config.json');
  writeFileSync(unsupported, JSON.stringify({ ...JSON.parse(readFileSync(unsupported, 'utf8')), architectures: ['MambaForCausalLM'], model_type: 'mamba' }));

  // A real pull from the stand-in hub, cut off while the weights arrive.
  const src = mkdtempSync(join(os.tmpdir(), 'orchard-load-failures-hub-'));
  writeRandomModel(src, { numLayers: 4, hiddenSize: 256, intermediateSize: 512, seed: 6 });
  const hub = await startFakeHub({ [PARTIAL]: src }, { throttleBytesPerSecond: 4 * 1024 * 1024 });
  const store = new ModelStore(dataDir, new HubClient({ endpoint: hub.url }));
  const abort = new AbortController();
  await store.pull(PARTIAL, { signal: abort.signal, onProgress: (e) => e.file === 'model.safetensors' && e.done > 0 && abort.abort(new Error('cut')) }).catch(() => undefined);
  await store.close();
  await hub.close();
  rmSync(src, { recursive: true, force: true });

  // The daemon resumes interrupted pulls when it starts: here the hub is gone, so the model stays incomplete.
  const noHub = `http://127.0.0.1:${await freePort()}`;
  daemon = await startLoopbackDaemon(dataDir, { args: ['--name', 'load-failures'], env: { HF_ENDPOINT: noHub, ORCHARD_LOG_LEVEL: 'info' } });
  await waitFor('the node with its profile', async () => ((await (await fetch(`${daemon.base}/api/cluster`)).json()) as { nodes: unknown[] }).nodes.length === 1 || undefined, 60_000, 200);
}, 120_000);

afterAll(async () => {
  daemon?.child.kill('SIGKILL');
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** Runs `call`, expecting it to fail: the error and how long the answer took. */
async function failing(call: () => Promise<unknown>): Promise<{ err: Error & { status?: number; status_code?: number; error?: unknown }; ms: number }> {
  const t0 = Date.now();
  try {
    await call();
  } catch (err) {
    return { err: err as Error, ms: Date.now() - t0 };
  }
  throw new Error('the request succeeded');
}

describe('a model that cannot load, through the official clients', () => {
  const openai = (maxRetries?: number) => new OpenAI({ baseURL: `${daemon.base}/v1`, apiKey: 'unused', ...(maxRetries !== undefined ? { maxRetries } : {}) });
  const anthropic = (maxRetries?: number) => new Anthropic({ baseURL: daemon.base, apiKey: 'unused', ...(maxRetries !== undefined ? { maxRetries } : {}) });
  const ollama = () => new Ollama({ host: daemon.base });

  for (const [model, want] of Object.entries(BROKEN)) {
    it(`${model}: named in under 2 s by OpenAI, Anthropic and Ollama`, async () => {
      const retries = want.retried ? 0 : undefined;
      const o = await failing(() => openai(retries).completions.create({ model, prompt: 'In the beginning', max_tokens: 2 }));
      expect(o.err).toBeInstanceOf(OpenAI.APIError);
      expect(o.err.status).toBe(want.status);
      expect(o.err.message).toMatch(want.says);
      expect(o.err.message).not.toMatch(/internal error/);
      expect(o.ms).toBeLessThan(2000);

      const a = await failing(() => anthropic(retries).messages.create({ model, max_tokens: 2, messages: [{ role: 'user', content: 'hello' }] }));
      expect(a.err).toBeInstanceOf(Anthropic.APIError);
      expect(a.err.status).toBe(want.status);
      expect(a.err.message).toMatch(want.says);
      expect(a.ms).toBeLessThan(2000);

      const l = await failing(() => ollama().chat({ model, messages: [{ role: 'user', content: 'hello' }], stream: false }));
      expect(l.err.name).toBe('ResponseError');
      expect(l.err.status_code).toBe(want.status);
      expect(l.err.message).toMatch(want.says);
      expect(l.ms).toBeLessThan(2000);
    }, 30_000);
  }

  it("Orchard's own routes say the same: /api/plan and a load (POST /api/instances), never a 500", async () => {
    const plan = await fetch(`${daemon.base}/api/plan?model=t/bad-config`);
    expect(plan.status).toBe(503);
    expect(((await plan.json()) as { error: { message: string; code: string } }).error).toMatchObject({ code: 'model_load_failed', message: expect.stringMatching(BROKEN['t/bad-config'].says) });
    const load = await fetch(`${daemon.base}/api/instances`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 't/truncated' }) });
    expect(load.status).toBe(503);
    expect(load.headers.get('x-should-retry')).toBe('false');
    expect(((await load.json()) as { error: { message: string } }).error.message).toMatch(BROKEN['t/truncated'].says);
    const partial = await fetch(`${daemon.base}/api/instances`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: PARTIAL }) });
    expect(partial.status).toBe(404);
    expect(((await partial.json()) as { error: { message: string } }).error.message).toMatch(BROKEN[PARTIAL].says);
  });

  it('lists only complete models: the cut-off pull is left out of /v1/models and /api/tags', async () => {
    const ids = (await openai().models.list()).data.map((m) => m.id);
    expect(ids).toContain(GOOD);
    expect(ids).toContain('t/no-tokenizer');
    expect(ids).not.toContain(PARTIAL);
    const tags = (await ollama().list()).models.map((m) => m.name);
    expect(tags.some((t) => t.startsWith(GOOD))).toBe(true);
    expect(tags.some((t) => t.startsWith(PARTIAL))).toBe(false);
  });

  it('logs each model it refuses once, with the reason, however often it is asked', async () => {
    await failing(() => openai().completions.create({ model: 't/bad-config', prompt: 'again', max_tokens: 2 }));
    const lines = readFileSync(daemon.logFile, 'utf8').split('\n').filter((l) => l.includes('model cannot be loaded'));
    for (const model of ['t/no-tokenizer', 't/bad-config', 't/truncated']) {
      const mine = lines.filter((l) => l.includes(`"model":"${model}"`));
      expect(mine, model).toHaveLength(1);
    }
    // Found by the daemon as its runners started: one warning for the instance, none for the placements refused after it.
    const all = readFileSync(daemon.logFile, 'utf8').split('\n');
    const warned = all.filter((l) => l.includes('instance failed on this node') && l.includes('cannot build the tokenizer') && l.includes('"level":40'));
    expect(warned).toHaveLength(1);
    expect(lines.find((l) => l.includes('"model":"t/no-tokenizer"'))).toMatch(/tokenizer\.json: file not found/);
    const resumeLines = readFileSync(daemon.logFile, 'utf8').split('\n').filter((l) => l.includes('interrupted pull'));
    expect(resumeLines.some((l) => l.includes('resuming an interrupted pull') && l.includes(PARTIAL))).toBe(true);
  });

  it('a model whose files are fixed is served again, without a restart', async () => {
    copyFileSync(join(dirOf(GOOD), 'tokenizer.json'), join(dirOf('t/no-tokenizer'), 'tokenizer.json'));
    const r = await openai().completions.create({ model: 't/no-tokenizer', prompt: 'In the beginning', max_tokens: 3, temperature: 0 });
    expect(r.choices[0].finish_reason).toMatch(/stop|length/);
    expect(r.usage?.completion_tokens).toBeGreaterThan(0);
  }, 90_000);
});
