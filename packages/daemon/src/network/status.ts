/**
 * The network as this node sees it, for `orchard network status`, `GET /api/network` and the
 * dashboard's map: every node and pod whose offer it heard (online while the offer is live), what
 * they serve, where they say they are, and the tokens each served according to the receipts seen.
 * Pure: assembled from the offer book, ledger, reputation and measured RTTs.
 */
import type { Balance } from './ledger.js';
import type { LendingPolicy } from './lending.js';
import type { OfferBody, Region } from './offer.js';

export interface NetworkNodeView {
  peer: string;
  self: boolean;
  online: boolean;
  pod: string;
  nodes: OfferBody['pod']['nodes'];
  region: Region | null;
  models: { name: string; state: 'serving' | 'loadable'; decodeTps: number | null }[];
  lending: OfferBody['policy']['lending'] | null;
  pricePer1M: number;
  load: OfferBody['load'];
  firstSeen: number | null;
  lastOffer: number;
  /** From receipts this node has seen. */
  tokensServed: number;
  jobsServed: number;
  reputation: number;
  rttMs: number | null;
  /** How this node is connected to it now, if at all. */
  path: 'direct' | 'relayed' | null;
}

export interface JobRecord {
  job: string;
  role: 'requested' | 'served';
  peer: string;
  model: string;
  at: number;
  ok: boolean;
  tokens: number;
  charge: number;
  /** Path of the connection the job ran on. */
  path: 'direct' | 'relayed' | null;
  /** How the requester learnt the server's address (DHT lookup or already known). */
  found: 'dht' | 'known' | null;
  error: string | null;
  /** Pods asked before this one and why each did not take it. */
  tried: { peer: string; code: string }[];
}

export interface NetworkStatus {
  network: string;
  self: { peer: string; addresses: string[]; reachable: boolean | null; relayReservations: string[] };
  routing: { enabled: boolean; priceCap: number | null; trusted: string[] | null };
  lending: LendingPolicy & { localActive: number; running: number; served: number; refused: number; preempted: number };
  nodes: NetworkNodeView[];
  balances: Balance[];
  receipts: number;
  jobs: JobRecord[];
}

export interface StatusInputs {
  self: string;
  now: number;
  offers: OfferBody[];
  firstSeen(peer: string): number | undefined;
  balances: Balance[];
  reputation(peer: string): number;
  rttMs(peer: string): number | undefined;
  path(peer: string): 'direct' | 'relayed' | null;
}

export function networkNodes(i: StatusInputs): NetworkNodeView[] {
  const served = new Map(i.balances.map((b) => [b.peer, b]));
  return i.offers
    .map((o) => ({
      peer: o.peer,
      self: o.peer === i.self,
      online: o.expiresAt > i.now,
      pod: o.pod.name,
      nodes: o.pod.nodes,
      region: o.region,
      models: o.models.map((m) => ({ name: m.name, state: m.state, decodeTps: m.decodeTps })),
      lending: o.models.length ? o.policy.lending : null,
      pricePer1M: o.pricePer1M,
      load: o.load,
      firstSeen: i.firstSeen(o.peer) ?? null,
      lastOffer: o.issuedAt,
      tokensServed: served.get(o.peer)?.tokensServed ?? 0,
      jobsServed: served.get(o.peer)?.jobsServed ?? 0,
      reputation: i.reputation(o.peer),
      rttMs: i.rttMs(o.peer) ?? null,
      path: i.path(o.peer),
    }))
    .sort((a, b) => Number(b.self) - Number(a.self) || Number(b.online) - Number(a.online) || a.pod.localeCompare(b.pod) || a.peer.localeCompare(b.peer));
}
