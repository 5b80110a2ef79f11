/** CORS on the daemon's API: which origins are answered, preflights before the token, foreign origins refused. */
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApi } from '../../src/http/server.js';
import type { PodSource } from '../../src/http/cluster.js';
import { originAllowed } from '../../src/dialects/cors.js';
import { resolveOptions } from '../../src/config/options.js';

const sources: PodSource = {
  cluster: () => ({ nodes: [], links: [], mode: 'open' }),
  status: () => ({ mode: 'open' }),
  remeasureCapability: async () => ({ capability: null }),
  onChange: () => () => {},
};
const logger = pino({ level: 'silent' });

describe('which origins', () => {
  it('the dashboard itself, localhost front ends, listed origins; nothing else', () => {
    expect(originAllowed('http://192.168.1.5:52415', '192.168.1.5:52415', [])).toBe(true);
    expect(originAllowed('http://localhost:3000', '127.0.0.1:52415', [])).toBe(true);
    expect(originAllowed('https://127.0.0.1:8080', '127.0.0.1:52415', [])).toBe(true);
    expect(originAllowed('http://[::1]:5173', '127.0.0.1:52415', [])).toBe(true);
    expect(originAllowed('https://evil.example', '127.0.0.1:52415', [])).toBe(false);
    expect(originAllowed('http://localhost.evil.example', '127.0.0.1:52415', [])).toBe(false);
    expect(originAllowed('null', '127.0.0.1:52415', [])).toBe(false);
    expect(originAllowed('https://webui.lan', '127.0.0.1:52415', ['https://webui.lan'])).toBe(true);
    expect(originAllowed('https://anything.example', '127.0.0.1:52415', ['*'])).toBe(true);
  });

  it('is configured with --cors-origins / ORCHARD_CORS_ORIGINS', () => {
    expect(resolveOptions({ corsOrigins: 'https://a.example, https://b.example' }, {}).corsOrigins).toEqual(['https://a.example', 'https://b.example']);
    expect(resolveOptions({}, { ORCHARD_CORS_ORIGINS: '*' }).corsOrigins).toEqual(['*']);
    expect(resolveOptions({}, {}).corsOrigins).toEqual([]);
  });
});

describe('on the API', () => {
  const open = buildApi({ pod: sources, token: null, log: logger, corsOrigins: ['https://webui.lan'] });
  const guarded = buildApi({ pod: sources, token: 's3cret', log: logger });
  afterAll(async () => {
    await open.close();
    await guarded.close();
  });

  it('answers a preflight from an allowed origin and marks its responses', async () => {
    const pre = await open.inject({ method: 'OPTIONS', url: '/v1/chat/completions', headers: { origin: 'https://webui.lan', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, x-stainless-os' } });
    expect(pre.statusCode).toBe(204);
    expect(pre.headers['access-control-allow-origin']).toBe('https://webui.lan');
    expect(pre.headers['access-control-allow-methods']).toContain('POST');
    expect(pre.headers['access-control-allow-headers']).toBe('authorization, content-type, x-stainless-os');
    const get = await open.inject({ method: 'GET', url: '/api/cluster', headers: { origin: 'http://localhost:3000' } });
    expect(get.statusCode).toBe(200);
    expect(get.headers['access-control-allow-origin']).toBe('http://localhost:3000');
    expect(get.headers.vary).toBe('Origin');
    const plain = await open.inject({ method: 'GET', url: '/api/cluster' });
    expect(plain.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('refuses a foreign origin before the request runs', async () => {
    const r = await open.inject({ method: 'GET', url: '/api/cluster', headers: { origin: 'https://evil.example' } });
    expect(r.statusCode).toBe(403);
    expect(r.json().error.message).toMatch(/https:\/\/evil\.example are not allowed/);
    expect(r.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('with a token: the preflight is answered, the request itself still needs the token (Bearer or x-api-key)', async () => {
    const origin = 'http://localhost:8080';
    const pre = await guarded.inject({ method: 'OPTIONS', url: '/api/cluster', headers: { origin, 'access-control-request-method': 'GET' } });
    expect(pre.statusCode).toBe(204);
    expect((await guarded.inject({ method: 'GET', url: '/api/cluster', headers: { origin } })).statusCode).toBe(401);
    expect((await guarded.inject({ method: 'GET', url: '/api/cluster', headers: { origin, authorization: 'Bearer s3cret' } })).statusCode).toBe(200);
    expect((await guarded.inject({ method: 'GET', url: '/api/cluster', headers: { origin, 'x-api-key': 's3cret' } })).statusCode).toBe(200);
    expect((await guarded.inject({ method: 'GET', url: '/api/cluster', headers: { 'x-api-key': 'wrong' } })).statusCode).toBe(401);
  });
});
