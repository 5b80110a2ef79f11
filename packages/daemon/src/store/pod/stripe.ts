/**
 * Which chunk each link fetches next: the striping of one file's missing chunks over every link to
 * every peer that has them (and the hub, for chunks granted to this node). Pure: the caller moves
 * the bytes and reports completions with their times.
 *
 * Links pull work, so a fast link simply comes back for more; on top of that each link keeps only
 * as many requests in flight as its measured rate fills in QUEUE_SECONDS, so a slow link never holds
 * a long queue, and at the end an idle fast link re-requests a chunk still queued on a much slower
 * one (the first copy to arrive wins).
 */

/** How much work, in seconds of a link's measured rate, it may have requested ahead. */
const QUEUE_SECONDS = 0.05;
const MAX_DEPTH = 16;
/** Requests in flight on a link whose rate is not measured yet. */
const INITIAL_DEPTH = 2;
/** Weight of the newest sample in a link's rate. */
const RATE_ALPHA = 0.3;

export interface LinkInfo {
  id: string;
  peer: string;
  /** Measured bytes per second (0 until the first chunk arrives). */
  rate: number;
  /** Chunks requested on this link, oldest first. */
  inflight: number[];
  /** Bytes received over this link. */
  bytes: number;
}

interface Link extends LinkInfo {
  lastDoneAt: number;
  sentAt: Map<number, number>;
}

export class Stripe {
  readonly chunkSize: number;
  /** Chunks still wanted (not yet delivered). */
  readonly #wanted: Set<number>;
  /** Wanted chunks not requested on any link. */
  readonly #pending: Set<number>;
  /** chunk → peer → whether the peer has it verified now (false: it is fetching it). */
  readonly #sources = new Map<number, Map<string, boolean>>();
  readonly #hub = new Set<number>();
  readonly #links = new Map<string, Link>();
  /** chunk → links it is requested on. */
  readonly #assigned = new Map<number, Set<string>>();

  constructor(chunks: Iterable<number>, chunkSize: number) {
    this.chunkSize = chunkSize;
    this.#wanted = new Set(chunks);
    this.#pending = new Set(this.#wanted);
  }

  get remaining(): number {
    return this.#wanted.size;
  }

  wanted(): number[] {
    return [...this.#wanted].sort((a, b) => a - b);
  }

  /** `peer` has `chunk` (ready) or is fetching it (not ready: its server answers once it has it). */
  addSource(chunk: number, peer: string, ready: boolean): void {
    if (!this.#wanted.has(chunk)) return;
    const m = this.#sources.get(chunk) ?? new Map<string, boolean>();
    m.set(peer, ready || m.get(peer) === true);
    this.#sources.set(chunk, m);
  }

  /** This node may fetch `chunks` from the hub. */
  grantHub(chunks: Iterable<number>): void {
    for (const c of chunks) if (this.#wanted.has(c)) this.#hub.add(c);
  }

  /** Forgets `peer` as a source (it failed or served bad bytes) and returns its links' requests to the queue. */
  dropPeer(peer: string): void {
    for (const link of [...this.#links.values()]) if (link.peer === peer) this.removeLink(link.id);
    for (const m of this.#sources.values()) m.delete(peer);
  }

  /** A peer does not have `chunk` after all (its server said so). */
  dropSource(chunk: number, peer: string): void {
    this.#sources.get(chunk)?.delete(peer);
  }

  /** Wanted chunks nobody can deliver: no peer source, not granted from the hub, not in flight. */
  orphans(): number[] {
    const out: number[] = [];
    for (const c of this.#pending) if (!this.#hub.has(c) && !(this.#sources.get(c)?.size ?? 0)) out.push(c);
    return out.sort((a, b) => a - b);
  }

  addLink(id: string, peer: string): void {
    if (!this.#links.has(id)) this.#links.set(id, { id, peer, rate: 0, inflight: [], bytes: 0, lastDoneAt: 0, sentAt: new Map() });
  }

  removeLink(id: string): void {
    const link = this.#links.get(id);
    if (!link) return;
    this.#links.delete(id);
    for (const c of link.inflight) this.#unassign(c, id);
  }

  links(): LinkInfo[] {
    return [...this.#links.values()].map(({ id, peer, rate, inflight, bytes }) => ({ id, peer, rate, inflight: [...inflight], bytes }));
  }

  /** Requests a link may have in flight: what its rate moves in QUEUE_SECONDS, at least one. */
  depth(linkId: string): number {
    const link = this.#links.get(linkId);
    if (!link) return 0;
    if (link.rate === 0) return INITIAL_DEPTH;
    return Math.max(1, Math.min(MAX_DEPTH, Math.round((link.rate * QUEUE_SECONDS) / this.chunkSize)));
  }

  /** The next chunk for a peer link, or undefined; the caller requests it now (`now` in ms). */
  next(linkId: string, now: number): number | undefined {
    const link = this.#links.get(linkId);
    if (!link || link.inflight.length >= this.depth(linkId)) return undefined;
    let best: number | undefined;
    let bestScore = Infinity;
    for (const c of this.#pending) {
      const ready = this.#sources.get(c)?.get(link.peer);
      if (ready === undefined) continue;
      // Chunks the peer has now before ones it is still fetching; then the rarest; then in order.
      const score = (ready ? 0 : 1e9) + (this.#sources.get(c)!.size + (this.#hub.has(c) ? 1 : 0)) * 1e7 + c;
      if (score < bestScore) {
        bestScore = score;
        best = c;
      }
    }
    best ??= this.#endgame(link);
    if (best !== undefined) this.#assign(best, link, now);
    return best;
  }

  /** The next run of consecutive hub-granted chunks (at most `maxRun`), as [first, end). */
  nextHubRun(linkId: string, maxRun: number, now: number): [number, number] | undefined {
    const link = this.#links.get(linkId);
    if (!link) return undefined;
    let first: number | undefined;
    for (const c of this.#pending) if (this.#hub.has(c) && (first === undefined || c < first)) first = c;
    if (first === undefined) return undefined;
    let end = first;
    while (end - first < maxRun && this.#pending.has(end) && this.#hub.has(end)) this.#assign(end++, link, now);
    return [first, end];
  }

  /**
   * `chunk` arrived intact over `linkId` (`bytes` long, at `now` ms). Returns false for a copy that
   * lost the end-game race (the chunk was already delivered).
   */
  delivered(chunk: number, linkId: string, bytes: number, now: number): boolean {
    const link = this.#links.get(linkId);
    const sentAt = link?.sentAt.get(chunk);
    if (link && sentAt !== undefined) {
      // Requests are pipelined: a delivery measures the time since the previous one (or since its
      // own request, when the link was idle).
      const seconds = Math.max(1e-4, (now - Math.max(link.lastDoneAt, sentAt)) / 1000);
      link.rate = link.rate === 0 ? bytes / seconds : (1 - RATE_ALPHA) * link.rate + RATE_ALPHA * (bytes / seconds);
      link.lastDoneAt = now;
      this.#unassign(chunk, linkId, false);
    }
    if (link) link.bytes += bytes;
    if (!this.#wanted.has(chunk)) return false;
    this.#wanted.delete(chunk);
    this.#pending.delete(chunk);
    this.#sources.delete(chunk);
    this.#hub.delete(chunk);
    for (const other of this.#assigned.get(chunk) ?? []) this.#unassign(chunk, other, false);
    this.#assigned.delete(chunk);
    return true;
  }

  /** The request for `chunk` on `linkId` failed; the chunk goes back to the queue. */
  failed(chunk: number, linkId: string): void {
    this.#unassign(chunk, linkId);
  }

  #assign(chunk: number, link: Link, now: number): void {
    this.#pending.delete(chunk);
    link.inflight.push(chunk);
    link.sentAt.set(chunk, now);
    const on = this.#assigned.get(chunk) ?? new Set<string>();
    on.add(link.id);
    this.#assigned.set(chunk, on);
  }

  #unassign(chunk: number, linkId: string, requeue = true): void {
    const link = this.#links.get(linkId);
    if (link) {
      const k = link.inflight.indexOf(chunk);
      if (k >= 0) link.inflight.splice(k, 1);
      link.sentAt.delete(chunk);
      // An idle link's next completion measures from its next request, not from its last delivery.
      if (link.inflight.length === 0) link.lastDoneAt = 0;
    }
    const on = this.#assigned.get(chunk);
    on?.delete(linkId);
    if (requeue && this.#wanted.has(chunk) && !on?.size) this.#pending.add(chunk);
  }

  /** Nothing left to start: take over a chunk queued behind much slower work on another link. */
  #endgame(link: Link): number | undefined {
    const mine = link.rate > 0 ? this.chunkSize / link.rate : Infinity;
    let best: number | undefined;
    let worst = 2 * mine;
    for (const other of this.#links.values()) {
      if (other === link) continue;
      other.inflight.forEach((c, position) => {
        if ((this.#assigned.get(c)?.size ?? 0) > 1 || !this.#sources.get(c)?.get(link.peer)) return;
        const wait = other.rate > 0 ? ((position + 1) * this.chunkSize) / other.rate : Infinity;
        if (wait > worst) {
          worst = wait;
          best = c;
        }
      });
    }
    return best;
  }
}
