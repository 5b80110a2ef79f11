/**
 * The pod as the network service sees it, built from the control plane and serving: what the pod
 * serves (ready instances, with the decode speed they measured) or could load (files held by its
 * nodes), its nodes for the map, its load, and the one way in — `Router.runOnPod`, which never
 * sends a job on to the network again.
 */
import type { ModelDescription } from '../models/description.js';
import { servingProfile } from '../serving/profile.js';
import type { Serving } from '../serving/serving.js';
import type { ClusterState } from '../state/types.js';
import type { PodModel, PodPort } from './service.js';

export interface ServingPodPort extends PodPort {
  /** Re-reads model descriptions (async); `models()` answers from what was read last. */
  refresh(): Promise<void>;
}

/** The control plane's part of the port: this node's name and context setting, the state, who speaks. */
export interface PodSide {
  name: string;
  /** --context: the tokens a model that is not loaded yet would serve (null: its serving default). */
  context: number | null;
  state(): ClusterState;
  /** Whether this node coordinates the pod (and so answers for it on the network). */
  isCoordinator(): boolean;
}

export function podPort(pod: PodSide, serving: Pick<Serving, 'router' | 'board' | 'readyTimeoutMs'>): ServingPodPort {
  const { router, board } = serving;
  let described = new Map<string, ModelDescription>();
  const state = () => pod.state();
  const live = () => new Set(Object.values(state().nodes).filter((n) => n.status === 'live').map((n) => n.peerId));

  return {
    name: pod.name,
    run: (model, req, emit, signal) => router.runOnPod(model, req, emit, signal, serving.readyTimeoutMs),

    async refresh() {
      const next = new Map<string, ModelDescription>();
      const remote = board.remoteModels(live());
      for (const id of router.podModels()) {
        const d = await router.describe(id).catch(() => remote.get(id)?.description);
        if (d && !d.unsupported) next.set(id, d);
      }
      described = next;
    },

    models(): PodModel[] {
      const instances = Object.values(state().instances);
      return [...described].map(([name, d]) => {
        const ready = instances.filter((e) => e.model === name && board.isReady(e.id));
        const speeds = ready.map((e) => board.status(e.id)?.decodeTokensPerSecond ?? null).filter((x): x is number => x !== null && x > 0);
        return {
          name,
          state: ready.length ? 'serving' : 'loadable',
          contextTokens: ready[0]?.plan.context ?? servingProfile(d, { context: pod.context ?? undefined }).contextTokens,
          decodeTps: speeds.length ? Math.max(...speeds) : null,
          // Instances measure decode only; routing then assumes prefill at least as fast.
          prefillTps: null,
          bytes: d.spec.totalBytes,
        };
      });
    },

    nodes() {
      return Object.values(state().nodes)
        .filter((n) => n.status === 'live' && n.profile)
        .map((n) => ({ name: n.name.slice(0, 128), chip: n.profile!.chip.slice(0, 128), memoryBytes: n.profile!.memory.totalBytes }));
    },

    load() {
      let active = 0;
      let queued = 0;
      let ready = 0;
      for (const e of Object.values(state().instances)) {
        const s = board.status(e.id);
        if (!s) continue;
        active += s.active;
        queued += s.queued;
        if (s.ready) ready++;
      }
      // One request at a time per instance is what an executor runs without queueing.
      return { active, queued, capacity: Math.max(1, ready) };
    },

    speaksForPod: () => pod.isCoordinator(),
  };
}
