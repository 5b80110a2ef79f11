/**
 * `orchard run ORG/NAME PROMPT` as a new user types it, with nothing running and nothing pulled: one
 * command starts a daemon for the session, pulls the model from a stand-in hub (HF_ENDPOINT), places it
 * on the pod, answers, and stops the daemon it started. Also: short names, the catalog, bad names.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomModel } from '@orchard/engine/testing';
import { hfToGguf } from '@orchard/engine/gguf';
import { freePort } from '../../../../test/harness/daemons.js';
import { startFakeHub, type FakeHub } from '../../../../test/harness/fake-hub.js';
import { expandShortName, readCatalog } from '../../src/cli/catalog.js';
import { supportedArchitectures } from '@orchard/engine';
import { runCli } from '../serve/in-process-pod.js';

let work: string;
let hub: FakeHub;
beforeAll(async () => {
  work = mkdtempSync(join(os.tmpdir(), 'orchard-run-model-'));
  writeRandomModel(join(work, 'src'), { hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, seed: 11, maxPositionEmbeddings: 256 });
  // A GGUF repo as the hub has them: no config.json, one .gguf per quantisation.
  mkdirSync(join(work, 'gguf'));
  hfToGguf(join(work, 'src'), join(work, 'gguf', 'tiny-chat-F32.gguf'), { dtype: 'f32' });
  hfToGguf(join(work, 'src'), join(work, 'gguf', 'tiny-chat-Q8_0.gguf'), { dtype: 'q8_0' });
  hub = await startFakeHub({ 'test-org/tiny-chat': join(work, 'src'), 'test-org/tiny-chat-GGUF': join(work, 'gguf') });
});
afterAll(async () => {
  await hub?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('orchard run MODEL', () => {
  it('pulls, places, answers and stops its own daemon, in one command', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const dataDir = join(work, 'data');
    const env = { HF_ENDPOINT: hub.url, ORCHARD_LISTEN: '/ip4/127.0.0.1/tcp/0', ORCHARD_MDNS: 'false', NO_COLOR: '1' };
    const r = await runCliEnv(['run', 'test-org/tiny-chat', 'Hello there', '--url', url, '--data-dir', dataDir, '--max-tokens', '12', '--temperature', '0'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/no daemon at http:\/\/127\.0\.0\.1:\d+: starting one for this session/);
    expect(r.stderr).toMatch(/test-org\/tiny-chat: \d+ files, [\d.]+ [kM]B/);
    expect(r.stderr).toMatch(/test-org\/tiny-chat is ready \(\w+ on 1 node, context 256 tokens\)/);
    expect(r.stderr).toMatch(/\[12 tokens, /);
    expect(r.stdout.trim().length).toBeGreaterThan(0);
    expect(hub.servedBytes.get('model.safetensors')).toBeGreaterThan(0);
    expect(readdirSync(join(dataDir, 'models', 'test-org', 'tiny-chat'))).toContain('model.safetensors');
    // The session's daemon is gone.
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
  }, 300_000);

  it('pulls the named quantisation of a GGUF repo and serves it through the daemon', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const dataDir = join(work, 'data-gguf');
    const env = { HF_ENDPOINT: hub.url, ORCHARD_LISTEN: '/ip4/127.0.0.1/tcp/0', ORCHARD_MDNS: 'false', NO_COLOR: '1' };
    const r = await runCliEnv(['run', 'test-org/tiny-chat-GGUF:Q8_0', 'Hello there', '--url', url, '--data-dir', dataDir, '--max-tokens', '12', '--temperature', '0'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/test-org\/tiny-chat-GGUF is ready \(\w+ on 1 node, context 256 tokens\)/);
    expect(readdirSync(join(dataDir, 'models', 'test-org', 'tiny-chat-GGUF')).filter((f) => f.endsWith('.gguf'))).toEqual(['tiny-chat-Q8_0.gguf']);
    // The same file in one process, through the chat template as the pod's session sends it.
    const one = await runCli(['run', '--model', join(work, 'gguf', 'tiny-chat-Q8_0.gguf'), '--chat', '--prompt', 'Hello there', '--max-tokens', '12', '--temperature', '0']);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout.trim().length).toBeGreaterThan(0);
    expect(r.stdout.trim()).toBe(one.stdout.trim());
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
  }, 300_000);

  it('refuses what is not a model, in one line, before starting anything', async () => {
    const r = await runCliEnv(['run', 'not a model!', 'hi', '--url', 'http://127.0.0.1:1', '--data-dir', join(work, 'x')], { ORCHARD_LISTEN: '/ip4/127.0.0.1/tcp/0', ORCHARD_MDNS: 'false' });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/^orchard: "not a model!" is not a model: give a directory, ORG\/NAME\[:QUANT\]/);
    expect(r.stderr).not.toMatch(/starting one/);
  }, 60_000);
});

describe('the curated catalog', () => {
  it('names only architectures the engine runs, with sizes, and short names expand', () => {
    const models = readCatalog();
    expect(models.length).toBeGreaterThan(5);
    for (const m of models) {
      expect(supportedArchitectures()).toContain(m.architecture);
      expect(m.repo).toMatch(/^[\w.-]+\/[\w.-]+$/);
      expect(m.bytes).toBeGreaterThan(1e8);
    }
    expect(new Set(models.map((m) => m.name)).size).toBe(models.length);
    expect(expandShortName('qwen2.5-0.5b')).toBe('Qwen/Qwen2.5-0.5B-Instruct');
    expect(expandShortName('qwen2.5-0.5b:Q8_0')).toBe('Qwen/Qwen2.5-0.5B-Instruct:Q8_0');
    expect(expandShortName('someone/else')).toBe('someone/else');
  });
});

/** runCli with extra environment (the child inherits process.env). */
async function runCliEnv(args: string[], env: Record<string, string>) {
  const old = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  try {
    return await runCli(args);
  } finally {
    for (const [k, v] of Object.entries(old)) if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
}
