/**
 * What web pages may not do to the API (DNS rebinding, cross-site requests, form posts), which
 * clients still pass, one error shape for everything including Fastify's and Node's own errors,
 * and request timeouts for bodies that never arrive whole.
 */
import net from 'node:net';
import os from 'node:os';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApi } from '../../src/http/server.js';
import { hostAllowList, hostOfHeader } from '../../src/http/guard.js';
import type { PodSource } from '../../src/http/cluster.js';
import { openAiError } from './openai-error.js';


let measured = 0;
const pod: PodSource = {
  cluster: () => ({ nodes: [], links: [], mode: 'open' }),
  status: () => ({ mode: 'open' }),
  remeasureCapability: async () => {
    measured++;
    return { capability: null };
  },
  onChange: () => () => {},
};
const log = pino({ level: 'silent' });

describe('Host and Origin', () => {
  const open = buildApi({ pod, token: null, log });
  const guarded = buildApi({ pod, token: 'tok', log });
  afterAll(async () => {
    await open.close();
    await guarded.close();
  });

  const get = (headers: Record<string, string>, url = '/api/status', app = open) => app.inject({ method: 'GET', url, headers });

  it('parses Host headers and decides on names, not prefixes', () => {
    expect(['localhost:52415', '127.0.0.1', '[::1]:1', 'LocalHost.', 'a.b.c:80', '[fe80::1]'].map(hostOfHeader)).toEqual(['localhost', '127.0.0.1', '::1', 'localhost', 'a.b.c', 'fe80::1']);
    expect(['a b', 'x:y:z', 'u@h', '', '[zz]'].map(hostOfHeader)).toEqual([null, null, null, null, null]);
    const loopbackOnly = hostAllowList({ apiHost: '127.0.0.1' });
    expect(['localhost', '127.0.0.1', '127.9.9.9', '::1', 'api.internal'].map(loopbackOnly)).toEqual([true, true, true, true, false]);
    expect(['127.example.com', 'localhost.evil.example', 'evil.example'].map(loopbackOnly)).toEqual([false, false, false]);
    expect(hostAllowList({ apiHost: '10.1.2.3', allowedHosts: ['Orchard.LAN'] })('orchard.lan')).toBe(true);
    expect(hostAllowList({ apiHost: '10.1.2.3' })('10.1.2.3')).toBe(true);
    // Listening on every address: this machine's addresses and host name are its names.
    const every = hostAllowList({ apiHost: '0.0.0.0' });
    const mine = Object.values(os.networkInterfaces()).flat().find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
    if (mine) expect(every(mine)).toBe(true);
    expect(every(os.hostname())).toBe(true);
    expect(every('evil.example')).toBe(false);
  });

  it('a rebound name (Host: evil.example), with or without its Origin, is refused with 403 on every route, token or not', async () => {
    for (const app of [open, guarded]) {
      for (const [method, url] of [
        ['GET', '/healthz'],
        ['GET', '/api/status'],
        ['GET', '/api/cluster'],
        ['GET', '/api/events'],
        ['POST', '/api/capability/measure'],
        ['GET', '/no/such/route'],
      ] as const) {
        for (const headers of [{ host: 'evil.example' }, { host: 'evil.example:52415', origin: 'http://evil.example:52415' }, { host: '127.example.com' }]) {
          const r = await app.inject({ method, url, headers: { ...headers, 'content-type': 'application/json', authorization: 'Bearer tok' }, payload: method === 'POST' ? '{}' : undefined });
          expect(r.statusCode, `${method} ${url} ${JSON.stringify(headers)}`).toBe(403);
          expect(openAiError.parse(r.json()).error.code).toBe('forbidden_host');
        }
      }
    }
    expect(measured).toBe(0);
  });

  it('a foreign or null Origin, and cross-site fetches, are refused; a navigation to the page is not', async () => {
    for (const origin of ['http://evil.example', 'null', 'file://', 'chrome-extension://abc', 'not a url']) {
      const r = await get({ host: '127.0.0.1:52415', origin });
      expect(r.statusCode, origin).toBe(403);
      expect(openAiError.parse(r.json()).error.code).toBe('forbidden_origin');
    }
    expect((await get({ host: '127.0.0.1:52415', 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'no-cors' })).statusCode).toBe(403);
    expect((await get({ host: '127.0.0.1:52415', 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' }, '/healthz')).statusCode).toBe(200);
  });

  it('the clients that should pass still do: no Origin (CLI, SDKs), the same origin (the dashboard), loopback names', async () => {
    for (const host of ['127.0.0.1:52415', 'localhost:52415', '[::1]:52415', 'localhost']) expect((await get({ host })).statusCode, host).toBe(200);
    expect((await get({ host: '127.0.0.1:52415', origin: 'http://127.0.0.1:52415', 'sec-fetch-site': 'same-origin' })).statusCode).toBe(200);
    // Another local origin may read (the browser keeps the answer from it: no CORS headers) but not change anything.
    expect((await get({ host: '127.0.0.1:52415', origin: 'http://localhost:3000' })).statusCode).toBe(200);
    expect((await get({ host: '127.0.0.1:52415' })).headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('state-changing requests', () => {
  const open = buildApi({ pod, token: null, log });
  const guarded = buildApi({ pod, token: 'tok', log });
  afterAll(async () => {
    await open.close();
    await guarded.close();
  });
  const post = (headers: Record<string, string>, payload?: string, app = open) =>
    app.inject({ method: 'POST', url: '/api/capability/measure', headers: { host: '127.0.0.1:52415', ...headers }, payload });

  it('must be JSON: the text/plain (or form, or type-less) empty-body POST of a web page is refused with 415 and changes nothing', async () => {
    measured = 0;
    for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', undefined]) {
      const r = await post(type ? { 'content-type': type } : {}, '');
      expect(r.statusCode, String(type)).toBe(415);
      expect(openAiError.parse(r.json()).error).toMatchObject({ code: 'unsupported_media_type', param: 'content-type' });
      const withBody = await post(type ? { 'content-type': type } : {}, 'x=1');
      expect(withBody.statusCode, String(type)).toBe(415);
    }
    expect(measured).toBe(0);
    expect((await post({ 'content-type': 'application/vnd.orchard+json' }, '{}')).statusCode).toBe(415);
    expect(measured).toBe(0);
    expect((await post({ 'content-type': 'application/json' }, '{}')).statusCode).toBe(200);
    expect((await post({ 'content-type': 'Application/JSON; charset=utf-8' }, '{}')).statusCode).toBe(200);
    expect(measured).toBe(2);
  });

  it('from another origin: only the origins the API allows (dashboard, local front ends, --cors-origins), and the token still applies', async () => {
    measured = 0;
    const json = { 'content-type': 'application/json' };
    const listed = buildApi({ pod, token: null, log, corsOrigins: ['https://webui.example'] });
    try {
      expect((await post({ ...json, origin: 'http://127.0.0.1:52415' }, '{}')).statusCode).toBe(200); // the dashboard
      expect((await post({ ...json, origin: 'http://localhost:3000' }, '{}')).statusCode).toBe(200); // a local front end (Open WebUI)
      const other = await post({ ...json, origin: 'https://webui.example' }, '{}');
      expect(other.statusCode).toBe(403);
      expect(openAiError.parse(other.json()).error.code).toBe('forbidden_origin');
      expect((await post({ ...json, origin: 'https://webui.example' }, '{}', listed)).statusCode).toBe(200);
      expect((await post({ ...json, origin: 'http://localhost:3000' }, '{}', guarded)).statusCode).toBe(401);
      expect((await post({ ...json, origin: 'http://localhost:3000', authorization: 'Bearer tok' }, '{}', guarded)).statusCode).toBe(200);
      expect(measured).toBe(4);
    } finally {
      await listed.close();
    }
  });

  it('DELETE needs no content type when it has no body', async () => {
    const r = await open.inject({ method: 'DELETE', url: '/api/instances/x', headers: { host: 'localhost' } });
    expect(r.statusCode).toBe(404); // past the guard: no such route on a control-plane-only API
    expect((await open.inject({ method: 'DELETE', url: '/api/instances/x', headers: { host: 'localhost', 'content-type': 'text/plain' }, payload: 'x' })).statusCode).toBe(415);
  });
});

describe('one error shape, and timeouts, on a real socket', () => {
  const app = buildApi({ pod, token: 'tok', log, timeouts: { requestMs: 1500, headersMs: 1000, checkEveryMs: 200 } });
  let port = 0;
  beforeAll(async () => {
    await app.listen({ host: '127.0.0.1', port: 0 });
    port = (app.server.address() as net.AddressInfo).port;
  });
  afterAll(() => app.close());

  /** Sends raw bytes; resolves with what came back once the server closed (or after ms) and how long that took. */
  function raw(bytes: string | Buffer, ms = 8000): Promise<{ status: number; body: string; closedAfterMs: number }> {
    return new Promise((resolve, reject) => {
      const t0 = performance.now();
      const s = net.connect({ host: '127.0.0.1', port }, () => s.write(bytes));
      let got = '';
      const timer = setTimeout(() => {
        s.destroy();
        reject(new Error(`connection still open after ${ms} ms; got ${JSON.stringify(got.slice(0, 300))}`));
      }, ms);
      s.on('data', (d) => (got += d));
      s.on('error', () => {});
      s.on('close', () => {
        clearTimeout(timer);
        const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? 0);
        resolve({ status, body: got.slice(got.indexOf('\r\n\r\n') + 4), closedAfterMs: performance.now() - t0 });
      });
    });
  }

  const auth = 'Authorization: Bearer tok\r\n';

  it('Fastify and Node errors are OpenAI errors: 400 bad JSON, 413, 415, 404, 401, 431, malformed requests', async () => {
    const cases: [string | Buffer, number][] = [
      [`POST /api/capability/measure HTTP/1.1\r\nHost: localhost\r\n${auth}Content-Type: application/json\r\nContent-Length: 9\r\nConnection: close\r\n\r\n{"a": tru`, 400],
      [`POST /api/capability/measure HTTP/1.1\r\nHost: localhost\r\n${auth}Content-Type: application/json\r\nContent-Length: ${2 << 20}\r\nConnection: close\r\n\r\n${'x'.repeat(1000)}`, 413],
      [`POST /api/capability/measure HTTP/1.1\r\nHost: localhost\r\n${auth}Content-Type: application/json\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`, 400],
      [`GET /nothing/here HTTP/1.1\r\nHost: localhost\r\n${auth}Connection: close\r\n\r\n`, 404],
      [`GET /api/status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`, 401],
      [`GET /api/status HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n${'X-Pad: b\r\n'.repeat(3000)}Connection: close\r\n\r\n`, 431],
      ['GARBAGE\r\n\r\n', 400],
      [`GET /api/status HTTP/9.9\r\nHost: localhost\r\n\r\n`, 400],
      [`POST /api/capability/measure HTTP/1.1\r\nHost: localhost\r\n${auth}Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}`, 400],
      [`POST /api/capability/measure HTTP/1.1\r\nHost: localhost\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`, 400],
      [Buffer.from([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03]), 400], // a TLS hello
    ];
    for (const [bytes, status] of cases) {
      const r = await raw(bytes);
      const what = String(bytes).slice(0, 80);
      expect(r.status, what).toBe(status);
      expect(() => openAiError.parse(JSON.parse(r.body)), `${what} -> ${r.body.slice(0, 200)}`).not.toThrow();
    }
    // Fastify's content-type errors, through the guard (JSON) into the parser.
    const r415 = await raw(`PUT /api/capability/measure HTTP/1.1\r\nHost: localhost\r\n${auth}Content-Type: application/octet-stream\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
    expect(r415.status).toBe(415);
    openAiError.parse(JSON.parse(r415.body));
  });

  it('a body shorter than its Content-Length, or headers that never end, do not hold the connection: 408 and closed', async () => {
    const short = await raw(`POST /api/capability/measure HTTP/1.1\r\nHost: localhost\r\n${auth}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":`);
    expect(short.status).toBe(408);
    expect(openAiError.parse(JSON.parse(short.body)).error.code).toBe('request_timeout');
    expect(short.closedAfterMs).toBeLessThan(4000);
    const slowHead = await raw(`GET /api/status HTTP/1.1\r\nHost: localhost\r\n`);
    expect([408, 0]).toContain(slowHead.status); // Node answers 408 or just closes, depending on the phase
    expect(slowHead.closedAfterMs).toBeLessThan(4000);
  });
});
