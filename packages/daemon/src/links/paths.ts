/**
 * Which network paths join two nodes: every pair of IPv4 interfaces that share a subnet, with the
 * link kind read from the interfaces at both ends. Pure, so the classification is tested directly.
 */
import type { InterfaceKind, NodeProfile } from '../profile/types.js';
import type { LinkKindName } from './types.js';

export interface LinkPath {
  localInterface: string;
  localAddress: string;
  remoteInterface: string;
  remoteAddress: string;
  kind: LinkKindName;
  rdmaCapable: boolean;
}

function parseCidr(cidr: string): { addr: number; prefix: number; text: string } | null {
  const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)(?:\/(\d+))?$/.exec(cidr);
  if (!m) return null;
  const addr = ((+m[1] << 24) | (+m[2] << 16) | (+m[3] << 8) | +m[4]) >>> 0;
  return { addr, prefix: m[5] === undefined ? 32 : +m[5], text: `${m[1]}.${m[2]}.${m[3]}.${m[4]}` };
}

export function sameSubnet(a: string, b: string): boolean {
  const x = parseCidr(a);
  const y = parseCidr(b);
  if (!x || !y) return false;
  const prefix = Math.min(x.prefix, y.prefix);
  const mask = prefix === 0 ? 0 : (~0 << (32 - prefix)) >>> 0;
  return (x.addr & mask) === (y.addr & mask) && x.addr !== y.addr;
}

/** The slower end decides: Wi-Fi anywhere makes it Wi-Fi; Thunderbolt needs both ends. */
export function classifyLink(local: InterfaceKind, remote: InterfaceKind): LinkKindName {
  if (local === 'wifi' || remote === 'wifi') return 'wifi';
  if (local === 'thunderbolt' && remote === 'thunderbolt') return 'thunderbolt';
  return 'ethernet';
}

/** `available` is the transport's verdict (addon + library too), so a link is 'rdma' only where runners would try RDMA. */
function rdmaActiveOn(profile: NodeProfile, iface: string): boolean {
  return profile.rdma.enabled !== false && profile.rdma.available !== false && profile.rdma.devices.some((d) => d.interface === iface && d.active && d.ipv4Gid);
}

export function linkPaths(local: NodeProfile, remote: NodeProfile): LinkPath[] {
  const paths: LinkPath[] = [];
  const usable = (k: InterfaceKind) => k !== 'loopback' && k !== 'other';
  for (const li of local.interfaces) {
    if (!usable(li.kind)) continue;
    for (const ri of remote.interfaces) {
      if (!usable(ri.kind)) continue;
      for (const la of li.ipv4) {
        const ra = ri.ipv4.find((r) => sameSubnet(la, r));
        if (!ra) continue;
        const kind = classifyLink(li.kind, ri.kind);
        paths.push({
          localInterface: li.name,
          localAddress: parseCidr(la)!.text,
          remoteInterface: ri.name,
          remoteAddress: parseCidr(ra)!.text,
          kind,
          rdmaCapable: kind === 'thunderbolt' && rdmaActiveOn(local, li.name) && rdmaActiveOn(remote, ri.name),
        });
        break;
      }
    }
  }
  return paths;
}
