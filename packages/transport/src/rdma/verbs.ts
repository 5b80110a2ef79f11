/**
 * The verbs layer: the handful of ibverbs calls the RDMA transport needs, as a table of functions.
 *
 * Three implementations sit behind it: the simulated fabric (`sim-fabric.ts`), rdma-core on Linux and
 * Apple's `librdma.dylib` (both through the Node-API addon in `native/`). Everything above this file
 * (size classes, receive-before-send, completion dispatch, watchdog, collectives) is shared, so what the
 * simulated fabric proves about the protocol holds for the real libraries as long as they keep the rules
 * in `VerbsLimits`.
 *
 * Handles are small integers owned by the implementation; work requests name memory as
 * (memory region, offset, length) so the native side can bounds-check before handing a pointer to the NIC.
 */

/** Queues count 4 KiB frames; a SEND and its RECV must cover the same number of them (Apple). */
export const FRAME_BYTES = 4096;
/** 4095 frames of 4 KiB: Apple's largest message. */
export const APPLE_MAX_MESSAGE_BYTES = 16_773_120;
/** Apple allows at most 10 queue pairs. */
export const APPLE_MAX_QPS = 10;
/** Outstanding work requests per queue (Apple: 4095). */
export const MAX_OUTSTANDING_WR = 4095;

export type QpType = 'UC' | 'RC';
export type QpState = 'RESET' | 'INIT' | 'RTR' | 'RTS' | 'ERR';
export type PortState = 'DOWN' | 'INIT' | 'ARMED' | 'ACTIVE' | 'ACTIVE_DEFER' | 'NOP';
export type Handle = number;

/** `enum ibv_wc_status` values (same numbers in rdma-core and Apple's header). */
export const WcStatus = {
  SUCCESS: 0,
  LOC_LEN_ERR: 1,
  LOC_QP_OP_ERR: 2,
  LOC_PROT_ERR: 4,
  WR_FLUSH_ERR: 5,
  REM_INV_REQ_ERR: 9,
  REM_OP_ERR: 11,
  RETRY_EXC_ERR: 12,
  RNR_RETRY_EXC_ERR: 13,
  FATAL_ERR: 19,
  GENERAL_ERR: 21,
} as const;

const statusNames = new Map<number, string>(Object.entries(WcStatus).map(([k, v]) => [v, k]));
export function wcStatusName(status: number): string {
  return statusNames.get(status) ?? `status ${status}`;
}

/** What a library allows; the protocol reads these instead of asking "which library is this". */
export interface VerbsLimits {
  /** Queue-pair types the library accepts, preferred first. Apple: UC only. */
  qpTypes: readonly QpType[];
  /** Most queue pairs per device. */
  maxQps: number;
  /** Largest single SEND in bytes. */
  maxMessageBytes: number;
  /** Outstanding work requests per queue. */
  maxWr: number;
  /** SEND and RECV must cover the same number of 4 KiB frames. */
  frameCountMustMatch: boolean;
}

export const APPLE_LIMITS: VerbsLimits = {
  qpTypes: ['UC'],
  maxQps: APPLE_MAX_QPS,
  maxMessageBytes: APPLE_MAX_MESSAGE_BYTES,
  maxWr: MAX_OUTSTANDING_WR,
  frameCountMustMatch: true,
};

/** rdma-core on Linux: RC preferred. The protocol still keeps Apple's frame rule so one code path serves both. */
export const LINUX_LIMITS: VerbsLimits = {
  qpTypes: ['RC', 'UC'],
  maxQps: 1 << 16,
  maxMessageBytes: 1 << 30,
  maxWr: 16_384,
  frameCountMustMatch: false,
};

export interface PortInfo {
  state: PortState;
  lid: number;
  /** Active MTU in bytes (256..4096). */
  activeMtu: number;
  gidTableLength: number;
}

/** Page-aligned memory that JavaScript sees without copies and the NIC may DMA into once registered. */
export interface Slab {
  readonly bytes: Uint8Array;
}

export interface QpInit {
  type: QpType;
  sendCq: Handle;
  recvCq: Handle;
  maxSendWr: number;
  maxRecvWr: number;
}

/** What two ends exchange over the control plane before RTR. */
export interface ConnectInfo {
  lid: number;
  qpn: number;
  psn: number;
  /** IPv6 text form, e.g. `::ffff:10.0.0.2`. */
  gid: string;
}

export interface RtrAttrs {
  port: number;
  /** Path MTU in bytes (the smaller of both ends' active MTU). */
  pathMtu: number;
  dest: ConnectInfo;
  /** Index of this port's IPv4-mapped GID. */
  sgidIndex: number;
}

export interface WorkCompletion {
  wrId: number;
  status: number;
  opcode: 'send' | 'recv';
  byteLen: number;
  qpn: number;
}

export interface Verbs {
  readonly kind: 'sim' | 'rdma-core' | 'apple';
  readonly limits: VerbsLimits;
  /** `ibv_get_device_list`; empty when the library reports none (Linux without RDMA: ENOSYS). */
  listDevices(): string[];
  openDevice(name: string): Handle;
  closeDevice(ctx: Handle): void;
  queryPort(ctx: Handle, port: number): PortInfo;
  /** GID text at `index`, or '' when that entry is empty / not present. */
  queryGid(ctx: Handle, port: number, index: number): string;
  allocPd(ctx: Handle): Handle;
  deallocPd(pd: Handle): void;
  /** Page-aligned, zeroed memory of at least `bytes` (rounded up to whole pages). */
  allocSlab(bytes: number): Slab;
  /** Registers the whole slab with LOCAL_WRITE only (the only access Apple grants). */
  regMr(pd: Handle, slab: Slab): Handle;
  deregMr(mr: Handle): void;
  createCq(ctx: Handle, depth: number): Handle;
  destroyCq(cq: Handle): void;
  createQp(pd: Handle, init: QpInit): { qp: Handle; qpn: number };
  destroyQp(qp: Handle): void;
  /** RESET → INIT on `port`, pkey index 0. */
  modifyQpInit(qp: Handle, port: number): void;
  /** INIT → RTR. Called once per queue pair: a failed or repeated RTR can wedge an Apple port. */
  modifyQpRtr(qp: Handle, attrs: RtrAttrs): void;
  /** RTR → RTS with our send PSN. */
  modifyQpRts(qp: Handle, psn: number): void;
  postSend(qp: Handle, wrId: number, mr: Handle, offset: number, length: number): void;
  postRecv(qp: Handle, wrId: number, mr: Handle, offset: number, length: number): void;
  /** Up to `max` completions, oldest first; [] when none. */
  pollCq(cq: Handle, max: number): WorkCompletion[];
  /**
   * Resolves when `cq` may hold a completion (a completion channel); implementations without one
   * omit it and the poller spins with `setImmediate`.
   */
  waitCq?(cq: Handle): Promise<void>;
}

/** Number of 4 KiB frames a buffer of `bytes` occupies (a zero-byte message still occupies one). */
export function framesOf(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / FRAME_BYTES));
}

/** An error from the verbs layer carrying the errno-style code the library reported. */
export class VerbsError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(`${code}: ${message}`);
    this.name = 'VerbsError';
    this.code = code;
  }
}

/** True for the GID form that appears once enX has an IPv4 address (`::ffff:a.b.c.d`). */
export function isIpv4MappedGid(gid: string): boolean {
  return /^(?:0{1,4}:){5}ffff:|^::ffff:/i.test(gid.trim());
}
