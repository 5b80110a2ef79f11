/**
 * Which pod gets a job: the one expected to finish it first. For each offer of the model
 *
 *   eta = (2 x RTT + queue + load + prefill + decode) / reputation
 *
 * where RTT is libp2p ping's (opening the job stream and the first answer each cost a round trip;
 * later tokens stream while the pod decodes), decode speed is what this node measured from that
 * peer if it has served us before, else what the peer offered, queue is the jobs ahead of ours at
 * that speed, and load is a penalty for a model the pod holds but has not loaded. Dividing by the
 * reputation score makes a peer that failed us look slower, and below `minScore` it is not asked at
 * all. Pure: offers, measurements and scores in, an ordered list out.
 */
import { offeredModel, type OfferBody } from './offer.js';

export interface RouteRequest {
  model: string;
  /** Estimated prompt length in tokens (the requester has no tokenizer for a model it lacks). */
  promptTokens: number;
  maxTokens: number;
  /** Highest price accepted, credits per 1M tokens; null = any. */
  priceCap: number | null;
  /** Only these peers (the requester's trusted list); null = any. */
  trusted: ReadonlySet<string> | null;
  /** Peers not to ask (this node, candidates that already failed this request). */
  exclude?: ReadonlySet<string>;
}

export interface RouteInputs {
  now: number;
  rttMs(peer: string): number | undefined;
  score(peer: string): number;
  measuredTps(peer: string, model: string): number | undefined;
}

export interface RouteOptions {
  /** RTT assumed for a peer not yet pinged. @default 250 */
  unknownRttMs?: number;
  /** Decode speed assumed when neither the offer nor our measurements give one. @default 5 */
  unknownTps?: number;
  /** Time assumed to load a model that is offered as loadable. @default 30000 */
  loadPenaltyMs?: number;
  /** Peers whose reputation fell below this are skipped. @default 0.3 */
  minScore?: number;
}

export interface Candidate {
  peer: string;
  etaMs: number;
  decodeTps: number;
  /** Where the speed came from: our own measurement, the offer, or the default guess. */
  speedFrom: 'measured' | 'offered' | 'assumed';
  rttMs: number;
  queueMs: number;
  loadMs: number;
  workMs: number;
  score: number;
  pricePer1M: number;
}

export interface Rejection {
  peer: string;
  reason: string;
}

export interface Route {
  candidates: Candidate[];
  rejected: Rejection[];
}

export function rankCandidates(req: RouteRequest, offers: Iterable<OfferBody>, inputs: RouteInputs, o: RouteOptions = {}): Route {
  const unknownRtt = o.unknownRttMs ?? 250;
  const unknownTps = o.unknownTps ?? 5;
  const loadPenalty = o.loadPenaltyMs ?? 30_000;
  const minScore = o.minScore ?? 0.3;
  const candidates: Candidate[] = [];
  const rejected: Rejection[] = [];
  for (const offer of offers) {
    const peer = offer.peer;
    if (offer.expiresAt <= inputs.now || req.exclude?.has(peer)) continue;
    const m = offeredModel(offer, req.model);
    if (!m) continue;
    const reject = (reason: string) => rejected.push({ peer, reason });
    if (req.trusted && !req.trusted.has(peer)) {
      reject('not in the trusted list');
      continue;
    }
    if (req.priceCap !== null && offer.pricePer1M > req.priceCap) {
      reject(`price ${offer.pricePer1M} over the cap ${req.priceCap} credits per 1M tokens`);
      continue;
    }
    if (req.maxTokens > offer.policy.maxTokensPerJob) {
      reject(`lends at most ${offer.policy.maxTokensPerJob} tokens per job`);
      continue;
    }
    if (req.promptTokens >= m.contextTokens) {
      reject(`context of ${m.contextTokens} tokens is too small`);
      continue;
    }
    const score = inputs.score(peer);
    if (score < minScore) {
      reject(`reputation ${score.toFixed(2)} below ${minScore}`);
      continue;
    }
    const measured = inputs.measuredTps(peer, req.model);
    const decodeTps = measured ?? m.decodeTps ?? unknownTps;
    const speedFrom = measured !== undefined ? 'measured' : m.decodeTps !== null ? 'offered' : 'assumed';
    // Prefill is at least as fast as decode; an offered prefill figure is discounted by how far the
    // offered decode speed proved optimistic.
    const honesty = measured !== undefined && m.decodeTps !== null ? Math.min(1, measured / m.decodeTps) : 1;
    const prefillTps = Math.max(decodeTps, (m.prefillTps ?? 0) * honesty);
    const workMs = (1000 * req.promptTokens) / prefillTps + (1000 * req.maxTokens) / decodeTps;
    const queueMs = ((offer.load.active + offer.load.queued) * workMs) / offer.policy.maxConcurrentJobs;
    const loadMs = m.state === 'loadable' ? loadPenalty : 0;
    const rttMs = inputs.rttMs(peer) ?? unknownRtt;
    const etaMs = (2 * rttMs + queueMs + loadMs + workMs) / score;
    candidates.push({ peer, etaMs, decodeTps, speedFrom, rttMs, queueMs, loadMs, workMs, score, pricePer1M: offer.pricePer1M });
  }
  candidates.sort((a, b) => a.etaMs - b.etaMs || a.pricePer1M - b.pricePer1M || (a.peer < b.peer ? -1 : a.peer > b.peer ? 1 : 0));
  return { candidates, rejected };
}

/** A prompt's token count before tokenizing: about four characters per token in English text. */
export function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}
