export type { Cluster, ClusterNode, ClusterLink, LinkKind } from './cluster.js';
