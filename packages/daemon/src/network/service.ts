/**
 * A pod's membership of a wide-area network: the wide node, its offers, the jobs it sends out and
 * the ones it lends its pod to, receipts and balances. The pod reaches it only through `PodPort`
 * (run a request on this pod, what it serves, how busy it is) and the network reaches the pod only
 * through `/orchard/job/1`: no pod topic, data plane or HTTP endpoint is on the wide node.
 */
import type { PrivateKey, Stream } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import { multiaddr } from '@multiformats/multiaddr';
import { isPrivate } from '@libp2p/utils';
import type { Logger } from 'pino';
import { ServeError } from '../requests/errors.js';
import type { ServeEvent, ServeRequest } from '../requests/request.js';
import { dispatchJob } from './dispatch.js';
import { JOB_PROTOCOL } from './job-frames.js';
import { JobFailure, requestJob, serveJob, type JobOutcome } from './job-protocol.js';
import { Lender } from './lender.js';
import type { LendingPolicy } from './lending.js';
import { NetworkObserver } from './observer.js';
import { signOffer, type OfferBody, type OfferModel, type Region } from './offer.js';
import type { VerifiedReceipt } from './receipts.js';
import { NetworkRecords } from './records.js';
import { Reputation } from './reputation.js';
import { estimateTokens, rankCandidates, type RouteRequest } from './routing.js';
import { signerFromKey, type Signer } from './signed.js';
import { networkNodes, type JobRecord, type NetworkStatus } from './status.js';
import { connectionPath, createWideNode, offersTopic, type WideNode } from './wide-node.js';

export interface NetworkSettings {
  name: string;
  listen: string[];
  announce: string[];
  bootstrap: string[];
  privateAddresses: boolean;
  region: Region | null;
  /** Send requests for models this pod does not serve to the network. */
  route: boolean;
  /** Highest price paid, credits per 1M tokens (null: any). */
  priceCap: number | null;
  /** Only these peers get this node's jobs (null: any). */
  trusted: string[] | null;
  /** @default 10000 */
  offerIntervalMs?: number;
  /** @default 60000 */
  offerTtlMs?: number;
}

export interface PodModel extends OfferModel {
  /** Bytes of weights, when known (for the lending policy's size limit). */
  bytes: number | null;
}

/** What the network side may ask of the pod. */
export interface PodPort {
  name: string;
  /** Runs a request on this pod's own instances (throws ServeError). */
  run(model: string, req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal): Promise<void>;
  models(): PodModel[];
  nodes(): OfferBody['pod']['nodes'];
  /** Requests on the pod now, and its request slots. */
  load(): { active: number; queued: number; capacity: number };
  /** Only the pod's coordinator publishes the pod's offer. */
  speaksForPod(): boolean;
  /** Called before each offer: re-read what `models()` answers from. */
  refresh?(): Promise<void>;
}

const DEFAULT_MAX_TOKENS = 256;
const MAX_JOBS_KEPT = 200;

export class NetworkService {
  readonly settings: NetworkSettings;
  readonly node: WideNode;
  readonly signer: Signer;
  readonly records: NetworkRecords;
  readonly #pod: PodPort;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #observer: NetworkObserver;
  readonly #reputation = new Reputation();
  readonly #lender: Lender;
  #rtt = new Map<string, number>();
  /**
   * Pings in flight, one per peer: libp2p allows one outbound ping stream per connection and refuses
   * a second with TooManyOutboundProtocolStreams. In one internet-test run a job stream to the same
   * peer died with that very error (the periodic ping meeting a routing ping); how it reached the job
   * stream was not reproduced in isolation, but one ping per peer at a time never raises it.
   */
  #pinging = new Map<string, Promise<void>>();
  /** Peers whose address this node learnt from a DHT lookup (reported per job). */
  #foundVia = new Map<string, 'dht'>();
  /** Peers this node has been connected to (their addresses came from the peers themselves). */
  #metBefore = new Set<string>();
  /** requester/job -> when claimed; tickets older than the clock-skew window are refused anyway. */
  #claimed = new Map<string, number>();
  #jobs: JobRecord[] = [];
  #seq = 0;
  #timers: NodeJS.Timeout[] = [];
  #stopped = false;

  private constructor(init: { settings: NetworkSettings; node: WideNode; signer: Signer; pod: PodPort; log: Logger; now: () => number; records: NetworkRecords; lending: LendingPolicy }) {
    this.settings = init.settings;
    this.node = init.node;
    this.signer = init.signer;
    this.#pod = init.pod;
    this.#log = init.log;
    this.#now = init.now;
    this.records = init.records;
    this.#observer = new NetworkObserver(init.node, init.settings.name, init.log, init.now);
    this.#lender = new Lender(init.lending, {
      now: init.now,
      capacity: () => this.#pod.load().capacity,
      modelBytes: (m) => this.#pod.models().find((x) => x.name === m)?.bytes ?? null,
      onPreempt: (j) => this.#log.info({ job: j.job, peer: j.peer, model: j.model }, 'network job preempted for local work'),
    });
  }

  static async start(o: { key: PrivateKey; settings: NetworkSettings; pod: PodPort; dataDir: string; log: Logger; now?: () => number }): Promise<NetworkService> {
    const records = new NetworkRecords(o.dataDir, o.settings.name);
    const lending = records.loadLending();
    const s = o.settings;
    const node = await createWideNode({ privateKey: o.key, network: s.name, listen: s.listen, announce: s.announce, bootstrap: s.bootstrap, role: 'member', privateAddresses: s.privateAddresses });
    const svc = new NetworkService({ settings: s, node, signer: signerFromKey(o.key), pod: o.pod, log: o.log, now: o.now ?? Date.now, records, lending });
    const { receipts, skipped } = await records.loadReceipts();
    for (const r of receipts) svc.#observer.ledger.add(r);
    if (skipped) o.log.warn({ file: records.receiptsFile, skipped }, 'receipts that no longer verify were skipped');
    try {
      await svc.#start();
    } catch (err) {
      await svc.stop();
      throw err;
    }
    return svc;
  }

  async #start(): Promise<void> {
    this.#observer.attach();
    this.node.addEventListener('peer:connect', (evt) => void this.#metBefore.add(evt.detail.toString()));
    await this.node.handle(JOB_PROTOCOL, (stream, connection) => this.#serve(stream, connection.remotePeer.toString()), { runOnLimitedConnection: true, maxInboundStreams: 64 });
    await this.node.start();
    this.#log.info({ network: this.settings.name, peerId: this.signer.peerId, addresses: this.node.getMultiaddrs().map(String) }, 'joined network');
    const every = (ms: number, f: () => unknown) => this.#timers.push(setInterval(() => void Promise.resolve().then(f).catch((err: Error) => this.#log.debug({ err: err.message }, 'network task failed')), ms));
    every(this.settings.offerIntervalMs ?? 10_000, () => this.publishOffer());
    every(10_000, () => this.#pingKnown());
    every(5000, () => this.#redialBootstrap());
    every(30_000, () => this.#prune());
    setTimeout(() => void this.publishOffer().catch(() => undefined), 500).unref();
  }

  // ---- offers ---------------------------------------------------------------------------------

  /** What this pod offers now: the models it lends (none while lending is off), its load and price. */
  async offerBody(): Promise<OfferBody> {
    await this.#pod.refresh?.();
    const now = this.#now();
    const policy = this.#lender.policy;
    const lent = policy.enabled ? this.#pod.models().filter((m) => (!policy.models || policy.models.includes(m.name)) && (policy.maxModelBytes === null || m.bytes === null || m.bytes <= policy.maxModelBytes)) : [];
    const load = this.#pod.load();
    this.#seq = Math.max(this.#seq + 1, now);
    return {
      v: 1,
      network: this.settings.name,
      peer: this.signer.peerId,
      seq: this.#seq,
      issuedAt: now,
      expiresAt: now + (this.settings.offerTtlMs ?? 60_000),
      // Before the first profile is in, the pod is this one node of unknown make.
      pod: { name: this.#pod.name.slice(0, 128), nodes: (this.#pod.nodes().length ? this.#pod.nodes() : [{ name: this.#pod.name.slice(0, 128), chip: 'unknown', memoryBytes: 0 }]).slice(0, 64) },
      region: this.settings.region,
      models: lent.slice(0, 64).map(({ bytes: _bytes, ...m }) => m),
      load: { active: load.active, queued: load.queued },
      pricePer1M: policy.pricePer1M,
      policy: { lending: policy.mode, maxTokensPerJob: policy.maxTokensPerJob, maxConcurrentJobs: policy.maxConcurrentJobs },
    };
  }

  async publishOffer(): Promise<void> {
    if (this.#stopped || !this.#pod.speaksForPod()) return;
    const offer = await signOffer(this.signer, await this.offerBody());
    this.#observer.book.add(offer, this.#now());
    await this.node.services.pubsub.publish(offersTopic(this.settings.name), new TextEncoder().encode(JSON.stringify(offer.signed))).catch((err: Error) => this.#log.debug({ err: err.message }, 'offer not published'));
  }

  /** Adds a receipt to the ledger; ours go to disk and to the network, so balances move everywhere. */
  #keep(r: VerifiedReceipt): void {
    if (this.#observer.keep(r, true) !== 'added') return;
    this.records.appendReceipt(r.signed);
  }

  // ---- lending (the serving side) -------------------------------------------------------------

  get lending(): LendingPolicy {
    return this.#lender.policy;
  }

  setLending(policy: LendingPolicy): void {
    this.records.saveLending(policy);
    this.#lender.setPolicy(policy);
    this.#log.info({ enabled: policy.enabled, mode: policy.mode }, 'lending policy changed');
    void this.publishOffer().catch(() => undefined);
  }

  /** A local request started on this pod; call the returned function when it ends. */
  localStarted(): () => void {
    return this.#lender.localStarted();
  }

  async #serve(stream: Stream, remotePeer: string): Promise<void> {
    try {
      await serveJob(stream, remotePeer, {
        signer: this.signer,
        network: this.settings.name,
        now: this.#now,
        lend: (ticket) => {
          if (!this.#pod.models().some((m) => m.name === ticket.model)) return { ok: false, code: 'model_not_lent', message: `this pod does not serve ${ticket.model}` };
          const decision = this.#lender.decide(ticket, this.#lender.policy.pricePer1M);
          if (decision.ok) this.#log.info({ peer: remotePeer, job: ticket.job, model: ticket.model, maxTokens: ticket.maxTokens }, 'network job accepted');
          else this.#log.info({ peer: remotePeer, model: ticket.model, code: decision.code }, 'network job refused');
          return decision;
        },
        run: (model, req, emit, signal) => this.#pod.run(model, req, emit, signal),
        claimJob: (requester, job) => {
          const key = `${requester}/${job}`;
          if (this.#claimed.has(key)) return false;
          this.#claimed.set(key, this.#now());
          return true;
        },
        onReceipt: (r) => {
          this.#reputation.record(remotePeer, 'served', this.#now());
          this.#keep(r);
          this.#record({ job: r.ticket.job, role: 'served', peer: remotePeer, model: r.ticket.model, ok: true, tokens: r.result.promptTokens + r.result.completionTokens, charge: r.charge, error: null });
          this.#log.info({ peer: remotePeer, job: r.ticket.job, model: r.ticket.model, tokens: r.result.promptTokens + r.result.completionTokens, charge: r.charge }, 'network job served');
        },
        onUnpaid: (peer, reason) => {
          this.#reputation.record(peer, 'refused-receipt', this.#now());
          this.#log.warn({ peer, reason }, 'network job not countersigned');
        },
      });
    } catch (err) {
      this.#log.debug({ peer: remotePeer, err: (err as Error).message }, 'network job stream failed');
    }
  }

  // ---- routing out (the requesting side) ------------------------------------------------------

  /** Models that other pods on the network offer now. */
  offeredModels(): string[] {
    const self = this.signer.peerId;
    return [...new Set(this.#observer.book.list(this.#now()).flatMap((o) => (o.peer === self ? [] : o.models.map((m) => m.name))))].sort();
  }

  /** Runs a request whole on the pod expected to finish it first, retrying others before the first token. */
  async run(model: string, req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal, o: { trusted?: string[] | null; priceCap?: number | null } = {}): Promise<void> {
    if (!this.settings.route) throw new ServeError(404, 'model_not_found', `the model '${model}' is not served by this pod, and routing to the network is off`);
    const text = req.kind === 'chat' ? (req.messages ?? []).map((m) => m.content).join('\n') : (req.prompt ?? '');
    const maxTokens = req.maxTokens ?? DEFAULT_MAX_TOKENS;
    const trusted = o.trusted ?? this.settings.trusted;
    const routeReq: RouteRequest = {
      model,
      promptTokens: estimateTokens(text),
      maxTokens,
      priceCap: o.priceCap !== undefined ? o.priceCap : this.settings.priceCap,
      trusted: trusted ? new Set(trusted) : null,
      exclude: new Set([this.signer.peerId]),
    };
    const rank = () => rankCandidates(routeReq, this.#observer.book.list(this.#now()), { now: this.#now(), rttMs: (p) => this.#rtt.get(p), score: (p) => this.#reputation.score(p, this.#now()), measuredTps: (p, m) => this.#reputation.measuredTps(p, m) });
    let route = rank();
    if (!route.candidates.length) {
      const why = route.rejected.map((r) => `${r.peer.slice(-8)}: ${r.reason}`).join('; ');
      throw new ServeError(404, 'model_not_found', `no pod on network "${this.settings.name}" offers '${model}'${why ? ` that this node may use (${why})` : ''}`);
    }
    // RTT by libp2p ping for the leading candidates we have not measured yet.
    await this.#ping(route.candidates.slice(0, 3).map((c) => c.peer).filter((p) => !this.#rtt.has(p)), signal);
    route = rank();
    const maxPromptTokens = new TextEncoder().encode(text).length + 64 * (req.messages?.length ?? 1) + 256;
    const attempts = new Map<string, { found: 'dht' | 'known' }>();
    try {
      const { peer, outcome, tried } = await dispatchJob(
        route.candidates.map((c) => c.peer),
        (peer) => this.#attempt(peer, model, req, maxTokens, maxPromptTokens, emit, signal, attempts),
        (peer, f) => {
          if (f.kind !== 'refused') this.#reputation.record(peer, f.kind === 'broken' ? 'broken-stream' : 'failed', this.#now());
          this.#record({ job: '', role: 'requested', peer, model, ok: false, tokens: 0, charge: 0, error: `${f.code}: ${f.message}`, found: attempts.get(peer)?.found ?? null });
          this.#log.info({ peer, code: f.code, beforeFirstToken: f.beforeFirstToken, err: f.message }, 'network job failed');
        },
        { signal },
      );
      const offered = this.#observer.book.get(peer, this.#now())?.body.models.find((m) => m.name === model)?.decodeTps ?? null;
      this.#reputation.record(peer, 'served', this.#now());
      if (this.#reputation.observeSpeed(peer, model, { tokens: outcome.completionTokens, tps: outcome.measuredTps }, offered, this.#now())) {
        this.#log.warn({ peer, model, offeredTps: offered, measuredTps: outcome.measuredTps }, 'network peer is much slower than it offers');
      }
      if (outcome.receipt) this.#keep(outcome.receipt);
      this.#record({
        job: outcome.receipt?.ticket.job ?? '',
        role: 'requested',
        peer,
        model,
        ok: true,
        tokens: outcome.promptTokens + outcome.completionTokens,
        charge: outcome.receipt?.charge ?? 0,
        error: outcome.unpaid,
        found: attempts.get(peer)?.found ?? null,
        tried: tried.map((t) => ({ peer: t.peer, code: t.code })),
      });
      this.#log.info({ peer, model, path: this.#pathTo(peer), found: attempts.get(peer)?.found, tokens: outcome.completionTokens, measuredTps: outcome.measuredTps, retried: tried.length }, 'network job done');
    } catch (err) {
      if (err instanceof ServeError) throw err;
      throw new ServeError(503, 'network_failed', (err as Error).message);
    }
  }

  async #attempt(peer: string, model: string, req: ServeRequest, maxTokens: number, maxPromptTokens: number, emit: (e: ServeEvent) => void, signal: AbortSignal, attempts: Map<string, { found: 'dht' | 'known' }>): Promise<JobOutcome> {
    const offer = this.#observer.book.get(peer, this.#now());
    if (!offer) throw new JobFailure('offer_gone', 'its offer expired', true, 'refused');
    const pid = peerIdFromString(peer);
    await this.#locate(peer, signal);
    attempts.set(peer, { found: this.#foundVia.get(peer) ?? 'known' });
    let stream: Stream | null = null;
    // Retries: a stream opened while libp2p replaces a connection (a relayed one being upgraded, a
    // second dial racing the first) can be closed under us; a fresh dial a moment later works. The
    // connection is hung up first: in one internet-test run every stream opened on a relayed
    // connection that libp2p still held open was closed by the far end, three times in a row.
    for (let i = 0; !stream; i++) {
      try {
        stream = await this.node.dialProtocol(pid, JOB_PROTOCOL, { runOnLimitedConnection: true, signal: AbortSignal.any([signal, AbortSignal.timeout(20_000)]) });
      } catch (err) {
        if (signal.aborted) throw new ServeError(499, 'cancelled', 'client went away');
        if (i >= 2) throw new JobFailure('unreachable', `cannot reach it: ${(err as Error).message}`, true, 'failed');
        this.#log.info({ peer, err: (err as Error).message }, 'job stream not opened; redialling');
        // Not a connection that carries other jobs: those would die with it.
        for (const conn of this.node.getConnections(pid)) if (!conn.streams.some((st) => st.protocol === JOB_PROTOCOL)) await conn.close().catch(() => conn.abort(new Error('closed to redial')));
        await new Promise((r) => setTimeout(r, 250 * 3 ** i));
        // With its connections closed the peer store may hold no address that still works (seen: an
        // inbound connection was all we had, and the redial failed with "no valid addresses"): ask
        // the DHT again rather than redial the same nothing.
        await this.#locate(peer, signal, { fresh: true });
      }
    }
    // 'start' waits for the first text so a pod that fails before it leaves no trace with the caller.
    let start: ServeEvent | null = null;
    const relay = (e: ServeEvent) => {
      if (e.type === 'start') return void (start = e);
      if (start) {
        emit(start);
        start = null;
      }
      emit(e);
    };
    return requestJob(stream, { signer: this.signer, network: this.settings.name, now: this.#now }, { server: peer, model, request: req, maxTokens, pricePer1M: offer.body.pricePer1M, maxPromptTokens }, relay, signal);
  }

  /**
   * Makes sure libp2p can dial `peer`: a peer this node was connected to before is dialled at the
   * addresses it learnt then; any other is looked up in the DHT (offers carry no addresses), falling
   * back to what the DHT's own queries already left in the peer store.
   */
  async #locate(peer: string, signal: AbortSignal, o: { fresh?: boolean } = {}): Promise<'dht' | 'known'> {
    const pid = peerIdFromString(peer);
    if (!o.fresh && this.node.getConnections(pid).length) return 'known';
    const known = await this.node.peerStore.get(pid).then((p) => p.addresses.length > 0, () => false);
    if (!o.fresh && known && this.#metBefore.has(peer)) return 'known';
    // A peer's relay address reaches the DHT a moment after its reservation: ask again until the deadline.
    const deadline = AbortSignal.any([signal, AbortSignal.timeout(15_000)]);
    let last: Error | null = null;
    while (!deadline.aborted) {
      try {
        const info = await this.node.peerRouting.findPeer(pid, { signal: deadline });
        // An answer without addresses (a DHT peer that knows of it but not where it is) is no answer.
        if (!info.multiaddrs.length) throw new Error('the DHT knows the peer but no address for it');
        await this.node.peerStore.merge(pid, { multiaddrs: info.multiaddrs });
        this.#log.info({ peer, addresses: info.multiaddrs.map(String) }, 'found network peer through the DHT');
        this.#foundVia.set(peer, 'dht');
        return 'dht';
      } catch (err) {
        last = err as Error;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    if (signal.aborted) throw new ServeError(499, 'cancelled', 'client went away');
    if (known) return 'known';
    throw new JobFailure('unreachable', `the DHT has no address for it: ${last?.message ?? 'no answer'}`, true, 'failed');
  }

  /** The bootstrap relays are this node's way into the network: keep a connection to each. */
  async #redialBootstrap(): Promise<void> {
    for (const addr of this.settings.bootstrap) {
      try {
        const ma = multiaddr(addr);
        const id = ma.getComponents().findLast((c) => c.name === 'p2p')?.value;
        if (!id || this.node.getConnections(peerIdFromString(id)).length) continue;
        await this.node.dial(ma, { signal: AbortSignal.timeout(10_000) });
        this.#log.info({ addr }, 'reconnected to a network bootstrap peer');
      } catch (err) {
        this.#log.debug({ addr, err: (err as Error).message }, 'network bootstrap dial failed');
      }
    }
  }

  async #ping(peers: string[], signal?: AbortSignal): Promise<void> {
    await Promise.all(
      peers.map(async (p) => {
        // Wait for a ping already under way; if it measured nothing, this caller pings after it.
        const inFlight = this.#pinging.get(p);
        if (inFlight) await inFlight;
        if (inFlight && this.#rtt.has(p)) return;
        const again = this.#pinging.get(p);
        if (again) return again;
        const measured = this.#pingOne(p, signal).finally(() => this.#pinging.delete(p));
        this.#pinging.set(p, measured);
        await measured;
      }),
    );
  }

  async #pingOne(p: string, signal?: AbortSignal): Promise<void> {
    try {
      await this.#locate(p, signal ?? AbortSignal.timeout(5000));
      // The first ping on a fresh connection also pays for opening its stream: keep the best of two.
      const once = () => this.node.services.ping.ping(peerIdFromString(p), { signal: AbortSignal.any([...(signal ? [signal] : []), AbortSignal.timeout(3000)]) });
      this.#rtt.set(p, Math.min(await once(), await once()));
    } catch {
      /* unreachable now: routing assumes a long RTT */
    }
  }

  async #pingKnown(): Promise<void> {
    const connected = new Set(this.node.getConnections().map((c) => c.remotePeer.toString()));
    await this.#ping(this.#observer.book.list(this.#now()).map((o) => o.peer).filter((p) => connected.has(p) && p !== this.signer.peerId));
  }

  #pathTo(peer: string): 'direct' | 'relayed' | null {
    const conns = this.node.getConnections(peerIdFromString(peer));
    if (!conns.length) return null;
    return conns.some((c) => connectionPath(c.remoteAddr) === 'direct') ? 'direct' : 'relayed';
  }

  #record(r: Omit<JobRecord, 'at' | 'path' | 'found' | 'tried'> & Partial<Pick<JobRecord, 'found' | 'tried'>>): void {
    this.#jobs.push({ found: null, tried: [], ...r, at: this.#now(), path: this.#pathTo(r.peer) });
    if (this.#jobs.length > MAX_JOBS_KEPT) this.#jobs.splice(0, this.#jobs.length - MAX_JOBS_KEPT);
  }

  #prune(): void {
    const now = this.#now();
    for (const peer of this.#observer.book.prune(now)) {
      this.#rtt.delete(peer);
      this.#foundVia.delete(peer);
    }
    for (const [k, at] of this.#claimed) if (at < now - 10 * 60_000) this.#claimed.delete(k);
  }

  // ---- status ---------------------------------------------------------------------------------

  status(): NetworkStatus {
    const now = this.#now();
    const addresses = this.node.getMultiaddrs();
    const direct = addresses.filter((a) => connectionPath(a) === 'direct');
    return {
      network: this.settings.name,
      self: {
        peer: this.signer.peerId,
        addresses: addresses.map(String),
        reachable: direct.some((a) => !isPrivate(a)) ? true : addresses.length > direct.length ? false : null,
        relayReservations: addresses.filter((a) => connectionPath(a) === 'relayed').map(String),
      },
      routing: { enabled: this.settings.route, priceCap: this.settings.priceCap, trusted: this.settings.trusted },
      lending: (() => {
        const s = this.#lender.stats();
        return { ...this.#lender.policy, localActive: s.localActive, running: s.running.length, served: s.served, refused: s.refused, preempted: s.preempted };
      })(),
      nodes: networkNodes({
        self: this.signer.peerId,
        now,
        offers: this.#observer.book.all(),
        firstSeen: (p) => this.#observer.book.firstSeen(p),
        balances: this.#observer.ledger.balances(),
        reputation: (p) => this.#reputation.score(p, now),
        rttMs: (p) => this.#rtt.get(p),
        path: (p) => (p === this.signer.peerId ? null : this.#pathTo(p)),
      }),
      balances: this.#observer.ledger.balances(),
      receipts: this.#observer.ledger.size,
      jobs: [...this.#jobs].reverse(),
    };
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const t of this.#timers) clearInterval(t);
    await Promise.resolve(this.node.stop()).catch(() => undefined);
  }
}
