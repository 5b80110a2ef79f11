/** The data-plane pieces the runners use from @orchard/transport, in one place. */
export { createTcpGroup, listenTcp, createSimGroup, createSimFabric, dataPlaneProcessEnv, type TcpPeer, type TcpListener, type TcpAddress, type Group, type TcpGroup, type EncryptionPolicy, type CipherName } from '@orchard/transport';
// RDMA per link with TCP fallback (runner/data-plane.ts); `rdma` holds the verbs tables and the simulated fabric.
export { createRdmaGroup, linkOverGroup, rdma, type LinkChoice } from '@orchard/transport';
