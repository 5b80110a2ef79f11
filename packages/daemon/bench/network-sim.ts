/**
 * An in-process model of a large network, driving the real offer and routing code: N pods with their
 * own Ed25519 keys sign real offers; a gossip mesh of degree D (what gossipsub keeps per topic)
 * carries them hop by hop in virtual time, every receiving node running the real `verifyOffer` and
 * `OfferBook.add` before forwarding (the verification's measured CPU time is charged to the hop);
 * any node can then route with the real `rankCandidates` over everything it heard.
 *
 * What it does not model: libp2p's own framing and flow control, gossipsub's IHAVE/IWANT repair and
 * scoring, packet loss, NAT (the relays) and CPU contention between simulated nodes.
 */
import { generateKeyPair } from '@libp2p/crypto/keys';
import { Prng } from '@orchard/engine/testing';
import { OfferBook } from '../src/network/offer-book.js';
import { signOffer, verifyOffer, type Offer, type OfferBody } from '../src/network/offer.js';
import { rankCandidates, type Route } from '../src/network/routing.js';
import { signerFromKey, type Signer } from '../src/network/signed.js';

export interface SimOptions {
  nodes: number;
  /** Mesh degree (gossipsub's D). @default 8 */
  degree?: number;
  /** One-way link latency is drawn log-normally around this median, ms. @default 40 */
  medianLatencyMs?: number;
  seed?: number;
  network?: string;
}

/** A repeatable uniform [0, 1) source (the engine's seeded PRNG). */
export function prng(seed: number): () => number {
  const p = new Prng(seed);
  return () => p.next();
}

const MODELS = ['llama-3.1-8b', 'qwen2.5-7b', 'mistral-7b', 'llama-3.1-70b', 'qwen3-32b', 'deepseek-v3', 'gemma-2-9b', 'phi-4'];

export interface SimNode {
  signer: Signer;
  book: OfferBook;
  /** Mesh neighbours: index and one-way latency, ms. */
  links: { to: number; ms: number }[];
}

export class NetworkSim {
  readonly network: string;
  readonly nodes: SimNode[];
  readonly #rand: () => number;
  readonly now = 1_700_000_000_000;

  private constructor(network: string, nodes: SimNode[], rand: () => number) {
    this.network = network;
    this.nodes = nodes;
    this.#rand = rand;
  }

  static async create(o: SimOptions): Promise<NetworkSim> {
    const rand = prng(o.seed ?? 1);
    const degree = Math.min(o.degree ?? 8, o.nodes - 1);
    const median = o.medianLatencyMs ?? 40;
    const nodes: SimNode[] = [];
    for (let i = 0; i < o.nodes; i++) nodes.push({ signer: signerFromKey(await generateKeyPair('Ed25519')), book: new OfferBook({ capacity: Math.max(20_000, o.nodes * 2) }), links: [] });
    // A random graph where every node has at least `degree` neighbours: a ring (connected) plus random chords.
    const linked = (a: number, b: number) => nodes[a].links.some((l) => l.to === b);
    const link = (a: number, b: number) => {
      if (a === b || linked(a, b)) return;
      // log-normal around the median: most links are regional, a few cross an ocean
      const ms = median * Math.exp(0.6 * gauss(rand));
      nodes[a].links.push({ to: b, ms });
      nodes[b].links.push({ to: a, ms });
    };
    for (let i = 0; i < o.nodes; i++) link(i, (i + 1) % o.nodes);
    for (let i = 0; i < o.nodes; i++) while (nodes[i].links.length < degree) link(i, Math.floor(rand() * o.nodes));
    return new NetworkSim(o.network ?? 'sim', nodes, rand);
  }

  /** A plausible offer of node `i`: a few models at speeds spread over two orders of magnitude. */
  offerBody(i: number): OfferBody {
    const r = this.#rand;
    const models = MODELS.filter(() => r() < 0.35).slice(0, 4);
    if (!models.length) models.push(MODELS[i % MODELS.length]);
    return {
      v: 1,
      network: this.network,
      peer: this.nodes[i].signer.peerId,
      seq: 1,
      issuedAt: this.now,
      expiresAt: this.now + 60_000,
      pod: { name: `pod-${i}`, nodes: [{ name: `mac-${i}`, chip: 'Apple M4 Max', memoryBytes: 128 * 2 ** 30 }] },
      region: { label: 'somewhere', lat: Math.round(r() * 140 - 60), lon: Math.round(r() * 360 - 180) },
      models: models.map((name) => ({ name, state: r() < 0.7 ? 'serving' : 'loadable', contextTokens: 8192, decodeTps: 5 + r() * 120, prefillTps: 50 + r() * 2000 })),
      load: { active: Math.floor(r() * 3), queued: Math.floor(r() * 4) },
      pricePer1M: Math.floor(r() * 5000),
      policy: { lending: r() < 0.5 ? 'idle' : 'share', maxTokensPerJob: 4096, maxConcurrentJobs: 1 + Math.floor(r() * 4) },
    };
  }

  async signAll(): Promise<Offer[]> {
    return Promise.all(this.nodes.map((n, i) => signOffer(n.signer, this.offerBody(i))));
  }

  /**
   * Floods one offer from `origin` over the mesh in virtual time. Each node verifies it (for real; the
   * measured time delays its forwarding) the first time it arrives and forwards it to its other
   * neighbours. Returns when each node first held it (ms after publishing) and messages sent.
   */
  async propagate(offer: Offer, origin: number): Promise<{ reachedAt: Float64Array; messages: number; verifyMs: number[] }> {
    const reachedAt = new Float64Array(this.nodes.length).fill(Infinity);
    const verifyMs: number[] = [];
    reachedAt[origin] = 0;
    this.nodes[origin].book.add(offer, this.now);
    const queue = new EventQueue();
    for (const l of this.nodes[origin].links) queue.push({ at: l.ms, to: l.to, from: origin });
    let messages = queue.size;
    const wire = JSON.parse(JSON.stringify(offer.signed));
    while (queue.size) {
      const ev = queue.pop();
      if (reachedAt[ev.to] <= ev.at) continue; // a duplicate: gossipsub drops it by message id
      const t0 = performance.now();
      const checked = await verifyOffer(wire, { network: this.network, now: this.now, from: offer.body.peer });
      if (!checked.ok) throw new Error(`simulated offer rejected: ${checked.reason}`);
      this.nodes[ev.to].book.add(checked.offer, this.now);
      const spent = performance.now() - t0;
      verifyMs.push(spent);
      reachedAt[ev.to] = ev.at + spent;
      for (const l of this.nodes[ev.to].links) {
        if (l.to === ev.from) continue;
        queue.push({ at: reachedAt[ev.to] + l.ms, to: l.to, from: ev.to });
        messages++;
      }
    }
    return { reachedAt, messages, verifyMs };
  }

  /** The routing decision of node `at` for `model` over everything in its book (RTT from the mesh-path latency). */
  route(at: number, model: string, rttMs: (peer: string) => number | undefined): Route {
    return rankCandidates({ model, promptTokens: 400, maxTokens: 300, priceCap: null, trusted: null, exclude: new Set([this.nodes[at].signer.peerId]) }, this.nodes[at].book.list(this.now), {
      now: this.now,
      rttMs,
      score: () => 1,
      measuredTps: () => undefined,
    });
  }

  static get models(): readonly string[] {
    return MODELS;
  }
}

interface Arrival {
  at: number;
  to: number;
  from: number;
}

/** Arrivals by time: a binary min-heap. */
class EventQueue {
  #h: Arrival[] = [];

  get size(): number {
    return this.#h.length;
  }

  push(e: Arrival): void {
    const h = this.#h;
    h.push(e);
    for (let i = h.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (h[p].at <= h[i].at) break;
      [h[p], h[i]] = [h[i], h[p]];
      i = p;
    }
  }

  pop(): Arrival {
    const h = this.#h;
    const top = h[0];
    const last = h.pop()!;
    if (h.length) {
      h[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && h[l].at < h[m].at) m = l;
        if (r < h.length && h[r].at < h[m].at) m = r;
        if (m === i) break;
        [h[m], h[i]] = [h[i], h[m]];
        i = m;
      }
    }
    return top;
  }
}

function gauss(r: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
}

export function quantile(values: ArrayLike<number>, q: number): number {
  const sorted = Array.from(values).sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}
