/**
 * The cluster description the planner consumes. The daemon produces exactly this from live
 * profiles and measured links (`orchard cluster --json`); users can also write it by hand.
 */
export type LinkKind = 'rdma' | 'thunderbolt' | 'ethernet' | 'wifi';

export interface ClusterNode {
  /** Stable node id (the daemon uses the libp2p peer id). */
  id: string;
  /** Human-readable chip name, e.g. "Apple M3 Ultra"; looked up in the chip table for fallbacks. */
  chip?: string;
  /** Physical memory in bytes. */
  memoryBytes: number;
  /** Memory the node can give to a model, in bytes. */
  availableBytes: number;
  /** Measured (or spec) memory bandwidth in GB/s; falls back to the chip table. */
  memoryBandwidthGBps?: number;
  /** Measured (or spec) dense compute in TFLOP/s; falls back to the chip table. */
  tflops?: number;
}

export interface ClusterLink {
  a: string;
  b: string;
  kind: LinkKind;
  /** One-way small-message latency in microseconds. */
  latencyUs: number;
  /** Bandwidth per direction in Gbit/s. */
  bandwidthGbps: number;
}

export interface Cluster {
  nodes: ClusterNode[];
  /** Symmetric; a pair with no entry is not directly connected. */
  links: ClusterLink[];
}
