/**
 * Duplicate identity: two daemons running with the same peer key (a copied data dir). libp2p cannot
 * tell them apart, so they would flap. mDNS answers carry a per-process random name; an answer that
 * advertises OUR peer id under another process's name is the other copy.
 */
export interface DuplicateIdentity {
  peerId: string;
  /** Addresses the other copy advertises. */
  addresses: string[];
  detectedAt: number;
  message: string;
}

export function duplicateIdentityMessage(peerId: string, addresses: string[], peerKeyPath: string): string {
  const where = addresses.length ? ` at ${addresses.join(', ')}` : '';
  return (
    `another daemon${where} uses this node's identity (peer id ${peerId}); its data dir was probably copied from this one. ` +
    `Fix: on one of the two machines stop orchard, delete ${peerKeyPath} (or start with a fresh --data-dir) and start again to get a new identity.`
  );
}

/** Addresses advertised for our own peer id that are not ours: the other copy. */
export function foreignAddresses(advertised: string[], ours: string[]): string[] {
  const host = (a: string) => a.split('/p2p/')[0];
  const own = new Set(ours.map(host));
  return [...new Set(advertised.map(host))].filter((a) => !own.has(a));
}
