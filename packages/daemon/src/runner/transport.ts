/** The data-plane pieces the runners use from @orchard/transport, in one place. */
export { createTcpGroup, listenTcp, createSimGroup, createSimFabric, type TcpPeer, type TcpListener, type TcpAddress, type Group } from '@orchard/transport';
