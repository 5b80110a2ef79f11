export type { Group, OpOptions, ReduceOp, ReducibleBuffer } from './group.js';
export {
  TransportError,
  PeerTimeoutError,
  PeerClosedError,
  FrameError,
  AuthError,
  ConnectError,
  UsageError,
  GroupClosedError,
  describePeer,
  type PeerRef,
} from './errors.js';
export {
  startProbeServer,
  probeLink,
  type ProbeServer,
  type ProbeServerOptions,
  type ProbeLinkOptions,
  type LinkProbeResult,
} from './probe.js';
