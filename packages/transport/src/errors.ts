/**
 * Every error the transport throws on purpose. Callers branch on the class (or `code`), and the
 * message always names the peer (rank and address) or the field that was wrong.
 */

/** Base class: anything the transport rejects with deliberately. */
export class TransportError extends Error {
  readonly code: string = 'ERR_TRANSPORT';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Identifies a peer in error messages: `rank 2 (10.0.0.3:7100)`. */
export interface PeerRef {
  /** Absent for endpoints that are not group members (a probe server). */
  rank?: number;
  address?: string;
}

export function describePeer(peer: PeerRef): string {
  if (peer.rank === undefined) return peer.address ?? 'unknown peer';
  return peer.address ? `rank ${peer.rank} (${peer.address})` : `rank ${peer.rank}`;
}

/** A peer sent nothing (or accepted nothing) for longer than the operation's timeout. */
export class PeerTimeoutError extends TransportError {
  override readonly code = 'ERR_PEER_TIMEOUT';
  constructor(
    readonly peer: PeerRef,
    readonly timeoutMs: number,
    what = 'waiting for',
  ) {
    super(`timed out after ${timeoutMs} ms ${what} ${describePeer(peer)}`);
  }
}

/** The connection to a peer closed or failed while operations were pending. */
export class PeerClosedError extends TransportError {
  override readonly code = 'ERR_PEER_CLOSED';
  constructor(
    readonly peer: PeerRef,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(`connection to ${describePeer(peer)} lost: ${reason}`, options);
  }
}

/** The peer broke the wire protocol (bad magic, wrong length, bad sequence, failed decryption). */
export class FrameError extends TransportError {
  override readonly code = 'ERR_FRAME';
}

/** The handshake failed: wrong secret, wrong group, wrong rank, or a client that is not ours. */
export class AuthError extends TransportError {
  override readonly code = 'ERR_AUTH';
}

/** Could not establish a connection to a peer (all addresses refused or timed out). */
export class ConnectError extends TransportError {
  override readonly code = 'ERR_CONNECT';
  constructor(
    readonly peer: PeerRef,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`cannot connect to ${describePeer(peer)}: ${message}`, options);
  }
}

/** The operation was used wrongly (rank out of range, buffer sizes that do not match). */
export class UsageError extends TransportError {
  override readonly code = 'ERR_USAGE';
}

/** The group was closed, or broke after an earlier failure; the message carries the first cause. */
export class GroupClosedError extends TransportError {
  override readonly code = 'ERR_GROUP_CLOSED';
}
