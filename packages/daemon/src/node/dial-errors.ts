/**
 * What a failed dial means for the user. With pnet, a peer holding another key (or none) fails in
 * many ways (noise length errors, resets, EOF, timeouts); all of those are "not in this cluster".
 * Only errors that happen before a TCP connection exists say the peer is unreachable.
 */
const UNREACHABLE = /ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|EADDRNOTAVAIL|ENOTFOUND|no valid addresses|NoValidAddresses/i;

export type DialFailure = 'unreachable' | 'not-in-cluster';

/** Everything a dial error says (libp2p wraps the socket's error in an aggregate or a cause). */
export function dialErrorText(err: unknown): string {
  const e = err as { code?: string; name?: string; message?: string; errors?: unknown[]; cause?: unknown };
  return [...new Set([e?.code, e?.name, e?.message, ...(Array.isArray(e?.errors) ? e.errors.map((x) => (x as Error)?.message) : []), (e?.cause as Error)?.message].filter(Boolean))].join(' ');
}

export function classifyDialError(err: unknown): DialFailure {
  return UNREACHABLE.test(dialErrorText(err)) ? 'unreachable' : 'not-in-cluster';
}

export function dialFailureMessage(kind: DialFailure, peer: string, privatePod: boolean): string {
  if (kind === 'unreachable') return `peer ${peer} is unreachable`;
  return privatePod
    ? `peer ${peer} is not in this cluster (it has no cluster key or a different one)`
    : `peer ${peer} is not in this cluster (it belongs to a private pod; start this daemon with its --cluster-key to join)`;
}
