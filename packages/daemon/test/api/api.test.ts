import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApi } from '../../src/http/server.js';
import type { PodSource } from '../../src/http/cluster.js';

const sources: PodSource = {
  cluster: () => ({ nodes: [], links: [], mode: 'open' }),
  status: () => ({ mode: 'open' }),
  remeasureCapability: async () => ({ capability: null }),
  onChange: () => () => {},
};
const logger = pino({ level: 'silent' });

describe('HTTP API', () => {
  const open = buildApi({ pod: sources, token: null, log: logger });
  const guarded = buildApi({ pod: sources, token: 's3cret', log: logger });
  afterAll(async () => {
    await open.close();
    await guarded.close();
  });

  it('serves the cluster JSON and JSON 404s', async () => {
    const r = await open.inject({ method: 'GET', url: '/api/cluster' });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ nodes: [], links: [], mode: 'open' });
    const missing = await open.inject({ method: 'GET', url: '/api/nope' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error.message).toMatch(/no route GET \/api\/nope/);
  });

  it('with a token, every route but /healthz needs the right Bearer token', async () => {
    expect((await guarded.inject({ method: 'GET', url: '/api/cluster' })).statusCode).toBe(401);
    expect((await guarded.inject({ method: 'GET', url: '/api/cluster', headers: { authorization: 'Bearer wrong!' } })).statusCode).toBe(401);
    expect((await guarded.inject({ method: 'GET', url: '/api/cluster', headers: { authorization: 'Bearer s3cret' } })).statusCode).toBe(200);
    expect((await guarded.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });
});

describe('HTTP API server-sent events', () => {
  it('streams the cluster on connect and on every change', async () => {
    let notify: (what: string) => void = () => {};
    let version = 0;
    const app = buildApi({ pod: { ...sources, cluster: () => ({ version }), onChange: (l) => ((notify = l), () => (notify = () => {})) }, token: null, log: logger });
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const port = (app.server.address() as { port: number }).port;
      const ac = new AbortController();
      const res = await fetch(`http://127.0.0.1:${port}/api/events`, { signal: ac.signal });
      expect(res.headers.get('content-type')).toBe('text/event-stream');
      const reader = res.body!.getReader();
      const read = async () => new TextDecoder().decode((await reader.read()).value);
      expect(await read()).toBe('event: cluster\ndata: {"version":0}\n\n');
      version = 1;
      notify('node-joined');
      expect(await read()).toBe('event: cluster\ndata: {"change":"node-joined","version":1}\n\n');
      ac.abort();
    } finally {
      await app.close();
    }
  });
});
