/**
 * @orchard/transport — links and collectives over TCP, RDMA and a simulated fabric.
 *
 * - `Group`: the collectives contract (send/recv/allReduce/allGather/barrier/close).
 * - `listenTcp` + `createTcpGroup`: the authenticated TCP data plane.
 * - `createSimGroup` / `createSimFabric`: in-process groups with injectable latency, bandwidth, failures.
 * - `startProbeServer` + `probeLink`: latency/bandwidth of a link, for the planner's `links`.
 * - `connectAuthenticated` / `acceptAuthenticated`: a byte stream behind the same HMAC handshake, for
 *   other protocols inside the pod's key (the daemon's weights), sealed when either end asks.
 * - `Exchange` + `groupOverExchange` + the schedules: for other backends (RDMA) to reuse.
 * The conformance suite lives in `@orchard/transport/testing`.
 */
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
export { createTcpGroup, type TcpGroup, type TcpGroupOptions, type TcpPeer, type EncryptionPolicy, type LinkEnds } from './tcp/group.js';
export { listenTcp, type TcpListener, type TcpAddress, type ListenTcpOptions } from './tcp/listener.js';
export { connectAuthenticated, acceptAuthenticated, type AuthenticatedSocket, type ConnectAuthenticatedOptions, type SocketEnds, type StreamEncryption } from './tcp/authenticated-socket.js';
export { SealedStream, RECORD_MAX_BYTES } from './tcp/sealed-stream.js';
export { fastestCipher, measureCiphers, CIPHERS, type CipherName } from './wire/aead.js';
export { dataPlaneProcessEnv, DATA_PLANE_MALLOC_TUNABLES } from './process-env.js';
export { createSimGroup, createSimFabric, type SimFabric, type SimFabricOptions, type SimFailure } from './sim/fabric.js';
export { groupOverExchange, type CollectiveOptions } from './exchange-group.js';
export { USER_TAG, collectiveTag, type Exchange, type ExchangeOpOptions } from './collectives/exchange.js';
export { segments, chunks, ringSteps, chooseAllReduce, type Range, type RingStep, type AllReduceAlgorithm } from './collectives/schedule.js';
export { combine, reduceInRankOrder, floatToHalf, halfToFloat } from './collectives/reduce.js';
export { ALLREDUCE_DIRECT_MAX_SEND_BYTES, PIPELINE_CHUNK_BYTES, DEFAULT_TIMEOUT_MS } from './collectives/tuning.js';
// RDMA over Thunderbolt (issue 8): everything under `rdma`; the daemon's entry points also directly.
export * as rdma from './rdma/index.js';
export { createRdmaGroup, rdmaReadiness, linkOverGroup, type RdmaReadiness, type LinkChoice, type RdmaGroupOptions } from './rdma/index.js';
