/**
 * What this node knows from the serve gossip: each instance's status from the node that drives it
 * (readiness, load, measured speed), the models peers hold (with their descriptions), each instance's
 * data-plane links, peers' libp2p addresses and runner failures. Readers that wait for something
 * (the router) subscribe to changes instead of polling.
 */
import type { ModelDescription } from '../models/description.js';
import type { InstanceEntry } from '../state/types.js';
import { DataPlaneLinks } from './link-report.js';
import type { ServeMessage } from './messages.js';

export interface InstanceStatus {
  ready: boolean;
  active: number;
  queued: number;
  capacity: number;
  /** When it was heard (or set, for instances this node drives). */
  at: number;
  /** Measured decode speed of the last request, when one produced 2+ tokens. */
  decodeTokensPerSecond?: number | null;
  /** How long the instance has been idle when the status was taken, ms. */
  idleMs?: number;
}

/** A remote status older than this no longer says the instance is ready. */
export const STATUS_FRESH_MS = 3500;
/** A peer's catalog entry older than this no longer says it holds the model. */
const CATALOG_FRESH_MS = 20_000;

export interface Failure {
  reason: string;
  /** The node whose runner failed. */
  from: string;
  phase: 'load' | 'serve';
  at: number;
}

export class Board {
  readonly links = new DataPlaneLinks();
  readonly #instances: () => Readonly<Record<string, InstanceEntry>>;
  readonly #now: () => number;
  readonly #status = new Map<string, InstanceStatus & { local: boolean }>();
  readonly #failures = new Map<string, Failure>();
  readonly #addrs = new Map<string, string[]>();
  readonly #catalog = new Map<string, { description: ModelDescription; holders: Map<string, number>; filesAt: number }>();
  readonly #listeners = new Set<() => void>();

  constructor(o: { instances: () => Readonly<Record<string, InstanceEntry>>; now?: () => number }) {
    this.#instances = o.instances;
    this.#now = o.now ?? Date.now;
  }

  /** Takes a gossiped message (endpoints are the supervisor's). */
  accept(m: ServeMessage): void {
    switch (m.type) {
      case 'status': {
        if (m.addrs?.length) this.#addrs.set(m.from, m.addrs);
        // Only the node driving an instance speaks for it.
        if (this.#instances()[m.instance]?.nodes[0] !== m.from) return;
        const prev = this.#status.get(m.instance);
        const { type: _t, from: _f, instance: _i, addrs: _a, ...status } = m;
        this.#status.set(m.instance, { ...status, at: this.#now(), local: false });
        if (!prev || prev.ready !== m.ready) this.#changed();
        return;
      }
      case 'failed':
        this.fail(m.instance, { reason: m.reason, from: m.from, phase: m.phase });
        return;
      case 'links':
        this.links.accept(m, this.#instances()[m.instance]?.plan.ranks);
        return;
      case 'catalog': {
        const entry = this.#catalog.get(m.id) ?? { description: m.description, holders: new Map<string, number>(), filesAt: 0 };
        const known = entry.holders.has(m.from);
        entry.description = m.description;
        entry.filesAt = Math.max(entry.filesAt, m.filesAt ?? 0);
        entry.holders.set(m.from, this.#now());
        this.#catalog.set(m.id, entry);
        if (!known) this.#changed();
        return;
      }
      default:
        return;
    }
  }

  /** The status of an instance this node drives. */
  setLocal(id: string, s: Omit<InstanceStatus, 'at'>): void {
    const prev = this.#status.get(id);
    this.#status.set(id, { ...s, at: this.#now(), local: true });
    if (!prev || prev.ready !== s.ready) this.#changed();
  }

  /** A runner of `id` failed (here or as gossiped): routers waiting for it learn why at once. */
  fail(id: string, f: Omit<Failure, 'at'>): void {
    this.#failures.set(id, { ...f, at: this.#now() });
    const s = this.#status.get(id);
    if (s) s.ready = false;
    this.#changed();
  }

  failure(id: string): Failure | undefined {
    return this.#failures.get(id);
  }

  status(id: string): InstanceStatus | undefined {
    return this.#status.get(id);
  }

  isReady(id: string): boolean {
    const s = this.#status.get(id);
    return !!s && s.ready && (s.local || this.#now() - s.at < STATUS_FRESH_MS);
  }

  /** Models live peers announced recently, with who holds them. */
  remoteModels(live: ReadonlySet<string>): Map<string, { description: ModelDescription; holders: string[] }> {
    const out = new Map<string, { description: ModelDescription; holders: string[] }>();
    const now = this.#now();
    for (const [id, e] of this.#catalog) {
      const holders = [...e.holders].filter(([p, at]) => live.has(p) && now - at < CATALOG_FRESH_MS).map(([p]) => p);
      if (holders.length) out.set(id, { description: e.description, holders });
    }
    return out;
  }

  /** The newest change of the model's files any holder announced (ms), 0 when none said. */
  filesAt(model: string): number {
    return this.#catalog.get(model)?.filesAt ?? 0;
  }

  addrsOf(peer: string): string[] {
    return this.#addrs.get(peer) ?? [];
  }

  /** Forgets instances that no longer exist. */
  retain(): void {
    const live = this.#instances();
    for (const id of this.#status.keys()) if (!live[id]) this.#status.delete(id);
    for (const id of this.#failures.keys()) if (!live[id] && this.#now() - this.#failures.get(id)!.at > 60_000) this.#failures.delete(id);
    this.links.retain((id) => !!live[id]);
  }

  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #changed(): void {
    for (const l of [...this.#listeners]) l();
  }
}
