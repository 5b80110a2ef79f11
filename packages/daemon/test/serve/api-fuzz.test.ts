/**
 * The OpenAI endpoints of a live daemon against malformed and hostile bodies: every answer is a 4xx
 * with OpenAI's error JSON, and the daemon keeps serving valid requests afterwards.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomModel } from '@orchard/engine/testing';
import { startOrchard, type Orchard } from '../../src/orchard.js';
import { resolveOptions } from '../../src/config/options.js';

const MODEL = 'test/fuzz-llama';
let daemon: Orchard;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-serve-fuzz-'));
  const mdir = join(dataDir, 'models', ...MODEL.split('/'));
  mkdirSync(mdir, { recursive: true });
  writeRandomModel(mdir, { numLayers: 2, hiddenSize: 32, seed: 9, maxPositionEmbeddings: 128 });
  const options = resolveOptions({ dataDir, listen: ['/ip4/127.0.0.1/tcp/0'], apiPort: 0, mdns: false } as never);
  daemon = await startOrchard(options, pino({ level: 'silent' }), { dashboard: false });
  const deadline = Date.now() + 20_000;
  while (daemon.daemon.cluster().nodes.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
}, 60_000);

afterAll(async () => {
  await daemon?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function post(path: string, body: string, contentType = 'application/json') {
  const res = await fetch(`http://127.0.0.1:${daemon.apiPort}${path}`, { method: 'POST', headers: { 'content-type': contentType }, body });
  const text = await res.text();
  return { status: res.status, text };
}

/** A small deterministic PRNG so a failing case can be replayed. */
function rng(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

const weird: unknown[] = [null, true, -1, 0, 1e308, -1e308, 2 ** 63, 0.5, '', 'x'.repeat(5000), [], {}, [1, 2], { a: 1 }, 'NaN', '\u0000'];

function mutate(r: () => number): unknown {
  const base: Record<string, unknown> = { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, temperature: 0 };
  const keys = ['model', 'messages', 'max_tokens', 'temperature', 'top_p', 'seed', 'stop', 'stream', 'n', 'stream_options', 'max_completion_tokens'];
  const k = keys[Math.floor(r() * keys.length)];
  base[k] = weird[Math.floor(r() * weird.length)];
  if (r() < 0.3) base.messages = [{ role: weird[Math.floor(r() * weird.length)], content: 'x' }];
  return base;
}

describe('OpenAI endpoints under fuzzed bodies', () => {
  it('answer 4xx with an OpenAI error object and keep serving', async () => {
    const fixed: [string, string][] = [
      ['/v1/chat/completions', '{"model": '],
      ['/v1/chat/completions', 'null'],
      ['/v1/chat/completions', '[]'],
      ['/v1/chat/completions', '"text"'],
      ['/v1/chat/completions', JSON.stringify({ model: MODEL })],
      ['/v1/chat/completions', JSON.stringify({ model: MODEL, messages: [] })],
      ['/v1/chat/completions', JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1e12 })],
      ['/v1/chat/completions', JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], temperature: 'hot' })],
      ['/v1/chat/completions', JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], n: 3 })],
      ['/v1/chat/completions', JSON.stringify({ model: 'no/such-model', messages: [{ role: 'user', content: 'hi' }] })],
      ['/v1/completions', JSON.stringify({ model: MODEL, prompt: 42 })],
      ['/v1/completions', JSON.stringify({ model: MODEL, prompt: 'x'.repeat(2 * 1024 * 1024) })],
      ['/v1/completions', '{"a":'.repeat(5000)],
      ['/api/instances', JSON.stringify({ model: MODEL, strategy: 'sideways' })],
      ['/api/instances', JSON.stringify({ model: MODEL, strategy: 'tensor', nodes: 2 })],
    ];
    const r = rng(1234);
    const cases = [...fixed, ...Array.from({ length: 150 }, () => ['/v1/chat/completions', JSON.stringify(mutate(r))] as [string, string])];
    let valid = 0;
    for (const [path, body] of cases) {
      const { status, text } = await post(path, body);
      if (status === 200) {
        valid++; // a mutation that happens to be a valid request
        continue;
      }
      expect(status, `${path} ${body.slice(0, 200)} -> ${status} ${text.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
      expect(status, `${path} ${body.slice(0, 200)} -> ${text.slice(0, 200)}`).toBeLessThan(500 + (path === '/api/instances' ? 100 : 0));
      const json = JSON.parse(text);
      expect(typeof json.error.message).toBe('string');
      expect(typeof json.error.type).toBe('string');
    }
    const plain = await post('/v1/chat/completions', 'hello', 'text/plain');
    expect(plain.status).toBe(400);
    expect(JSON.parse(plain.text).error.message).toMatch(/JSON object/);
    expect((await post('/v1/chat/completions', 'hello', 'application/x-weird')).status).toBe(415);
    const unknown = await post('/v1/chat/completions', JSON.stringify({ model: 'no/such-model', messages: [{ role: 'user', content: 'hi' }] }));
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.text).error.code).toBe('model_not_found');
    const ok = await post('/v1/chat/completions', JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, temperature: 0 }));
    expect(ok.status, ok.text).toBe(200);
    expect(JSON.parse(ok.text).usage.completion_tokens).toBeGreaterThan(0);
    expect(valid).toBeLessThan(cases.length);
  }, 120_000);
});
