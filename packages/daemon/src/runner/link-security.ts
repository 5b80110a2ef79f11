/**
 * Which data-plane connections a runner wants encrypted. Activations and all-reduce traffic are
 * encrypted on every link that is not a direct cable between the two machines: Ethernet and Wi-Fi
 * pass through switches and access points others share, and anything routed through hosts nobody
 * here controls. A Thunderbolt cable joins exactly the two ends (and RDMA over it carries no TCP
 * at all), and a connection between two ranks on one machine never leaves it: those stay plain.
 *
 * Each end judges from its own side of the connection: its local address belongs to one of this
 * node's Thunderbolt interfaces and the peer's address is on that interface's subnet (the peer is
 * at the other end of that cable, not behind a router). The transport encrypts when either end
 * asks, so one node's doubt is enough. `always` and `never` override the rule on this node. The
 * weights plane (store/peers/) follows the same rule on its own links.
 */
import type { NetInterface } from '../profile/types.js';
import { isLoopbackAddress } from '../config/addresses.js';
import { sameSubnet } from '../links/paths.js';
import type { StreamEncryption } from '@orchard/transport';
import type { CipherName } from './transport.js';

export interface DataPlaneSecurity {
  encryption: 'auto' | 'always' | 'never';
  cipher: 'auto' | CipherName;
  /** IPv4 CIDRs of this node's direct-cable (Thunderbolt) interfaces, e.g. "10.10.0.1/30". */
  directCidrs: string[];
}

/** The default when the daemon passes nothing: encrypt everything that leaves the machine. */
export const DEFAULT_SECURITY: DataPlaneSecurity = { encryption: 'auto', cipher: 'auto', directCidrs: [] };

/** The CIDRs of a profile's Thunderbolt interfaces. */
export function directCidrsOf(interfaces: readonly NetInterface[] | undefined): string[] {
  return (interfaces ?? []).filter((i) => i.kind === 'thunderbolt').flatMap((i) => i.ipv4.filter((c) => c.includes('/')));
}

const plainV4 = (a: string) => (a.startsWith('::ffff:') ? a.slice(7) : a);

/** Why a connection needs no encryption, or null when it does (under `auto`). */
export function directLinkReason(localAddress: string, remoteAddress: string, directCidrs: readonly string[]): string | null {
  const local = plainV4(localAddress);
  const remote = plainV4(remoteAddress);
  if (isLoopbackAddress(local) || isLoopbackAddress(remote) || (local !== '' && local === remote)) return 'same machine';
  const cable = directCidrs.find((c) => c.split('/')[0] === local && sameSubnet(c, remote));
  return cable ? `direct cable (${cable})` : null;
}

/** The rule as the transport asks it, for data-plane groups and weights links alike. */
export function encryptionPolicy(s: DataPlaneSecurity): StreamEncryption {
  return {
    cipher: s.cipher,
    wants: (link) => {
      if (s.encryption === 'always') return true;
      if (s.encryption === 'never') return false;
      return directLinkReason(link.localAddress, link.remoteAddress, s.directCidrs) === null;
    },
  };
}

/** Words for logs and status: how the TCP links to `peers` are protected, e.g. "encrypted (aes-256-gcm)". */
export function describeEncryption(encryption: readonly (CipherName | null)[], peers: readonly number[]): string {
  if (peers.length === 0) return '';
  const by = new Map<string, number[]>();
  for (const peer of peers) {
    const what = encryption[peer] ? `encrypted (${encryption[peer]})` : 'unencrypted';
    by.set(what, [...(by.get(what) ?? []), peer]);
  }
  if (by.size === 1) return [...by.keys()][0];
  return [...by].map(([what, ranks]) => `${what} to rank${ranks.length > 1 ? 's' : ''} ${ranks.join(', ')}`).join('; ');
}
