/** Errors of the RDMA transport. Every one names the peer (rank and device/address) it concerns. */

export interface RdmaPeer {
  rank: number;
  /** e.g. `rdma_en3 -> 10.0.0.2`. */
  address?: string;
}

export function describeRdmaPeer(peer: RdmaPeer): string {
  return peer.address ? `rank ${peer.rank} (${peer.address})` : `rank ${peer.rank}`;
}

export class RdmaError extends Error {
  readonly code: string = 'ERR_RDMA';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** No completion arrived for longer than the timeout while work was outstanding (the watchdog). */
export class RdmaStallError extends RdmaError {
  override readonly code = 'ERR_RDMA_STALL';
  constructor(
    readonly peer: RdmaPeer,
    readonly timeoutMs: number,
    detail: string,
  ) {
    super(`RDMA link to ${describeRdmaPeer(peer)} stalled: no completion for ${timeoutMs} ms (${detail})`);
  }
}

/** A work completion came back with a non-success status. */
export class RdmaCompletionError extends RdmaError {
  override readonly code = 'ERR_RDMA_COMPLETION';
  constructor(
    readonly peer: RdmaPeer,
    readonly status: number,
    statusName: string,
    opcode: 'send' | 'recv',
  ) {
    super(`RDMA ${opcode} to ${describeRdmaPeer(peer)} failed: ${statusName}`);
  }
}

/** The peer sent a message of a different size than the receiver expected (or posting failed). */
export class RdmaProtocolError extends RdmaError {
  override readonly code = 'ERR_RDMA_PROTOCOL';
}

/** The link was closed or aborted; pending operations reject with this. */
export class RdmaClosedError extends RdmaError {
  override readonly code = 'ERR_RDMA_CLOSED';
}

/** Setting up RDMA failed (no device, port down, no IPv4 GID, RTR refused); the link falls back to TCP. */
export class RdmaSetupError extends RdmaError {
  override readonly code = 'ERR_RDMA_SETUP';
}
