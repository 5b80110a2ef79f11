/** RDMA transport: verbs table, simulated fabric, protocol links, mesh `Group`, discovery. */
import { connectRdmaMesh, type LinkChoice, type RdmaMeshOptions } from './connect.js';
import { MeshGroup, ringNeighbours, type Topology } from './mesh-group.js';

export * from './verbs.js';
export * from './errors.js';
export * from './size-classes.js';
export { SimFabric, type SimFabricOptions, type SimDeviceSpec } from './sim-fabric.js';
export { RdmaLink, CompletionPoller, linkOverGroup, type PeerLink, type RdmaLinkOptions } from './link.js';
export { connectRdmaMesh, findIpv4GidIndex, type ControlChannel, type LinkChoice, type RdmaMesh, type RdmaMeshOptions } from './connect.js';
export { MeshGroup, DEFAULT_SMALL_ALL_REDUCE_BYTES, ringNeighbours, type MeshGroupOptions, type Topology } from './mesh-group.js';
export { addonStatus, loadVerbsAddon, nativeVerbs, DEFAULT_ADDON_PATH, type AddonStatus } from './native.js';
export {
  rdmaReadiness,
  summarizeReadiness,
  parseIbvDevices,
  parseIbvDevinfo,
  ipv4FromMappedGid,
  pairedNetdev,
  type RdmaReadiness,
  type DeviceReadiness,
  type IbvDevice,
} from './discovery.js';

export interface RdmaGroupOptions extends RdmaMeshOptions {
  smallAllReduceBytes?: number;
  /** 'ring' links only rank±1 (neighbour-only cabling). @default 'mesh' */
  topology?: Topology;
}

/**
 * Sets up every link (RDMA where both ends are ready, the fallback elsewhere) and returns a `Group` over
 * them plus the per-link choice with its reason.
 */
export async function createRdmaGroup(options: RdmaGroupOptions): Promise<{ group: MeshGroup; choices: LinkChoice[] }> {
  const peers = options.topology === 'ring' ? ringNeighbours(options.rank, options.size) : options.peers;
  const mesh = await connectRdmaMesh({ ...options, peers });
  const group = new MeshGroup({
    rank: options.rank,
    size: options.size,
    topology: options.topology,
    links: mesh.links,
    smallAllReduceBytes: options.smallAllReduceBytes,
    timeoutMs: options.timeoutMs,
    onClose: () => mesh.close(),
  });
  return { group, choices: mesh.choices };
}
