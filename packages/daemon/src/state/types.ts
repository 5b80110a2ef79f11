/**
 * Cluster state: frozen plain data, replaced (never mutated) by the reducers in reducers/.
 * Every node holds the same state, sequenced by the coordinator (see replication.ts).
 */
import type { NodeProfile } from '../profile/types.js';
import type { LinkMeasurement } from '../links/types.js';
import type { PlacedPlan } from './placed-plan.js';

export type NodeStatus = 'live' | 'gone';

export interface NodeEntry {
  readonly peerId: string;
  readonly name: string;
  readonly status: NodeStatus;
  readonly joinedAt: number;
  readonly leftAt: number | null;
  /** Why it left: silent for too long, or said goodbye. */
  readonly leftReason: 'silent' | 'shutdown' | null;
  readonly profile: NodeProfile | null;
}

/** A model instance placed on the pod. */
export interface InstanceEntry {
  readonly id: string;
  readonly model: string;
  readonly placedAt: number;
  readonly nodes: readonly string[];
  readonly plan: PlacedPlan;
}

/** A model placement gave up on, with the last failure's reason. */
export interface FailedModel {
  readonly model: string;
  readonly reason: string;
  readonly attempts: number;
  readonly at: number;
}

export interface ClusterState {
  readonly nodes: Readonly<Record<string, NodeEntry>>;
  /** Keyed by linkKey(a, b, via): one entry per pair and network path. */
  readonly links: Readonly<Record<string, LinkMeasurement>>;
  readonly instances: Readonly<Record<string, InstanceEntry>>;
  /** Models not placed again until asked for explicitly, by model id. */
  readonly failedModels: Readonly<Record<string, FailedModel>>;
}

export const emptyState: ClusterState = Object.freeze({
  nodes: Object.freeze({}),
  links: Object.freeze({}),
  instances: Object.freeze({}),
  failedModels: Object.freeze({}),
});
