/**
 * What this node has seen of each peer, kept locally and never shared: jobs that failed, streams
 * that broke, offers far from the speed actually measured, receipts refused. A peer starts at 1
 * (the benefit of the doubt) and drops as bad events outweigh good ones; old events fade with a
 * half-life, so a peer that mended its ways recovers.
 */

export type ReputationEvent = 'served' | 'failed' | 'broken-stream' | 'speed-mismatch' | 'refused-receipt' | 'bad-result';

/** How much each event weighs; `served` counts on the good side, the rest on the bad. */
const WEIGHT: Record<ReputationEvent, number> = {
  served: 1,
  failed: 1,
  'broken-stream': 2,
  'speed-mismatch': 1.5,
  'refused-receipt': 2,
  'bad-result': 3,
};

export interface ReputationOptions {
  /** Events lose half their weight after this long. @default 1 hour */
  halfLifeMs?: number;
  /** A measured decode speed below this share of the offered one is a mismatch. @default 0.5 */
  speedTolerance?: number;
  /** Completions shorter than this say nothing about speed. @default 8 */
  minTokensForSpeed?: number;
}

interface Record_ {
  good: number;
  bad: number;
  at: number;
  events: Partial<Record<ReputationEvent, number>>;
  /** model -> measured decode tokens/s (moving average). */
  speed: Map<string, number>;
}

export interface PeerReputation {
  peer: string;
  score: number;
  events: Partial<Record<ReputationEvent, number>>;
  measuredTps: Record<string, number>;
}

export class Reputation {
  readonly #halfLife: number;
  readonly #tolerance: number;
  readonly #minTokens: number;
  #peers = new Map<string, Record_>();

  constructor(o: ReputationOptions = {}) {
    this.#halfLife = o.halfLifeMs ?? 3_600_000;
    this.#tolerance = o.speedTolerance ?? 0.5;
    this.#minTokens = o.minTokensForSpeed ?? 8;
  }

  #entry(peer: string, now: number): Record_ {
    let r = this.#peers.get(peer);
    if (!r) {
      r = { good: 0, bad: 0, at: now, events: {}, speed: new Map() };
      this.#peers.set(peer, r);
    }
    const fade = 0.5 ** (Math.max(0, now - r.at) / this.#halfLife);
    r.good *= fade;
    r.bad *= fade;
    r.at = Math.max(r.at, now);
    return r;
  }

  record(peer: string, event: ReputationEvent, now: number): void {
    const r = this.#entry(peer, now);
    if (event === 'served') r.good += WEIGHT.served;
    else r.bad += WEIGHT[event];
    r.events[event] = (r.events[event] ?? 0) + 1;
  }

  /** 1 for a peer with no bad record, falling towards 0 as bad events outweigh good ones. */
  score(peer: string, now: number): number {
    const r = this.#peers.get(peer);
    if (!r) return 1;
    const fade = 0.5 ** (Math.max(0, now - r.at) / this.#halfLife);
    const good = r.good * fade;
    const bad = r.bad * fade;
    return (1 + good) / (1 + good + bad);
  }

  /**
   * A finished job's measured decode speed: remembered for routing, and a mismatch is recorded when
   * it falls far below what the peer offered. Returns true when it was a mismatch.
   */
  observeSpeed(peer: string, model: string, measured: { tokens: number; tps: number | null }, offeredTps: number | null, now: number): boolean {
    if (measured.tps === null || !Number.isFinite(measured.tps) || measured.tps <= 0 || measured.tokens < this.#minTokens) return false;
    const r = this.#entry(peer, now);
    const prev = r.speed.get(model);
    r.speed.set(model, prev === undefined ? measured.tps : 0.5 * prev + 0.5 * measured.tps);
    if (offeredTps !== null && measured.tps < offeredTps * this.#tolerance) {
      this.record(peer, 'speed-mismatch', now);
      return true;
    }
    return false;
  }

  /** The decode speed this node measured from `peer` for `model`, if any. */
  measuredTps(peer: string, model: string): number | undefined {
    return this.#peers.get(peer)?.speed.get(model);
  }

  snapshot(now: number): PeerReputation[] {
    return [...this.#peers].map(([peer, r]) => ({ peer, score: this.score(peer, now), events: { ...r.events }, measuredTps: Object.fromEntries(r.speed) }));
  }
}
