/**
 * The data-plane pieces the runners use from @orchard/transport. The TCP group and the simulated
 * fabric are not re-exported by the package index yet, so they are imported by path here, in one place.
 */
export { createTcpGroup, type TcpPeer } from '../../../transport/src/tcp/group.js';
export { listenTcp, type TcpListener, type TcpAddress } from '../../../transport/src/tcp/listener.js';
export { createSimGroup } from '../../../transport/src/sim/fabric.js';
export type { Group } from '@orchard/transport';
