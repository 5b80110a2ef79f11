/**
 * The offers this node currently believes: the newest valid offer per peer. Routing sees only live
 * ones; an expired offer stays `retainMs` longer so the map can show the node as offline. Bounded,
 * because anyone on the network can mint peer ids: past `capacity` the offer closest to expiry
 * makes room.
 */
import type { Offer, OfferBody } from './offer.js';

export interface OfferBookOptions {
  /** @default 20000 */
  capacity?: number;
  /** How long an expired offer is kept for the map. @default 600000 */
  retainMs?: number;
}

export type AddResult = 'added' | 'updated' | 'stale';

export class OfferBook {
  readonly #capacity: number;
  readonly #retainMs: number;
  /** peer -> newest offer; the peer's own offer is kept here too (routing skips it). */
  #offers = new Map<string, Offer>();
  /** When each peer's offer was first seen (the map's "online since"). */
  #firstSeen = new Map<string, number>();

  constructor(o: OfferBookOptions = {}) {
    this.#capacity = o.capacity ?? 20_000;
    this.#retainMs = o.retainMs ?? 600_000;
  }

  /** Keeps `offer` unless a newer one (higher seq) of the same peer is already here. */
  add(offer: Offer, now: number): AddResult {
    const peer = offer.body.peer;
    const prev = this.#offers.get(peer);
    if (prev && prev.body.seq >= offer.body.seq) return 'stale';
    if (!prev && this.#offers.size >= this.#capacity) this.#evictOne(now);
    this.#offers.set(peer, offer);
    if (!this.#firstSeen.has(peer)) this.#firstSeen.set(peer, now);
    return prev ? 'updated' : 'added';
  }

  #evictOne(now: number): void {
    this.prune(now);
    if (this.#offers.size < this.#capacity) return;
    let victim: string | null = null;
    let soonest = Infinity;
    for (const [peer, o] of this.#offers) {
      if (o.body.expiresAt < soonest) {
        soonest = o.body.expiresAt;
        victim = peer;
      }
    }
    if (victim) this.remove(victim);
  }

  remove(peer: string): void {
    this.#offers.delete(peer);
    this.#firstSeen.delete(peer);
  }

  /** Drops offers expired more than `retainMs` ago; returns the peers dropped. */
  prune(now: number): string[] {
    const gone: string[] = [];
    for (const [peer, o] of this.#offers) {
      if (o.body.expiresAt + this.#retainMs <= now) {
        this.remove(peer);
        gone.push(peer);
      }
    }
    return gone;
  }

  get(peer: string, now: number): Offer | undefined {
    const o = this.#offers.get(peer);
    return o && o.body.expiresAt > now ? o : undefined;
  }

  firstSeen(peer: string): number | undefined {
    return this.#firstSeen.get(peer);
  }

  /** Every offer kept, live or recently expired (the map's view). */
  all(): OfferBody[] {
    return [...this.#offers.values()].map((o) => o.body);
  }

  /** Live offers (not expired at `now`): what routing may use. */
  list(now: number): OfferBody[] {
    const out: OfferBody[] = [];
    for (const o of this.#offers.values()) if (o.body.expiresAt > now) out.push(o.body);
    return out;
  }

  get size(): number {
    return this.#offers.size;
  }
}
