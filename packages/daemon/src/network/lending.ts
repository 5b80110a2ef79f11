/**
 * Lending: whether this pod takes a job from the network right now. Off unless the owner turned it
 * on. Local requests always come first: in `idle` mode a network job is taken only while no local
 * request runs or waits, and a local request arriving preempts the network jobs; in `share` mode
 * network jobs may hold up to `share` of the pod's request slots, and local demand preempts the
 * ones beyond that. Limits on models, model size, concurrent jobs, tokens per job and each peer's
 * rate, and allow/deny lists of peers, apply in both modes. Pure: policy and counts in, a decision out.
 */
import { z } from 'zod';
import { peerIdSchema } from './signed.js';

export const lendingPolicySchema = z
  .object({
    enabled: z.boolean(),
    mode: z.enum(['idle', 'share']),
    /** Share of the pod's request slots network jobs may hold in `share` mode. */
    share: z.number().gt(0).max(1),
    /** Models lent (null: any the pod serves or holds). */
    models: z.array(z.string().min(1).max(200)).max(256).nullable(),
    /** Largest model (bytes of weights) lent; null: no limit. */
    maxModelBytes: z.number().int().positive().nullable(),
    maxConcurrentJobs: z.number().int().positive().max(1024),
    maxTokensPerJob: z.number().int().positive().max(16_777_216),
    /** Jobs one peer may start per minute. */
    perPeerJobsPerMinute: z.number().int().positive().max(100_000),
    /** Only these peers may use the pod (null: any peer of the network). */
    allow: z.array(peerIdSchema).max(10_000).nullable(),
    deny: z.array(peerIdSchema).max(10_000),
    /** The price asked, credits per 1M tokens. */
    pricePer1M: z.number().int().nonnegative().max(1e12),
  })
  .strict();
export type LendingPolicy = z.infer<typeof lendingPolicySchema>;

export const DEFAULT_LENDING: LendingPolicy = Object.freeze({
  enabled: false,
  mode: 'idle',
  share: 0.5,
  models: null,
  maxModelBytes: null,
  maxConcurrentJobs: 1,
  maxTokensPerJob: 1024,
  perPeerJobsPerMinute: 30,
  allow: null,
  deny: [],
  pricePer1M: 1000,
}) as LendingPolicy;

export interface JobAsk {
  peer: string;
  model: string;
  maxTokens: number;
  /** Weights of the model in bytes, when the pod knows them. */
  modelBytes: number | null;
}

export interface PodLoad {
  /** Local requests running or waiting on the pod. */
  localActive: number;
  /** Request slots of the pod (ready instances x sequences each takes at once); at least 1. */
  capacity: number;
  /** Network jobs this pod runs now. */
  networkActive: number;
  /** Jobs `peer` started in the last minute. */
  peerJobsLastMinute: number;
}

export type Admission = { ok: true } | { ok: false; code: string; message: string };

const refuse = (code: string, message: string): Admission => ({ ok: false, code, message });

/**
 * Request slots network jobs may hold. In `share` mode that is the lent share of the pod's slots
 * (rounded down); an idle pod still takes one job when the share rounds to none, which local demand
 * then preempts.
 */
export function networkSlots(policy: LendingPolicy, load: Pick<PodLoad, 'localActive' | 'capacity'>): number {
  if (policy.mode === 'idle') return load.localActive > 0 ? 0 : policy.maxConcurrentJobs;
  const share = Math.floor(policy.share * Math.max(1, load.capacity));
  return Math.min(policy.maxConcurrentJobs, load.localActive > 0 ? share : Math.max(1, share));
}

export function admitJob(policy: LendingPolicy, job: JobAsk, load: PodLoad): Admission {
  if (!policy.enabled) return refuse('lending_off', 'this pod does not lend its time');
  if (policy.deny.includes(job.peer) || (policy.allow && !policy.allow.includes(job.peer))) return refuse('peer_refused', 'this pod does not take jobs from you');
  if (policy.models && !policy.models.includes(job.model)) return refuse('model_not_lent', `this pod does not lend ${job.model}`);
  if (policy.maxModelBytes !== null && job.modelBytes !== null && job.modelBytes > policy.maxModelBytes) return refuse('model_too_large', `${job.model} is larger than this pod lends (${policy.maxModelBytes} bytes)`);
  if (job.maxTokens > policy.maxTokensPerJob) return refuse('too_many_tokens', `this pod lends at most ${policy.maxTokensPerJob} tokens per job; ${job.maxTokens} asked`);
  if (load.peerJobsLastMinute >= policy.perPeerJobsPerMinute) return refuse('rate_limited', `at most ${policy.perPeerJobsPerMinute} jobs per minute per peer`);
  if (policy.mode === 'idle' && load.localActive > 0) return refuse('busy', 'this pod lends only while idle, and its owner is using it');
  if (load.networkActive >= networkSlots(policy, load)) return refuse('busy', `this pod runs ${load.networkActive} network job(s), all it lends now`);
  return { ok: true };
}

/**
 * How many running network jobs must give way to local demand now: all of them in `idle` mode once a
 * local request runs or waits, those beyond the lent share in `share` mode.
 */
export function jobsToPreempt(policy: LendingPolicy, load: Pick<PodLoad, 'localActive' | 'capacity' | 'networkActive'>): number {
  if (load.localActive === 0 || load.networkActive === 0) return 0;
  return Math.max(0, load.networkActive - networkSlots(policy, load));
}

/** Starts per peer over a sliding minute (pure: the caller passes the time). */
export class RateWindow {
  #starts = new Map<string, number[]>();
  constructor(readonly windowMs = 60_000) {}

  count(peer: string, now: number): number {
    const list = (this.#starts.get(peer) ?? []).filter((t) => t > now - this.windowMs);
    if (list.length) this.#starts.set(peer, list);
    else this.#starts.delete(peer);
    return list.length;
  }

  record(peer: string, now: number): void {
    const list = this.#starts.get(peer) ?? [];
    list.push(now);
    this.#starts.set(peer, list);
  }
}
