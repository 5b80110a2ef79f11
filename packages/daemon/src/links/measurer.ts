/**
 * Measures every path to peers with a larger peer id (so each pair is probed once, by its smaller
 * end) over the transport's link probe, and reports the results. Probes run one at a time so they
 * do not disturb each other's bandwidth figures.
 */
import type { NodeProfile } from '../profile/types.js';
import { linkPaths, type LinkPath } from './paths.js';
import type { LinkMeasurement } from './types.js';

/** The one thing we need from the transport: measure a path. */
export type LinkProber = (path: LinkPath, port: number) => Promise<{ latencyUs: number; bandwidthGbps: number }>;

export interface MeasureResult {
  measurements: LinkMeasurement[];
  failures: { peerId: string; address: string; error: string }[];
}

/** Which remote facts a measurement depends on: re-measure when they change. */
export function pathSignature(local: NodeProfile, remote: NodeProfile): string {
  return JSON.stringify([remote.probePort, linkPaths(local, remote)]);
}

export async function measurePeer(self: NodeProfile, peer: NodeProfile, probe: LinkProber): Promise<MeasureResult> {
  const result: MeasureResult = { measurements: [], failures: [] };
  for (const path of linkPaths(self, peer)) {
    try {
      const r = await probe(path, peer.probePort);
      result.measurements.push({
        a: self.peerId,
        b: peer.peerId,
        kind: path.rdmaCapable ? 'rdma' : path.kind,
        aInterface: path.localInterface,
        bInterface: path.remoteInterface,
        address: path.remoteAddress,
        rdmaCapable: path.rdmaCapable,
        latencyUs: r.latencyUs,
        bandwidthGbps: r.bandwidthGbps,
        measuredAt: Date.now(),
        measuredBy: self.peerId,
      });
    } catch (err) {
      result.failures.push({ peerId: peer.peerId, address: path.remoteAddress, error: (err as Error).message });
    }
  }
  return result;
}
