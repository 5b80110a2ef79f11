/**
 * RDMA probes: `rdma_ctl status` (macOS only), `ibv_devices`, `ibv_devinfo -v` (macOS 26.2+ and
 * Linux rdma-core print the same layout).
 */
import type { RdmaDevice } from './types.js';

/** `rdma_ctl status` prints "enabled" or "disabled". */
export function parseRdmaCtlStatus(text: string): boolean | null {
  const t = text.trim().toLowerCase();
  if (/\bdisabled\b/.test(t)) return false;
  if (/\benabled\b/.test(t)) return true;
  return null;
}

/** `ibv_devices`: a header, a dashed rule, then "name  guid" rows. */
export function parseIbvDevices(text: string): string[] {
  const names: string[] = [];
  for (const line of text.split('\n')) {
    const cols = line.trim().split(/\s+/);
    if (cols.length < 1 || !cols[0] || cols[0] === 'device' || /^-+$/.test(cols[0])) continue;
    names.push(cols[0]);
  }
  return names;
}

/** rdma_en2 -> en2 (Apple pairs each device with its IP interface). */
export function pairedInterface(device: string): string | null {
  const m = /^rdma_(.+)$/.exec(device);
  return m ? m[1] : null;
}

/** True for ::ffff:a.b.c.d in either compressed or full hexadecimal form. */
export function isIpv4MappedGid(gid: string): boolean {
  const g = gid.trim().toLowerCase();
  if (/^::ffff:\d+\.\d+\.\d+\.\d+$/.test(g)) return true;
  return /^(0000:){5}ffff:[0-9a-f]{4}:[0-9a-f]{4}$/.test(g);
}

/** `ibv_devinfo [-v]`: blocks per `hca_id:`; the first port's state and GID table are used. */
export function parseIbvDevinfo(text: string): RdmaDevice[] {
  const devices: RdmaDevice[] = [];
  let cur: RdmaDevice | null = null;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = /^hca_id:\s*(\S+)/.exec(line))) {
      cur = { name: m[1], interface: pairedInterface(m[1]), portState: null, active: false, ipv4Gid: false };
      devices.push(cur);
    } else if (cur && (m = /^state:\s*(\S+)/.exec(line)) && cur.portState === null) {
      cur.portState = m[1];
      cur.active = m[1] === 'PORT_ACTIVE';
    } else if (cur && (m = /^GID\[\s*\d+\]:\s*([0-9a-fA-F:.]+)/.exec(line))) {
      if (isIpv4MappedGid(m[1])) cur.ipv4Gid = true;
    }
  }
  return devices;
}
