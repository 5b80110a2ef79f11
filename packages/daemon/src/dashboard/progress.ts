/**
 * Download and load progress of models, per node, for the dashboard. Each node records its own pulls
 * and gossips them (at most once a second per model) on its own topic, so the page served by any node
 * shows every node's progress. Entries expire when their node stops reporting. Untrusted input:
 * messages are validated and must come from the node they describe.
 */
import { z } from 'zod';

export const PROGRESS_TOPIC = 'orchard/dashboard-progress/1';
/** Room for a download's sources and links (peer ids are ~52 characters each). */
const MAX_BYTES = 16384;

export const progressSchema = z.object({
  node: z.string().min(1).max(128),
  model: z.string().min(1).max(512),
  phase: z.enum(['download', 'load', 'ready', 'failed']),
  done: z.number().min(0),
  total: z.number().min(0),
  file: z.string().max(512).optional(),
  message: z.string().max(1000).optional(),
  /** Bytes received by this download, by source: "hub" or a peer id. */
  sources: z.record(z.string().max(128), z.number().min(0)).optional(),
  /** Links in use, with their measured rates (bytes/s). */
  links: z.array(z.object({ source: z.string().max(128), link: z.string().max(128), bytes: z.number().min(0), rate: z.number().min(0), encryption: z.string().max(40).nullable().optional() })).max(32).optional(),
  /** Peers dropped for serving bytes that did not match the pod digest. */
  badPeers: z.array(z.string().max(128)).max(16).optional(),
  at: z.number(),
});
export type Progress = z.infer<typeof progressSchema>;

/** A download seen through the store's per-file events: totals per file, summed over the model. */
interface Pull {
  files: Map<string, { done: number; total: number; sources: Record<string, number> }>;
  current: string | undefined;
  links: Progress['links'];
  badPeers: Set<string>;
}

type PullEvent = { file: string; done: number; total: number; bySource?: Record<string, number>; links?: Progress['links'] };

/** Bytes by source over a pull's files. */
function sourcesOf(pull: Pull): Record<string, number> {
  const out: Record<string, number> = {};
  for (const f of pull.files.values()) for (const [k, v] of Object.entries(f.sources)) out[k] = (out[k] ?? 0) + v;
  return out;
}

export class ProgressBoard {
  readonly #self: string;
  readonly #now: () => number;
  readonly #entries = new Map<string, Progress>();
  readonly #pulls = new Map<string, Pull>();
  readonly #lastSent = new Map<string, number>();
  readonly #publish: (p: Progress) => void;
  /** Entries not refreshed within this long are dropped (a node that died mid-download). */
  readonly #ttlMs: number;

  constructor(o: { self: string; publish: (p: Progress) => void; now?: () => number; ttlMs?: number }) {
    this.#self = o.self;
    this.#publish = o.publish;
    this.#now = o.now ?? Date.now;
    this.#ttlMs = o.ttlMs ?? 15_000;
  }

  /** A per-file progress event from this node's model store (with its sources and links, if any). */
  pullEvent(model: string, e: PullEvent): void {
    const pull = this.#pull(model);
    pull.files.set(e.file, { done: e.done, total: e.total, sources: e.bySource ?? pull.files.get(e.file)?.sources ?? {} });
    pull.current = e.file;
    if (e.links) pull.links = e.links.slice(0, 32);
    let done = 0;
    let total = 0;
    for (const f of pull.files.values()) {
      done += f.done;
      total += f.total;
    }
    this.#local({ model, phase: 'download', done, total, file: e.file, ...this.#detail(pull) });
  }

  /** A peer served bad bytes to this node's pull of `model` (it was dropped). */
  badPeer(model: string, peer: string): void {
    const pull = this.#pull(model);
    pull.badPeers.add(peer);
    const e = this.#entries.get(`${this.#self}|${model}`);
    if (e) this.#local({ ...e, ...this.#detail(pull) }, true);
  }

  /** The pull ended: the weights load next (or the pull failed). Where the bytes came from stays. */
  pullEnded(model: string, error?: string): void {
    const pull = this.#pulls.get(model);
    this.#pulls.delete(model);
    const total = pull ? [...pull.files.values()].reduce((n, f) => n + f.total, 0) : 0;
    const detail = pull ? this.#detail(pull, false) : {};
    this.#local(error ? { model, phase: 'failed', done: 0, total, message: error, ...detail } : { model, phase: 'load', done: total, total, ...detail }, true);
  }

  #pull(model: string): Pull {
    let pull = this.#pulls.get(model);
    if (!pull) this.#pulls.set(model, (pull = { files: new Map(), current: undefined, links: undefined, badPeers: new Set() }));
    return pull;
  }

  /** Sources, links and dropped peers, each only when there is something to say. */
  #detail(pull: Pull, withLinks = true): Pick<Progress, 'sources' | 'links' | 'badPeers'> {
    const sources = sourcesOf(pull);
    return {
      ...(Object.keys(sources).length ? { sources } : {}),
      ...(withLinks && pull.links?.length ? { links: pull.links } : {}),
      ...(pull.badPeers.size ? { badPeers: [...pull.badPeers].slice(0, 16) } : {}),
    };
  }

  /** The instance of `model` serves: the node's entry is done. */
  ready(model: string): void {
    const key = `${this.#self}|${model}`;
    const e = this.#entries.get(key);
    if (e && e.phase !== 'ready') this.#local({ model, phase: 'ready', done: e.total, total: e.total, ...(e.sources ? { sources: e.sources } : {}), ...(e.badPeers ? { badPeers: e.badPeers } : {}) }, true);
  }

  /** Drops this node's entry for `model` (its instance went away). */
  forget(model: string): void {
    this.#entries.delete(`${this.#self}|${model}`);
  }

  #local(p: Omit<Progress, 'node' | 'at'> & { node?: string; at?: number }, force = false): void {
    const entry: Progress = { ...p, node: this.#self, at: this.#now() };
    this.#entries.set(`${entry.node}|${entry.model}`, entry);
    const last = this.#lastSent.get(entry.model) ?? 0;
    if (force || entry.at - last >= 1000) {
      this.#lastSent.set(entry.model, entry.at);
      this.#publish(entry);
    }
  }

  /** A progress message from a peer; false when it is malformed or claims another sender. */
  receive(bytes: Uint8Array, from: string): boolean {
    if (bytes.byteLength > MAX_BYTES) return false;
    let raw: unknown;
    try {
      raw = JSON.parse(new TextDecoder().decode(bytes));
    } catch {
      return false;
    }
    const r = progressSchema.safeParse(raw);
    if (!r.success || r.data.node !== from || from === this.#self) return false;
    // Our clock, not theirs, decides when it expires.
    this.#entries.set(`${from}|${r.data.model}`, { ...r.data, at: this.#now() });
    return true;
  }

  /** Re-announce running downloads so late joiners and lost messages catch up. */
  heartbeat(): void {
    for (const e of this.#entries.values()) if (e.node === this.#self && (e.phase === 'download' || e.phase === 'load')) this.#local({ ...e }, true);
  }

  /** Current entries (ready ones for a few seconds, then gone), oldest first. */
  list(liveNodes?: Set<string>): Progress[] {
    const now = this.#now();
    for (const [k, e] of this.#entries) {
      const ttl = e.phase === 'ready' ? 5000 : e.node === this.#self && e.phase !== 'failed' ? Infinity : this.#ttlMs;
      if (now - e.at > ttl || (liveNodes && !liveNodes.has(e.node))) this.#entries.delete(k);
    }
    return [...this.#entries.values()].sort((a, b) => a.at - b.at);
  }
}

export function encodeProgress(p: Progress): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(p));
}
