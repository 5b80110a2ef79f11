/** Re-exported so tests and other packages parse multiaddrs with the daemon's own version. */
export { multiaddr, type Multiaddr } from '@multiformats/multiaddr';
