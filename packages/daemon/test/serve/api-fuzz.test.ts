/**
 * A live daemon's HTTP API against malformed and hostile requests: every error answer is OpenAI's
 * error JSON (validated against its exact shape), none is a 5xx but placement's 503, rebinding
 * headers are refused on every route, and the daemon keeps serving valid requests afterwards.
 */
import http from 'node:http';
import net from 'node:net';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomModel } from '@orchard/engine/testing';
import { startOrchard, type Orchard } from '../../src/orchard.js';
import { resolveOptions } from '../../src/config/options.js';
import { anthropicErrorShape, ollamaErrorShape, openAiError } from '../api/openai-error.js';

const MODEL = 'test/fuzz-llama';
let daemon: Orchard;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-serve-fuzz-'));
  const mdir = join(dataDir, 'models', ...MODEL.split('/'));
  mkdirSync(mdir, { recursive: true });
  writeRandomModel(mdir, { numLayers: 2, hiddenSize: 32, seed: 9, maxPositionEmbeddings: 128 });
  const options = resolveOptions({ dataDir, listen: ['/ip4/127.0.0.1/tcp/0'], apiPort: 0, mdns: false } as never);
  daemon = await startOrchard(options, pino({ level: 'silent' }));
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
    expect(plain.status).toBe(415);
    expect(JSON.parse(plain.text).error.message).toMatch(/must send JSON/);
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

/** One request through node:http (any Host, Origin or method); resolves with status, body and whether it ended. */
function send(r: { method: string; path: string; headers: Record<string, string>; body?: string }): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    // Node's client frames a DELETE body only when told its length.
    const headers = r.body === undefined ? r.headers : { ...r.headers, 'content-length': String(Buffer.byteLength(r.body)) };
    const req = http.request({ host: '127.0.0.1', port: daemon.apiPort, method: r.method, path: r.path, headers, agent: false, timeout: 60_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('timeout', () => req.destroy(new Error(`${r.method} ${r.path}: no answer within 60 s`)));
    req.on('error', reject);
    req.end(r.body);
  });
}

/** Raw bytes on a socket; resolves with the status line's code and the body once the server closes. */
function sendRaw(bytes: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port: daemon.apiPort }, () => s.write(bytes));
    let got = '';
    const timer = setTimeout(() => s.destroy(new Error(`raw request still open after 20 s: ${JSON.stringify(bytes.slice(0, 100))}`)), 20_000);
    s.on('data', (d) => (got += d));
    s.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    s.on('close', () => {
      clearTimeout(timer);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? 0), text: got.slice(got.indexOf('\r\n\r\n') + 4) });
    });
  });
}

/** Every route of the API (http/*.ts), with a body that would be accepted where one is needed. */
const ROUTES: [string, string, string?][] = [
  ['POST', '/v1/responses', JSON.stringify({ model: MODEL, input: 'hi', max_output_tokens: 2 })],
  ['GET', `/v1/models/${MODEL}`],
  ['POST', '/v1/embeddings', JSON.stringify({ model: MODEL, input: 'hi' })],
  ['POST', '/v1/messages', JSON.stringify({ model: MODEL, max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] })],
  ['POST', '/v1/messages/count_tokens', JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] })],
  ['POST', '/api/chat', JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: false })],
  ['POST', '/api/generate', JSON.stringify({ model: MODEL, prompt: 'hi', stream: false })],
  ['GET', '/api/tags'],
  ['POST', '/api/show', JSON.stringify({ model: MODEL })],
  ['GET', '/api/ps'],
  ['GET', '/api/version'],
  ['POST', '/api/pull', JSON.stringify({ model: 'org/name', stream: false })],
  ['POST', '/api/embed', JSON.stringify({ model: MODEL, input: 'hi' })],
  ['POST', '/api/embeddings', JSON.stringify({ model: MODEL, prompt: 'hi' })],
  ['GET', '/healthz'],
  ['GET', '/api/cluster'],
  ['GET', '/api/status'],
  ['GET', '/api/events'],
  ['POST', '/api/capability/measure', '{}'],
  ['GET', '/v1/models'],
  ['POST', '/v1/chat/completions', JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 })],
  ['POST', '/v1/completions', JSON.stringify({ model: MODEL, prompt: 'hi', max_tokens: 2 })],
  ['GET', `/api/plan?model=${MODEL}`],
  ['GET', '/api/instances'],
  ['POST', '/api/instances', JSON.stringify({ model: MODEL })],
  ['DELETE', '/api/instances/some-id'],
  ['POST', '/api/models/pull', JSON.stringify({ repo: 'org/name' })],
  ['GET', '/'],
  ['GET', '/dashboard/app.js'],
  ['GET', '/dashboard/app.css'],
  ['GET', '/api/dashboard/instances'],
  ['GET', `/api/dashboard/plan?model=${MODEL}`],
  ['GET', '/api/dashboard/progress'],
];

const OLLAMA = new Set(['/api/chat', '/api/generate', '/api/tags', '/api/show', '/api/ps', '/api/version', '/api/pull', '/api/embed', '/api/embeddings']);

/** The error shape a request answers in: Anthropic's and Ollama's on their routes, OpenAI's everywhere else (unknown method or path too). */
function shapeOf(method: string, path: string) {
  const p = path.split('?')[0];
  const route = ROUTES.some(([m, rp]) => rp.split('?')[0] === p && (m === method || (m === 'GET' && method === 'HEAD')));
  if (route && (p === '/v1/messages' || p === '/v1/messages/count_tokens')) return anthropicErrorShape;
  if (route && OLLAMA.has(p)) return ollamaErrorShape;
  return openAiError;
}

describe('the whole API under hostile requests', () => {
  it('every route refuses DNS-rebinding headers (a foreign Host, with or without its Origin) with 403 in its API’s error shape', async () => {
    for (const [method, path, body] of ROUTES) {
      const url = path.split('?')[0];
      const route = url === '/api/instances/some-id' ? '/api/instances/:id' : url.startsWith('/v1/models/') ? '/v1/models/*' : url;
      expect(daemon.api.hasRoute({ method: method as 'GET', url: route }), `${method} ${path} is a route`).toBe(true);
      const bads: Record<string, string>[] = [{ host: 'evil.example' }, { host: `evil.example:${daemon.apiPort}`, origin: `http://evil.example:${daemon.apiPort}` }, { host: `127.0.0.1:${daemon.apiPort}`, origin: 'http://evil.example' }];
      for (const bad of bads) {
        const r = await send({ method, path, headers: { ...bad, ...(body ? { 'content-type': 'application/json' } : {}) }, body });
        expect(r.status, `${method} ${path} ${JSON.stringify(bad)}`).toBe(403);
        shapeOf(method, path).parse(JSON.parse(r.text));
      }
    }
  });

  it('a pull of "../../x" is a 400 naming the repo field (no download attempted)', async () => {
    for (const repo of ['../../x', '../x', 'a/../../b', '/etc/passwd', 'org/name/extra', 'org\\name', '.hidden/x']) {
      const r = await send({ method: 'POST', path: '/api/models/pull', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ repo }) });
      expect(r.status, repo).toBe(400);
      expect(openAiError.parse(JSON.parse(r.text)).error).toMatchObject({ param: 'repo', code: 'invalid_value' });
    }
  });

  it('1,200 malformed requests: every error body is its API’s error JSON (OpenAI’s but on the Anthropic and Ollama routes), no 5xx but 501/503, and the daemon still serves', async () => {
    const r = rng(20261201);
    const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
    const port = daemon.apiPort;
    const hosts = [`127.0.0.1:${port}`, `localhost:${port}`, 'evil.example', '127.example.com', '', 'a b', `[::1]:${port}`, 'x'.repeat(300)];
    const origins = [undefined, undefined, 'null', 'http://evil.example', `http://127.0.0.1:${port}`, 'http://localhost:1', 'javascript:alert(1)', '%%%'];
    const types = ['application/json', 'application/json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=z', 'application/json; charset=utf-16', '', 'image/png', 'application/json, text/plain'];
    const paths = [...ROUTES.map(([, p]) => p), '/v1/chat/completions/', '/v1/../api/status', '/api/instances/%00', '/api/instances/' + 'a'.repeat(3000), '/%ff%fe', '/api/plan?model=', '/api/plan?model=x&nodes=-1', '/api/plan?strategy=sideways&model=m', '/v2/models', '/api/dashboard/plan', '/*', '/api/events?x=' + '%'.repeat(50)];
    // Bodies by kind. Valid requests that would start long work are never built: a placement (the
    // instance bodies always ask for 2 nodes of this 1-node pod or are invalid), a pull (every repo id
    // is invalid), the capability benchmark (always sent as something other than JSON, below).
    const garbage = () => pick(['', 'null', '[]', '{', '{"model":', '"\\u0000"', '{}'.repeat(1000), '\u0000\u0001\u0002', '{"__proto__":{"polluted":1}}', '1e999', '{"a":' + '['.repeat(2000), 'x'.repeat((1 << 20) + 10)]);
    const instanceBody = () => JSON.stringify({ model: pick([MODEL, '', 7, null, 'no/such']), strategy: pick(['pipeline', 'tensor', 'sideways', 1, null]), nodes: pick([0, 2, 65, -1, 'two', 1.5]) });
    const pullBody = () => JSON.stringify({ repo: pick(['../../x', '', 'x', 'a/b/c', 'a/' + 'b'.repeat(300), 42, null, ['org/name'], '..', 'org/..', 'org/.git', '/etc/passwd']) });
    const ollamaPullBody = () => JSON.stringify({ model: pick(['../../x', '', 'x', 42, null, 'a/b/c', 'org/..x/y']), stream: pick([false, true, 'no']) });
    const bodies = (path: string): string => {
      if (path === '/api/instances') return r() < 0.7 ? instanceBody() : garbage();
      if (path === '/api/models/pull') return r() < 0.7 ? pullBody() : garbage();
      if (path === '/api/pull') return r() < 0.7 ? ollamaPullBody() : garbage();
      return pick([() => JSON.stringify(mutate(r)), () => JSON.stringify({ model: MODEL, prompt: pick(weird) }), instanceBody, pullBody, garbage, garbage])();
    };
    const statuses = new Map<number, number>();
    let checked = 0;
    for (let i = 0; i < 1200; i++) {
      let res: { status: number; text: string };
      let what: string;
      if (i % 10 === 9) {
        // Malformed HTTP itself: bad request lines, header floods, short bodies (the 10 s request timeout
        // would make those slow: they get a wrong length instead), broken chunking, binary.
        const raw = pick([
          'GET / HTTP/1.1\r\nHost: localhost\r\nX: ' + 'y'.repeat(20_000) + '\r\n' + 'X-P: q\r\n'.repeat(3000) + '\r\n',
          'BREW /coffee HTCPCP/1.0\r\n\r\n',
          '\x16\x03\x01\x00\xa5\x01\x00',
          'POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n',
          'POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello',
          'GET /api/status HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\nConnection: close\r\n\r\n',
          'GET /api/status HTTP/1.1\r\nHo st: localhost\r\n\r\n',
          'GET /api/status\x00 HTTP/1.1\r\nHost: localhost\r\n\r\n',
          'POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: -1\r\n\r\n',
        ]);
        what = `raw ${JSON.stringify(raw.slice(0, 80))}`;
        res = await sendRaw(raw);
        if (res.status === 0) continue; // closed without an answer (nothing to validate)
      } else {
        const method = pick(['GET', 'POST', 'POST', 'POST', 'DELETE', 'PUT', 'PATCH', 'OPTIONS', 'HEAD', 'TRACE']);
        const path = pick(paths);
        const headers: Record<string, string> = {};
        const host = pick(hosts);
        if (host) headers.host = host;
        const origin = pick(origins);
        if (origin) headers.origin = origin;
        if (r() < 0.2) headers['sec-fetch-site'] = pick(['cross-site', 'same-site', 'same-origin', 'none']);
        if (r() < 0.1) headers.authorization = pick(['Bearer', 'Bearer x', 'Basic Zm9vOmJhcg==', 'x'.repeat(1000)]);
        // No body on methods that have none: Node would read it as the next request (and answer that too).
        const body = ['GET', 'HEAD', 'OPTIONS', 'TRACE'].includes(method) || r() < 0.1 ? undefined : bodies(path);
        const type = path === '/api/capability/measure' ? pick(types.filter((t) => !t.startsWith('application/json'))) : pick(types);
        if (body !== undefined && type) headers['content-type'] = type;
        // An event stream or a dashboard build when the headers pass: always refused instead.
        if (path.startsWith('/api/events') || path === '/' || path.startsWith('/dashboard/')) headers.host = 'evil.example';
        what = `${method} ${path} ${JSON.stringify(headers).slice(0, 200)} ${String(body).slice(0, 120)}`;
        res = await send({ method, path, headers, body }).catch((err: Error) => {
          throw new Error(`${what}: ${err.message}`);
        });
      }
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      if (res.status < 400) continue;
      expect(res.status === 501 || res.status === 503 || res.status < 500, `${what} -> ${res.status} ${res.text.slice(0, 300)}`).toBe(true);
      if (res.text === '') {
        expect(['HEAD'].some((m) => what.startsWith(m)), `${what} -> ${res.status} with an empty body`).toBe(true);
        continue;
      }
      let json: unknown;
      try {
        json = JSON.parse(res.text);
      } catch {
        throw new Error(`${what} -> ${res.status} not JSON: ${res.text.slice(0, 300)}`);
      }
      const v = (what.startsWith('raw ') ? openAiError : shapeOf(what.split(' ')[0], what.split(' ')[1])).safeParse(json);
      expect(v.success, `${what} -> ${res.status} ${res.text.slice(0, 300)}`).toBe(true);
      checked++;
    }
    expect(checked).toBeGreaterThanOrEqual(1000);
    for (const s of [400, 403, 404, 413, 415]) expect(statuses.get(s) ?? 0, `some ${s}s among ${JSON.stringify([...statuses])}`).toBeGreaterThan(0);
    const ok = await post('/v1/chat/completions', JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, temperature: 0 }));
    expect(ok.status, ok.text).toBe(200);
  }, 300_000);
});
