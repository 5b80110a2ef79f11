/**
 * A front-end in Docker (Open WebUI, LibreChat, AnythingLLM) reaches the daemon on the host as
 * `host.docker.internal`: refused as a rebound name unless named with --api-allowed-hosts, then served
 * with the token (docs/integrations.md gives the flags). Also the dashboard's question whether this node
 * joined a network, which answers 200 either way.
 */
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApi } from '../../src/http/server.js';
import type { PodSource } from '../../src/http/cluster.js';
import { openAiError } from './openai-error.js';

const pod: PodSource = {
  cluster: () => ({ nodes: [], links: [], mode: 'open' }),
  status: () => ({ mode: 'open' }),
  remeasureCapability: async () => ({ capability: null }),
  onChange: () => () => {},
};
const log = pino({ level: 'silent' });
const DOCKER = { host: 'host.docker.internal:52415', authorization: 'Bearer tok' };

describe('host.docker.internal', () => {
  // As `orchard start --api-host 0.0.0.0 --api-token tok [--api-allowed-hosts host.docker.internal]`.
  const allowed = buildApi({ pod, token: 'tok', log, apiHost: '0.0.0.0', allowedHosts: ['host.docker.internal'] });
  const plain = buildApi({ pod, token: 'tok', log, apiHost: '0.0.0.0' });
  afterAll(async () => {
    await allowed.close();
    await plain.close();
  });

  it('is accepted once allowed: 200 with the token, 401 without it', async () => {
    expect((await allowed.inject({ method: 'GET', url: '/api/status', headers: DOCKER })).statusCode).toBe(200);
    expect((await allowed.inject({ method: 'GET', url: '/api/status', headers: { host: DOCKER.host } })).statusCode).toBe(401);
  });

  it('is refused with 403 forbidden_host when not allowed, naming the flag that allows it', async () => {
    const r = await plain.inject({ method: 'GET', url: '/api/status', headers: DOCKER });
    expect(r.statusCode).toBe(403);
    const e = openAiError.parse(r.json()).error;
    expect(e.code).toBe('forbidden_host');
    expect(e.message).toContain('--api-allowed-hosts');
  });
});

describe('GET /api/network/joined', () => {
  const app = buildApi({ pod, token: null, log });
  afterAll(() => app.close());

  it('on a node in no network: 200 with joined false and how to join, while /api/network stays 404', async () => {
    const joined = await app.inject({ method: 'GET', url: '/api/network/joined', headers: { host: '127.0.0.1:52415' } });
    expect(joined.statusCode).toBe(200);
    expect(joined.json()).toEqual({ joined: false, message: expect.stringMatching(/has not joined a network \(start it with --network NAME/) });
    expect((await app.inject({ method: 'GET', url: '/api/network', headers: { host: '127.0.0.1:52415' } })).statusCode).toBe(404);
  });
});
