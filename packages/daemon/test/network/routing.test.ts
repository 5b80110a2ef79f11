import { describe, expect, it } from 'vitest';
import { Reputation } from '../../src/network/reputation.js';
import { rankCandidates, type RouteInputs, type RouteRequest } from '../../src/network/routing.js';
import { model, offerBody } from './fixtures.js';

const NOW = 1_000_000;
const req = (over: Partial<RouteRequest> = {}): RouteRequest => ({ model: 'orchard-demo', promptTokens: 100, maxTokens: 100, priceCap: null, trusted: null, ...over });
const inputs = (over: Partial<RouteInputs> = {}): RouteInputs => ({ now: NOW, rttMs: () => 20, score: () => 1, measuredTps: () => undefined, ...over });
const P = (n: number) => `12D3KooW${String(n).padStart(44, 'A')}`;

describe('routing by expected time to finish', () => {
  it('prefers the faster pod, and the breakdown adds up to the ETA', () => {
    const offers = [offerBody(P(1), { models: [model('orchard-demo', { decodeTps: 10, prefillTps: 100 })] }), offerBody(P(2), { models: [model('orchard-demo', { decodeTps: 50, prefillTps: 500 })] })];
    const { candidates } = rankCandidates(req(), offers, inputs());
    expect(candidates.map((c) => c.peer)).toEqual([P(2), P(1)]);
    const c = candidates[0];
    // 100 prompt tokens at 500/s + 100 tokens at 50/s = 2.2 s of work, plus two 20 ms round trips
    expect(c.workMs).toBeCloseTo(2200);
    expect(c.etaMs).toBeCloseTo(2240);
    expect(c.speedFrom).toBe('offered');
  });

  it('a far pod loses to a slightly slower near one; a queue counts as work ahead', () => {
    const offers = [offerBody(P(1)), offerBody(P(2), { models: [model('orchard-demo', { decodeTps: 45 })] })];
    const far = rankCandidates(req({ maxTokens: 20 }), offers, inputs({ rttMs: (p) => (p === P(1) ? 400 : 10) }));
    expect(far.candidates[0].peer).toBe(P(2));
    const queued = rankCandidates(req(), [offerBody(P(1), { load: { active: 1, queued: 2 } }), offerBody(P(2), { models: [model('orchard-demo', { decodeTps: 45 })] })], inputs());
    expect(queued.candidates[0].peer).toBe(P(2));
    expect(queued.candidates[1].queueMs).toBeCloseTo(3 * queued.candidates[1].workMs);
  });

  it('uses the speed this node measured instead of what the peer claims', () => {
    const liar = offerBody(P(1), { models: [model('orchard-demo', { decodeTps: 5000, prefillTps: 50000 })] });
    const honest = offerBody(P(2), { models: [model('orchard-demo', { decodeTps: 40 })] });
    expect(rankCandidates(req(), [liar, honest], inputs()).candidates[0].peer).toBe(P(1));
    const measured = rankCandidates(req(), [liar, honest], inputs({ measuredTps: (p) => (p === P(1) ? 8 : undefined) }));
    expect(measured.candidates[0].peer).toBe(P(2));
    expect(measured.candidates[1]).toMatchObject({ peer: P(1), decodeTps: 8, speedFrom: 'measured' });
  });

  it('a peer with failures looks slower, and below the floor it is not asked', () => {
    const rep = new Reputation();
    const offers = [offerBody(P(1), { models: [model('orchard-demo', { decodeTps: 60 })] }), offerBody(P(2))];
    rep.record(P(1), 'failed', NOW);
    const once = rankCandidates(req(), offers, inputs({ score: (p) => rep.score(p, NOW) }));
    expect(once.candidates.map((c) => c.peer)).toEqual([P(2), P(1)]);
    rep.record(P(1), 'broken-stream', NOW);
    const twice = rankCandidates(req(), offers, inputs({ score: (p) => rep.score(p, NOW) }));
    expect(twice.candidates.map((c) => c.peer)).toEqual([P(2)]);
    expect(twice.rejected).toEqual([{ peer: P(1), reason: expect.stringMatching(/^reputation 0\.25 below 0\.3/) }]);
  });

  it('filters by model, price cap, trusted peers, token limit, context and exclusions', () => {
    const offers = [
      offerBody(P(1), { pricePer1M: 5000 }),
      offerBody(P(2), { policy: { lending: 'idle', maxTokensPerJob: 50, maxConcurrentJobs: 1 } }),
      offerBody(P(3), { models: [model('orchard-demo', { contextTokens: 64 })] }),
      offerBody(P(4), { models: [model('other')] }),
      offerBody(P(5)),
      offerBody(P(6)),
    ];
    const r = rankCandidates(req({ priceCap: 2000, trusted: new Set([P(1), P(2), P(3), P(5), P(6)]), exclude: new Set([P(6)]) }), offers, inputs());
    expect(r.candidates.map((c) => c.peer)).toEqual([P(5)]);
    expect(Object.fromEntries(r.rejected.map((x) => [x.peer, x.reason]))).toEqual({
      [P(1)]: 'price 5000 over the cap 2000 credits per 1M tokens',
      [P(2)]: 'lends at most 50 tokens per job',
      [P(3)]: 'context of 64 tokens is too small',
    });
    const untrusted = rankCandidates(req({ trusted: new Set([P(9)]) }), [offerBody(P(5))], inputs());
    expect(untrusted).toEqual({ candidates: [], rejected: [{ peer: P(5), reason: 'not in the trusted list' }] });
  });

  it('a model the pod must load first pays the load penalty; expired offers are ignored', () => {
    const offers = [offerBody(P(1), { models: [model('orchard-demo', { state: 'loadable', decodeTps: null, prefillTps: null })] }), offerBody(P(2), { models: [model('orchard-demo', { decodeTps: 1 })] }), offerBody(P(3), { expiresAt: NOW })];
    const r = rankCandidates(req(), offers, inputs(), { loadPenaltyMs: 30_000, unknownTps: 5 });
    expect(r.candidates.map((c) => [c.peer, c.speedFrom])).toEqual([
      [P(1), 'assumed'],
      [P(2), 'offered'],
    ]);
    expect(r.candidates[0].loadMs).toBe(30_000);
  });

  it('ties break on price, then peer id, so every node ranks the same offers the same way', () => {
    const offers = [offerBody(P(3), { pricePer1M: 10 }), offerBody(P(2), { pricePer1M: 10 }), offerBody(P(1), { pricePer1M: 20 })];
    expect(rankCandidates(req(), offers, inputs()).candidates.map((c) => c.peer)).toEqual([P(2), P(3), P(1)]);
  });
});

describe('reputation', () => {
  it('starts at 1, falls with bad events, is diluted by served jobs and recovers with time', () => {
    const r = new Reputation({ halfLifeMs: 1000 });
    expect(r.score('x', 0)).toBe(1);
    r.record('x', 'failed', 0);
    expect(r.score('x', 0)).toBeCloseTo(0.5);
    for (let i = 0; i < 8; i++) r.record('x', 'served', 0);
    expect(r.score('x', 0)).toBeCloseTo(0.9);
    r.record('y', 'refused-receipt', 0);
    expect(r.score('y', 0)).toBeCloseTo(1 / 3);
    expect(r.score('y', 1000)).toBeCloseTo(1 / 2); // half the weight after one half-life
    expect(r.score('y', 20_000)).toBeGreaterThan(0.99);
  });

  it('a measured speed far below the offer is a mismatch; short completions say nothing', () => {
    const r = new Reputation();
    expect(r.observeSpeed('x', 'm', { tokens: 3, tps: 1 }, 100, 0)).toBe(false);
    expect(r.measuredTps('x', 'm')).toBeUndefined();
    expect(r.observeSpeed('x', 'm', { tokens: 32, tps: 60 }, 100, 0)).toBe(false);
    expect(r.observeSpeed('x', 'm', { tokens: 32, tps: 20 }, 100, 0)).toBe(true);
    expect(r.measuredTps('x', 'm')).toBe(40);
    expect(r.snapshot(0)[0]).toMatchObject({ peer: 'x', events: { 'speed-mismatch': 1 }, measuredTps: { m: 40 } });
  });
});
