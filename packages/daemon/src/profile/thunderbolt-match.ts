/**
 * Which peer each Thunderbolt cable reaches: a peer Mac shows up under one of our buses with its own
 * domain UUID, which is one of the `domainUuid`s that peer reports for its buses.
 */
import type { ThunderboltPort } from './types.js';

export interface ThunderboltCable {
  /** Our bus. */
  bus: string;
  peerId: string;
  /** Peer's bus at the other end. */
  peerBus: string;
  speedGbps: number | null;
}

export function matchThunderboltPeers(
  mine: ThunderboltPort[],
  peers: { peerId: string; thunderbolt: ThunderboltPort[] }[],
): ThunderboltCable[] {
  const byDomain = new Map<string, { peerId: string; bus: string }>();
  for (const p of peers) for (const port of p.thunderbolt) byDomain.set(port.domainUuid.toUpperCase(), { peerId: p.peerId, bus: port.bus });
  const cables: ThunderboltCable[] = [];
  for (const port of mine) {
    for (const remote of port.remoteDomainUuids) {
      const hit = byDomain.get(remote.toUpperCase());
      if (hit) cables.push({ bus: port.bus, peerId: hit.peerId, peerBus: hit.bus, speedGbps: port.speedGbps });
    }
  }
  return cables;
}
