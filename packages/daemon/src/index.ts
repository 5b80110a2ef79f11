/**
 * @orchard/daemon: the control plane others build on.
 * - `Daemon.start(options, logger, { timings, compute })` runs a node's control plane alone: no HTTP
 *   (routes are registered only in `http/`, composed with serving by `orchard.ts`);
 *   `daemon.replica.propose()` logs coordinator decisions (placements).
 * - `clusterView(state)` is the planner's `Cluster` plus names and pod mode (GET /api/cluster).
 */
export { Daemon, type DaemonTimings, type DaemonExtensions, type DaemonCompute } from './daemon.js';
export { resolveOptions, OptionsError, type DaemonOptions, DEFAULT_API_PORT } from './config/options.js';
export { clusterView, type ClusterView, type ClusterNodeView, type PodMode } from './state/cluster-view.js';
export { Replica, type ReplicaOptions } from './state/replication.js';
export { applyEvent, applyEvents, liveNodeIds } from './state/apply.js';
export { electCoordinator } from './state/coordinator.js';
export type { ClusterEvent, ClusterEventType } from './state/events.js';
export type { ClusterState, NodeEntry, InstanceEntry } from './state/types.js';
export type { NodeProfile, Capability } from './profile/types.js';
export type { LinkMeasurement } from './links/types.js';
export { createLogger } from './logger.js';
