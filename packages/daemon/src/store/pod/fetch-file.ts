/**
 * Fetches the chunks a node needs of one file from the pod and, for chunks no peer has, from the
 * hub — each such chunk claimed at the pod's hub ledger first, so the pod downloads it once.
 *
 * Chunks are striped over every link to every peer that has them (stripe.ts decides which link
 * takes which chunk); each chunk is checked against the pod's digest for it before it is written
 * (a digest from a peer that verified the whole file against the hub's hash wins; otherwise the
 * one most holders report; otherwise the serving peer's own record). A peer whose bytes do not match
 * is dropped for the rest of the download and reported; a peer that goes away has its chunks taken
 * over by the others, or by the hub when nobody else has them.
 */
import { DiskError, StoreError } from '../errors.js';
import type { ChunkedFile } from '../chunked/chunk-file.js';
import { hashPool } from '../chunked/hash-pool.js';
import { fromRuns, toRuns } from '../chunked/layout.js';
import type { Availability, ChunkRegistry } from '../chunked/registry.js';
import type { ClaimAnswer } from './hub-ledger.js';
import type { HubSource } from './hub-source.js';
import { Stripe } from './stripe.js';
import { ChunkMissingError, type ChunkAnswer, type WeightsLink } from '../peers/weights-link.js';

export const HUB = 'hub';
/** Parallel range requests to the hub, and the most chunks one of them asks for. */
const HUB_WORKERS = 3;
const HUB_RUN_CHUNKS = 16;
/** Broken hub requests tolerated per download before it fails (each resumes at the next chunk). */
const HUB_RETRIES = 6;

export interface PeerHandle {
  id: string;
  availability: Availability;
  /** Opens this peer's links (one per path); called once, when the first chunk is wanted from it. */
  links(signal: AbortSignal): Promise<WeightsLink[]>;
}

/** The pod as one file's download sees it. */
export interface PodRoute {
  /** A handle for a node the ledger says is fetching some chunks, or undefined if it cannot be reached. */
  peer(id: string): Promise<PeerHandle | undefined>;
  /** Claims chunks at the hub ledger; `failed` are nodes that did not deliver what they held or claimed. */
  claim(chunks: number[], failed: string[]): Promise<ClaimAnswer>;
}

export interface LinkStat {
  /** "hub" or the peer's id. */
  source: string;
  /** The link: a peer address, or "hub". */
  link: string;
  bytes: number;
  /** Measured bytes per second. */
  rate: number;
  /** Peer links: the cipher sealing the link, or null when it is plain. Absent for the hub. */
  encryption?: string | null;
}

export interface FileFetchProgress {
  /** Bytes of the needed chunks present (including those verified before this download). */
  done: number;
  total: number;
  /** Bytes received by this download, by source ("hub" or a peer id). */
  bySource: Record<string, number>;
  links: LinkStat[];
}

export interface FileFetchResult extends FileFetchProgress {
  /** Peers dropped for serving bytes that did not match the pod's digest. */
  badPeers: string[];
  /** Chunks delivered with a digest from a peer that verified the whole file against the hub's hash. */
  trusted: number[];
}

export interface FetchFileOptions {
  file: ChunkedFile;
  registry: ChunkRegistry;
  needed: Iterable<number>;
  /** Peers that have (or are fetching) some of the file. */
  peers: PeerHandle[];
  pod?: PodRoute;
  /** Absent: peers only (a chunk no peer has fails the download). */
  hub?: HubSource;
  signal?: AbortSignal;
  onProgress?: (p: FileFetchProgress) => void;
  onBadPeer?: (peer: string, chunk: number, why: string) => void;
  /** Told when the ledger cannot be asked and the hub is used without a claim. */
  onLedgerUnreachable?: (err: Error) => void;
}

interface PeerState {
  handle: PeerHandle;
  links: Map<string, WeightsLink>;
  connecting: boolean;
}

export async function fetchFile(o: FetchFileOptions): Promise<FileFetchResult> {
  return new FileFetch(o).run();
}

class FileFetch {
  readonly #o: FetchFileOptions;
  readonly #file: ChunkedFile;
  readonly #abort = new AbortController();
  readonly #peers = new Map<string, PeerState>();
  /** chunk → digest (hex) → [holders reporting it, whether one of them verified the whole file]. */
  readonly #votes = new Map<number, Map<string, { count: number; complete: boolean }>>();
  readonly #failed = new Set<string>();
  readonly #bad = new Set<string>();
  readonly #bySource: Record<string, number> = {};
  readonly #trusted = new Set<number>();
  readonly #needed: number[];
  #stripe!: Stripe;
  #active = 0;
  /** Chunks delivered (the stripe counts them done) whose bytes are still being written. */
  #writing = 0;
  #hubFailures = 0;
  /** After a broken hub request, no new one starts before this time (ms). */
  #hubRestUntil = 0;
  #resolving: Promise<void> | undefined;
  #again = false;
  #settle!: { resolve: () => void; reject: (e: Error) => void };
  #error: Error | undefined;

  constructor(o: FetchFileOptions) {
    this.#o = o;
    this.#file = o.file;
    this.#needed = [...new Set(o.needed)].filter((c) => c >= 0 && c < o.file.count).sort((a, b) => a - b);
  }

  async run(): Promise<FileFetchResult> {
    const missing = this.#needed.filter((c) => !this.#file.has(c));
    this.#stripe = new Stripe(missing, this.#file.chunkSize);
    if (missing.length === 0) return this.#result();
    const finished = new Promise<void>((resolve, reject) => (this.#settle = { resolve, reject }));
    const onAbort = () => this.#fail(this.#o.signal?.reason instanceof Error ? this.#o.signal.reason : new StoreError(`${this.#file.info.label}: download aborted`));
    this.#o.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      if (this.#o.signal?.aborted) onAbort();
      for (const p of this.#o.peers) this.#addPeer(p);
      if (this.#o.hub) for (let w = 0; w < HUB_WORKERS; w++) this.#stripe.addLink(`${HUB}#${w}`, HUB);
      this.#resolveOrphans();
      this.#pumpAll();
      await finished;
      await this.#file.flush();
      return this.#result();
    } finally {
      this.#o.signal?.removeEventListener('abort', onAbort);
      this.#abort.abort();
      for (const s of this.#peers.values()) for (const l of s.links.values()) l.close('download finished');
      for (const c of this.#stripe.wanted()) this.#o.registry.settle(this.#file.key, c, false);
    }
  }

  #result(): FileFetchResult {
    const size = (c: number) => this.#file.span(c)[1] - this.#file.span(c)[0];
    const total = this.#needed.reduce((n, c) => n + size(c), 0);
    const done = this.#needed.filter((c) => this.#file.has(c)).reduce((n, c) => n + size(c), 0);
    return {
      done,
      total,
      bySource: { ...this.#bySource },
      links: this.#linkStats(),
      badPeers: [...this.#bad],
      trusted: [...this.#trusted],
    };
  }

  #linkStats(): LinkStat[] {
    const byLink = new Map<string, LinkStat>();
    const cipherOf = (id: string, peer: string) => this.#peers.get(peer)?.links.get(id)?.cipher ?? null;
    for (const l of this.#stripe?.links() ?? []) {
      if (l.bytes === 0 && l.peer === HUB) continue;
      const id = l.peer === HUB ? HUB : l.id;
      const s =
        byLink.get(id) ??
        (l.peer === HUB ? { source: l.peer, link: HUB, bytes: 0, rate: 0 } : { source: l.peer, link: l.id.slice(l.peer.length + 1), bytes: 0, rate: 0, encryption: cipherOf(l.id, l.peer) });
      s.bytes += l.bytes;
      s.rate += l.rate;
      byLink.set(id, s);
    }
    return [...byLink.values()];
  }

  #progress(): void {
    if (this.#o.onProgress) this.#o.onProgress(this.#result());
  }

  /** Records what a peer has (its digests as votes) and makes it a source for those chunks. */
  #addPeer(p: PeerHandle): void {
    const a = p.availability;
    if (this.#bad.has(p.id) || a.key !== this.#file.key || a.size !== this.#file.info.size || a.chunkSize !== this.#file.chunkSize) return;
    let verified: number[];
    let fetching: number[];
    try {
      verified = fromRuns(a.verified, this.#file.count);
      fetching = fromRuns(a.fetching, this.#file.count);
    } catch {
      return; // a malformed answer: this peer is simply not a source
    }
    const state = this.#peers.get(p.id) ?? { handle: p, links: new Map(), connecting: false };
    state.handle = p;
    this.#peers.set(p.id, state);
    this.#failed.delete(p.id);
    verified.forEach((c, k) => {
      const digest = a.digests[k];
      if (typeof digest === 'string' && /^[0-9a-f]{64}$/.test(digest)) {
        const m = this.#votes.get(c) ?? new Map();
        const v = m.get(digest) ?? { count: 0, complete: false };
        v.count++;
        v.complete ||= a.complete;
        m.set(digest, v);
        this.#votes.set(c, m);
      }
      this.#stripe.addSource(c, p.id, true);
    });
    for (const c of fetching) this.#stripe.addSource(c, p.id, false);
    if (verified.length || fetching.length) this.#connect(state);
  }

  /** The digest chunk `c` must have: a whole-file holder's, else the most reported; undefined if none known. */
  #expected(c: number): { digest: Buffer; fromComplete: boolean } | undefined {
    const m = this.#votes.get(c);
    if (!m) return undefined;
    let best: [string, { count: number; complete: boolean }] | undefined;
    for (const e of m) if (!best || (e[1].complete && !best[1].complete) || (e[1].complete === best[1].complete && e[1].count > best[1].count)) best = e;
    return best && { digest: Buffer.from(best[0], 'hex'), fromComplete: best[1].complete };
  }

  #connect(state: PeerState): void {
    if (state.connecting || state.links.size) return;
    state.connecting = true;
    this.#active++;
    state.handle
      .links(this.#abort.signal)
      .then(
        (links) => {
          for (const l of links) {
            const id = `${state.handle.id}@${l.address}`;
            state.links.set(id, l);
            this.#stripe.addLink(id, state.handle.id);
          }
          if (!links.length) this.#peerFailed(state.handle.id);
        },
        () => this.#peerFailed(state.handle.id),
      )
      .finally(() => {
        state.connecting = false;
        this.#active--;
        this.#pumpAll();
      });
  }

  #pumpAll(): void {
    if (this.#error) return;
    if (this.#stripe.remaining === 0) {
      if (this.#writing === 0) this.#settle.resolve();
      return;
    }
    for (const l of this.#stripe.links()) {
      if (l.peer === HUB) {
        if (l.inflight.length === 0 && Date.now() >= this.#hubRestUntil) this.#hubRun(l.id);
        continue;
      }
      const link = this.#peers.get(l.peer)?.links.get(l.id);
      if (!link) continue;
      for (let c = this.#stripe.next(l.id, Date.now()); c !== undefined; c = this.#stripe.next(l.id, Date.now())) this.#request(l.id, l.peer, link, c);
    }
    this.#checkStuck();
  }

  #request(linkId: string, peer: string, link: WeightsLink, c: number): void {
    const f = this.#file;
    this.#o.registry.fetching(f.key, [c]);
    this.#active++;
    link
      .get({ key: f.key, chunk: c, chunkSize: f.chunkSize, fileSize: f.info.size })
      .then(
        (answer) => this.#onChunk(linkId, peer, c, answer),
        (err: Error) => this.#onRequestError(linkId, peer, c, err),
      )
      .catch((err: Error) => this.#fail(err))
      .finally(() => {
        this.#active--;
        this.#pumpAll();
      });
  }

  async #onChunk(linkId: string, peer: string, c: number, answer: ChunkAnswer): Promise<void> {
    const { digest: actual, bytes } = await hashPool().digest(answer.bytes);
    const expected = this.#expected(c);
    const want = expected?.digest ?? answer.digest;
    if (!actual.equals(want) || !answer.digest.equals(want)) {
      this.#stripe.failed(c, linkId);
      this.#dropBad(peer, c, actual.equals(answer.digest) ? 'its record of the chunk differs from the pod digest' : 'its bytes do not match the digest');
      return;
    }
    if (!this.#stripe.delivered(c, linkId, bytes.byteLength, Date.now())) return;
    await this.#write(c, bytes, actual);
    if (expected?.fromComplete) this.#trusted.add(c);
    this.#bySource[peer] = (this.#bySource[peer] ?? 0) + bytes.byteLength;
    this.#o.registry.settle(this.#file.key, c, true);
    this.#progress();
  }

  #onRequestError(linkId: string, peer: string, c: number, err: Error): void {
    this.#stripe.failed(c, linkId);
    this.#o.registry.settle(this.#file.key, c, false);
    if (err instanceof ChunkMissingError) {
      // "still fetching": ask again (it keeps the source); anything else: it does not have it.
      if (err.reason !== 'still fetching') {
        this.#stripe.dropSource(c, peer);
        this.#failed.add(peer);
        this.#resolveOrphans();
      }
      return;
    }
    const state = this.#peers.get(peer);
    state?.links.get(linkId)?.close(err.message);
    state?.links.delete(linkId);
    this.#stripe.removeLink(linkId);
    if (state && state.links.size === 0 && !state.connecting) this.#peerFailed(peer);
  }

  #peerFailed(peer: string): void {
    this.#stripe.dropPeer(peer);
    this.#failed.add(peer);
    this.#resolveOrphans();
  }

  #dropBad(peer: string, c: number, why: string): void {
    if (!this.#bad.has(peer)) {
      this.#bad.add(peer);
      this.#o.onBadPeer?.(peer, c, why);
    }
    const state = this.#peers.get(peer);
    for (const l of state?.links.values() ?? []) l.close('served bad bytes');
    state?.links.clear();
    this.#peerFailed(peer);
  }

  /** Reads one run of hub-granted chunks over one hub worker, writing each chunk as it completes. */
  #hubRun(linkId: string): void {
    const run = this.#stripe.nextHubRun(linkId, HUB_RUN_CHUNKS, Date.now());
    if (!run || !this.#o.hub) return;
    const f = this.#file;
    const [first, end] = run;
    const chunks = Array.from({ length: end - first }, (_, k) => first + k);
    this.#o.registry.fetching(f.key, chunks);
    this.#active++;
    let next = first;
    const go = async () => {
      let [start, stop] = f.span(next);
      let buf = Buffer.allocUnsafe(stop - start);
      let fill = 0;
      for await (const piece of this.#o.hub!.range(f.span(first)[0], f.span(end - 1)[1], this.#abort.signal)) {
        for (let used = 0; used < piece.byteLength; ) {
          const n = Math.min(buf.byteLength - fill, piece.byteLength - used);
          buf.set(piece.subarray(used, used + n), fill);
          fill += n;
          used += n;
          if (fill < buf.byteLength) continue;
          if (this.#stripe.delivered(next, linkId, buf.byteLength, Date.now())) {
            const h = await hashPool().digest(buf);
            await this.#write(next, h.bytes, h.digest);
            this.#bySource[HUB] = (this.#bySource[HUB] ?? 0) + h.bytes.byteLength;
            this.#o.registry.settle(f.key, next, true);
            this.#progress();
          }
          if (++next >= end) break;
          [start, stop] = f.span(next);
          buf = Buffer.allocUnsafe(stop - start);
          fill = 0;
        }
      }
    };
    go()
      .catch((err: Error) => {
        for (let c = next; c < end; c++) {
          this.#stripe.failed(c, linkId);
          this.#o.registry.settle(f.key, c, false);
        }
        if (this.#abort.signal.aborted) return;
        // A full or read-only disk is not the hub's fault: retrying would fetch bytes that cannot land.
        if (err instanceof DiskError) return this.#fail(err);
        if (++this.#hubFailures > HUB_RETRIES) return this.#fail(err);
        const rest = 200 * this.#hubFailures;
        this.#hubRestUntil = Date.now() + rest;
        // Counted as active until the rest is over, so the download is not judged stuck meanwhile.
        this.#active++;
        setTimeout(() => {
          this.#active--;
          this.#pumpAll();
        }, rest);
      })
      .finally(() => {
        this.#active--;
        this.#pumpAll();
      });
  }

  /** Finds a source for every chunk that has none: a claim at the ledger, or the hub without one. */
  #resolveOrphans(): void {
    if (this.#resolving) {
      this.#again = true;
      return;
    }
    const orphans = this.#stripe.orphans();
    if (orphans.length === 0 || this.#error) return;
    this.#active++;
    this.#resolving = this.#claim(orphans)
      .catch((err: Error) => this.#fail(err))
      .finally(() => {
        this.#resolving = undefined;
        this.#active--;
        if (this.#again) {
          this.#again = false;
          this.#resolveOrphans();
        }
        this.#pumpAll();
      });
  }

  async #claim(orphans: number[]): Promise<void> {
    const { hub, pod } = this.#o;
    const label = this.#file.info.label;
    if (!hub) {
      const runs = toRuns(orphans).map(([a, b]) => (b - a === 1 ? `${a}` : `${a}-${b - 1}`));
      throw new StoreError(`${label}: no peer in the pod holds chunks ${runs.join(', ')} of ${this.#file.count} (and the hub is not to be used)`);
    }
    if (!pod) return this.#grantHub(orphans);
    let answer: ClaimAnswer;
    try {
      answer = await pod.claim(orphans, [...this.#failed, ...this.#bad]);
    } catch (err) {
      this.#o.onLedgerUnreachable?.(err as Error);
      return this.#grantHub(orphans);
    }
    this.#grantHub(answer.granted);
    for (const [node, chunks] of answer.elsewhere) {
      let state = this.#peers.get(node);
      if (!state) {
        const handle = this.#bad.has(node) ? undefined : await pod.peer(node).catch(() => undefined);
        if (handle) {
          this.#addPeer(handle);
          state = this.#peers.get(node);
        }
      }
      if (!state || this.#bad.has(node)) {
        this.#failed.add(node);
        this.#again = true;
        continue;
      }
      for (const c of chunks) this.#stripe.addSource(c, node, false);
      this.#connect(state);
    }
  }

  /** Writes a delivered chunk; the download is not finished while any write is under way. */
  async #write(c: number, bytes: Buffer, digest: Buffer): Promise<void> {
    this.#writing++;
    try {
      await this.#file.writeChunk(c, bytes, digest);
    } finally {
      this.#writing--;
    }
  }

  /**
   * This node fetches `chunks` from the hub. They count as in flight here from now on, so a peer the
   * ledger sends here waits for them instead of hearing "not here" and claiming them again.
   */
  #grantHub(chunks: number[]): void {
    this.#stripe.grantHub(chunks);
    this.#o.registry.fetching(this.#file.key, chunks);
  }

  /** Nothing in flight, nothing to start, chunks still wanted: the download cannot finish. */
  #checkStuck(): void {
    if (this.#error || this.#active > 0 || this.#stripe.remaining === 0) return;
    const orphans = this.#stripe.orphans();
    if (orphans.length) return this.#resolveOrphans();
    const runs = toRuns(this.#stripe.wanted()).map(([a, b]) => (b - a === 1 ? `${a}` : `${a}-${b - 1}`));
    this.#fail(new StoreError(`${this.#file.info.label}: no source left for chunks ${runs.join(', ')}`));
  }

  #fail(err: Error): void {
    if (this.#error) return;
    this.#error = err;
    this.#abort.abort(err);
    this.#settle?.reject(err);
  }
}
