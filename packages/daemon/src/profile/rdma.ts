/**
 * RDMA probes as the profile and `orchard doctor` see them. The `ibv_devices` / `ibv_devinfo -v` parsers
 * live in the transport (rdma/discovery.ts), which makes the per-link choice: using them here keeps the
 * profile (and so the planner's link kinds) reading the same facts the same way.
 */
import { rdma } from '@orchard/transport';
import type { RdmaDevice } from './types.js';

/** `rdma_ctl status` prints "enabled" or "disabled". */
export function parseRdmaCtlStatus(text: string): boolean | null {
  const t = text.trim().toLowerCase();
  if (/\bdisabled\b/.test(t)) return false;
  if (/\benabled\b/.test(t)) return true;
  return null;
}

/** Device names from `ibv_devices`. */
export function parseIbvDevices(text: string): string[] {
  return rdma.parseIbvDevices(text).map((d) => d.name);
}

export const isIpv4MappedGid = rdma.isIpv4MappedGid;

/** The profile's view of one parsed device: port 1's state, and whether it has an IPv4-mapped GID. */
export function profileDevice(d: rdma.IbvDevice): RdmaDevice {
  const port = d.ports.find((p) => p.port === 1) ?? d.ports[0];
  const portState = port?.state ?? null;
  return {
    name: d.name,
    interface: d.netdev,
    portState,
    active: portState === 'PORT_ACTIVE' || portState === 'ACTIVE',
    ipv4Gid: !!port?.gids.some((g) => rdma.ipv4FromMappedGid(g.gid) !== null),
  };
}

/** `ibv_devinfo [-v]`, one entry per device. */
export function parseIbvDevinfo(text: string): RdmaDevice[] {
  return rdma.parseIbvDevinfo(text).map(profileDevice);
}
