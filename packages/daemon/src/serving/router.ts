/**
 * The request's way to an instance: which models the pod serves, an instance of the model that is
 * ready (least loaded first; placed on demand when there is none), and running the request there —
 * on this node's queue, or forwarded whole to the node that drives the instance. Waits are woken by
 * state changes and gossiped statuses, never by sleeping; a failure of the instance being waited for
 * reaches the request at once, with its reason.
 */
import type { Cluster } from '@orchard/partitioner';
import { type ModelCatalog, UnknownModelError } from '../models/catalog.js';
import type { ModelDescription } from '../models/description.js';
import type { PlacementRequest } from '../state/placed-plan.js';
import type { ClusterState, InstanceEntry } from '../state/types.js';
import type { Board } from './board.js';
import { findExisting } from './coordinator.js';
import type { InstanceExecutor } from './executor.js';
import { place, PlacementError, type InstancePlan } from './placement.js';
import { servingProfile } from './profile.js';
import { ServeError } from '../requests/errors.js';
import type { ServeEvent, ServeRequest } from '../requests/request.js';
import { until, type Subscribe } from './wait.js';

/** A placement request not seen in the state yet is sent to the coordinator again after this long. */
const ASK_AGAIN_MS = 2000;

export interface RouterDeps {
  state(): ClusterState;
  /** Fires on every state change and gossiped status. */
  changes: Subscribe;
  board: Board;
  executor(id: string): InstanceExecutor | null;
  catalog: ModelCatalog;
  /** The cluster placement may use now. */
  placeableCluster(): Cluster;
  /** The context instances serve unless a placement asks for another. */
  defaultContext: number | null;
  /** Sequences an instance placed from here holds at once (this node's --batch). */
  defaultSequences: number;
  /** Hands a placement to the coordinator (runs it at once when this node coordinates; may throw PlacementError). */
  requestPlacement(model: string, description: ModelDescription, requested: PlacementRequest, o: { exclusive: boolean; explicit: boolean }): void;
  /** Runs the request on the node driving `instance`. */
  forward(driver: string, instance: string, req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal): Promise<void>;
}

/** The wide-area network as the router sees it, when this node joined one (network/service.ts). */
export interface NetworkRoute {
  /** Models other pods on the network offer now. */
  models(): string[];
  /** Runs a request whole on another pod. */
  run(model: string, req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal): Promise<void>;
  /** A local request started; the function returned ends it (lent time gives way to local work). */
  localStarted(): () => void;
}

export class Router {
  readonly #d: RouterDeps;
  #network: NetworkRoute | null = null;

  constructor(deps: RouterDeps) {
    this.#d = deps;
  }

  /** Fires on every state change and gossiped status (for waiters outside the router). */
  get changes(): Subscribe {
    return this.#d.changes;
  }

  instances(): ClusterState['instances'] {
    return this.#d.state().instances;
  }

  #live(): Set<string> {
    return new Set(Object.values(this.#d.state().nodes).filter((n) => n.status === 'live').map((n) => n.peerId));
  }

  /** Requests for models the pod does not serve go to `network` from now on (null: nowhere). */
  attachNetwork(network: NetworkRoute | null): void {
    this.#network = network;
  }

  /** Models requests may name: the pod's own, and those other pods offer when this node joined a network. */
  models(): string[] {
    return [...new Set([...this.podModels(), ...(this.#network?.models() ?? [])])].sort();
  }

  /** Whether requests may name `model`: models().includes(model), without listing the whole store (per request). */
  offers(model: string): boolean {
    return this.servesOnPod(model) || (this.#network?.models().includes(model) ?? false);
  }

  /** podModels().includes(model), reading only that model's files. */
  servesOnPod(model: string): boolean {
    return this.#d.catalog.holds(model) || this.#d.board.remoteModels(this.#live()).has(model) || Object.values(this.#d.state().instances).some((e) => e.model === model);
  }

  /** Models the pod serves: this node's files, live peers' announced models and placed instances. */
  podModels(): string[] {
    const ids = new Set([...this.#d.catalog.list(), ...this.#d.board.remoteModels(this.#live()).keys(), ...Object.values(this.#d.state().instances).map((e) => e.model)]);
    return [...ids].sort();
  }

  /** The model's description: from this node's files, else from a live peer that holds it. */
  async describe(model: string): Promise<ModelDescription> {
    if (this.#d.catalog.has(model)) return this.#d.catalog.describe(model);
    const remote = this.#d.board.remoteModels(this.#live()).get(model);
    if (remote) return remote.description;
    const placed = Object.values(this.#d.state().instances).find((e) => e.model === model);
    if (placed) return placed.plan.model;
    throw new UnknownModelError(`model '${model}' is not in this pod (see GET /v1/models; pull it with \`orchard pull ORG/NAME\`)`);
  }

  /** The placement `req` would get now (what `GET /api/plan` shows). */
  async planFor(model: string, req: PlacementRequest): Promise<{ plan: InstancePlan; description: ModelDescription; context: number }> {
    const description = await this.describe(model);
    const { context, sequences } = this.#withDefaults(req);
    const profile = servingProfile(description, { context, sequences });
    return { plan: place(description, this.#d.placeableCluster(), req, profile), description, context: profile.contextTokens };
  }

  /** `req` with this node's context and batch where it names none: what a placement from here asks for. */
  #withDefaults(req: PlacementRequest): PlacementRequest {
    return { ...req, ...(req.context === undefined && this.#d.defaultContext ? { context: this.#d.defaultContext } : {}), sequences: req.sequences ?? this.#d.defaultSequences };
  }

  /** An instance of `model` placed as asked (an existing one, or a new one through the coordinator). */
  async ensurePlaced(model: string, req: PlacementRequest, o: { exclusive: boolean; explicit: boolean }, timeoutMs = 30_000): Promise<InstanceEntry> {
    const { exclusive } = o;
    const existing = findExisting(this.#d.state(), model, req, exclusive);
    if (existing) return existing;
    const requested = this.#withDefaults(req);
    // Just after start-up the state may hold no profile yet (not even this node's): wait for one, bounded.
    if (this.#d.placeableCluster().nodes.length === 0) {
      await until(this.#d.changes, () => (this.#d.placeableCluster().nodes.length > 0 ? true : undefined), { timeoutMs: Math.min(timeoutMs, 10_000), timeout: () => new Error('no profile yet') }).catch(() => undefined);
    }
    let description: ModelDescription;
    try {
      // Planned here first, so an impossible placement is answered at once with the reason.
      description = (await this.planFor(model, requested)).description;
    } catch (err) {
      if (err instanceof UnknownModelError) throw new ServeError(404, 'model_not_found', err.message);
      if (err instanceof PlacementError) throw new ServeError(503, 'placement_failed', `cannot place ${model}: ${err.message}`);
      throw err;
    }
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        this.#d.requestPlacement(model, description, requested, o);
      } catch (err) {
        if (err instanceof PlacementError) throw new ServeError(503, 'placement_failed', `cannot place ${model}: ${err.message}`);
        throw err;
      }
      const wait = Math.min(ASK_AGAIN_MS, deadline - Date.now());
      if (wait <= 0) throw new ServeError(503, 'placement_timeout', `the coordinator did not place ${model} within ${Math.round(timeoutMs / 1000)} s`);
      try {
        return await until(this.#d.changes, () => findExisting(this.#d.state(), model, req, exclusive), { timeoutMs: wait, timeout: () => new Error('not yet') });
      } catch {
        /* not placed yet: ask again (the message may have been lost, or the coordinator changed) */
      }
    }
  }

  /**
   * A ready instance of `model`, least loaded first, placing one when there is none. Rejects at once when
   * the model is marked failed or an instance being waited for fails, with the reason.
   */
  async pick(model: string, timeoutMs: number, signal?: AbortSignal): Promise<InstanceEntry> {
    const deadline = Date.now() + timeoutMs;
    const failedModel = () => this.#d.state().failedModels[model];
    const refusal = () => {
      const f = failedModel();
      if (f) return new ServeError(503, 'model_failed', `${model} failed to load ${f.attempts} times and is not placed again until loaded explicitly (orchard load ${model}): ${f.reason}`);
      return null;
    };
    for (;;) {
      const refused = refusal();
      if (refused) throw refused;
      const found = this.#readyInstance(model);
      if (found) return found;
      let waitingFor = Object.values(this.#d.state().instances).filter((e) => e.model === model);
      if (waitingFor.length === 0) {
        waitingFor = [await this.ensurePlaced(model, { strategy: 'auto' }, { exclusive: false, explicit: false }, Math.max(1000, deadline - Date.now()))];
      }
      const ids = new Set(waitingFor.map((e) => e.id));
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new ServeError(503, 'model_not_ready', `no instance of ${model} became ready within ${Math.round(timeoutMs / 1000)} s`);
      const outcome = await until<InstanceEntry | ServeError | 'replaced'>(
        this.#d.changes,
        () => {
          const ready = this.#readyInstance(model);
          if (ready) return ready;
          const r = refusal();
          if (r) return r;
          for (const id of ids) {
            // A load failure (model files, fetch) will not heal by waiting; an instance that died while
            // serving (a node lost) is being replaced: wait for its successor.
            const f = this.#d.board.failure(id);
            if (f?.phase === 'load') return new ServeError(503, 'model_load_failed', `the instance of ${model} failed on node ${f.from}: ${f.reason}`);
          }
          // The instances waited for are gone (removed, retired): look again.
          if (![...ids].some((id) => this.#d.state().instances[id])) return 'replaced';
          return undefined;
        },
        { timeoutMs: remaining, signal, timeout: () => new ServeError(503, 'model_not_ready', `no instance of ${model} became ready within ${Math.round(timeoutMs / 1000)} s`) },
      ).catch((err) => {
        if (err instanceof ServeError) throw err;
        throw new ServeError(499, 'cancelled', 'client went away');
      });
      if (outcome instanceof ServeError) throw outcome;
      if (outcome !== 'replaced') return outcome;
    }
  }

  #readyInstance(model: string): InstanceEntry | undefined {
    const { board } = this.#d;
    const all = Object.values(this.#d.state().instances);
    // An instance whose successor serves takes no new requests (it finishes what it has, then retires).
    const ready = all.filter((e) => e.model === model && board.isReady(e.id) && !all.some((o) => o.plan.supersedes === e.id && board.isReady(o.id)));
    if (!ready.length) return undefined;
    const load = (e: InstanceEntry) => {
      const s = board.status(e.id);
      return s ? (s.active + s.queued) / Math.max(1, s.capacity + 1) : 0;
    };
    return ready.sort((a, b) => load(a) - load(b) || (a.id < b.id ? -1 : 1))[0];
  }

  /** Runs a local request: on the pod, or whole on another pod when the pod does not serve the model. */
  async run(model: string, req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal, readyTimeoutMs: number): Promise<void> {
    const network = this.#network;
    if (!network) return this.runOnPod(model, req, emit, signal, readyTimeoutMs);
    if (!this.servesOnPod(model)) return network.run(model, req, emit, signal);
    const ended = network.localStarted();
    try {
      return await this.runOnPod(model, req, emit, signal, readyTimeoutMs);
    } finally {
      ended();
    }
  }

  /** Runs `req` on a ready instance of `model`: here when this node drives it, else on its driver. */
  async runOnPod(model: string, req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal, readyTimeoutMs: number): Promise<void> {
    const entry = await this.pick(model, readyTimeoutMs, signal);
    const exec = this.#d.executor(entry.id);
    if (exec) return exec.run(req, emit, signal);
    return this.#d.forward(entry.nodes[0], entry.id, req, emit, signal);
  }
}
