import { describe, expect, it } from 'vitest';
import { admitJob, DEFAULT_LENDING, jobsToPreempt, lendingPolicySchema, RateWindow, type LendingPolicy, type PodLoad } from '../../src/network/lending.js';

const on = (over: Partial<LendingPolicy> = {}): LendingPolicy => ({ ...DEFAULT_LENDING, enabled: true, ...over });
const idle: PodLoad = { localActive: 0, capacity: 4, networkActive: 0, peerJobsLastMinute: 0 };
const job = { peer: 'P', model: 'orchard-demo', maxTokens: 100, modelBytes: 1000 };

describe('lending policy', () => {
  it('lends nothing unless turned on', () => {
    expect(lendingPolicySchema.parse(DEFAULT_LENDING).enabled).toBe(false);
    expect(admitJob(DEFAULT_LENDING, job, idle)).toMatchObject({ ok: false, code: 'lending_off' });
    expect(admitJob(on(), job, idle)).toEqual({ ok: true });
  });

  it('idle mode: refuses while a local request runs or waits, and a local request preempts every network job', () => {
    const p = on({ mode: 'idle', maxConcurrentJobs: 2 });
    expect(admitJob(p, job, { ...idle, localActive: 1 })).toMatchObject({ ok: false, code: 'busy', message: expect.stringContaining('only while idle') });
    expect(admitJob(p, job, { ...idle, networkActive: 1 })).toEqual({ ok: true });
    expect(admitJob(p, job, { ...idle, networkActive: 2 })).toMatchObject({ ok: false, code: 'busy' });
    expect(jobsToPreempt(p, { localActive: 0, capacity: 4, networkActive: 2 })).toBe(0);
    expect(jobsToPreempt(p, { localActive: 1, capacity: 4, networkActive: 2 })).toBe(2);
  });

  it('share mode: network jobs hold up to the share of slots, local demand preempts the rest', () => {
    const p = on({ mode: 'share', share: 0.5, maxConcurrentJobs: 8 });
    expect(admitJob(p, job, { ...idle, localActive: 1, networkActive: 1 })).toEqual({ ok: true });
    expect(admitJob(p, job, { ...idle, localActive: 1, networkActive: 2 })).toMatchObject({ ok: false, code: 'busy' });
    // an idle one-slot pod still lends its slot, and gives it back when its owner wants it
    expect(admitJob(p, job, { ...idle, capacity: 1 })).toEqual({ ok: true });
    expect(jobsToPreempt(p, { localActive: 1, capacity: 1, networkActive: 1 })).toBe(1);
    expect(jobsToPreempt(p, { localActive: 2, capacity: 4, networkActive: 3 })).toBe(1);
  });

  it('limits models, model size, tokens per job, peer rate and peers', () => {
    expect(admitJob(on({ models: ['other'] }), job, idle)).toMatchObject({ code: 'model_not_lent' });
    expect(admitJob(on({ maxModelBytes: 999 }), job, idle)).toMatchObject({ code: 'model_too_large' });
    expect(admitJob(on({ maxTokensPerJob: 99 }), job, idle)).toMatchObject({ code: 'too_many_tokens' });
    expect(admitJob(on({ perPeerJobsPerMinute: 3 }), job, { ...idle, peerJobsLastMinute: 3 })).toMatchObject({ code: 'rate_limited' });
    expect(admitJob(on({ deny: ['P'] as never }), job, idle)).toMatchObject({ code: 'peer_refused' });
    expect(admitJob(on({ allow: ['Q'] as never }), job, idle)).toMatchObject({ code: 'peer_refused' });
    expect(admitJob(on({ allow: ['P'] as never }), job, idle)).toEqual({ ok: true });
  });

  it('counts each peer\'s starts over a sliding minute', () => {
    const w = new RateWindow(60_000);
    w.record('P', 0);
    w.record('P', 30_000);
    w.record('Q', 30_000);
    expect(w.count('P', 59_999)).toBe(2);
    expect(w.count('P', 60_000)).toBe(1);
    expect(w.count('P', 90_001)).toBe(0);
    expect(w.count('Q', 60_000)).toBe(1);
  });
});
