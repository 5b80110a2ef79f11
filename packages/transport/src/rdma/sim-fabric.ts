/**
 * A simulated RDMA fabric behind the `Verbs` table, strict about Apple's rules so the protocol above it
 * is exercised the way Thunderbolt RDMA will treat it:
 * - Apple mode: UC queue pairs only, at most 10 per device, messages up to 16,773,120 bytes,
 *   ~100 memory registrations per device, only slabs from `allocSlab` (page-aligned) can be registered.
 * - A SEND waits until the peer has posted a RECV (credit flow); nothing is dropped on a live path,
 *   a missing RECV stalls forever.
 * - SEND and RECV must cover the same number of 4 KiB frames (Apple mode), or both fail.
 * - FIFO per queue pair; a send completion means "left this host", delivery comes `latencyUs` later.
 * - An error completion moves the queue pair to ERR and flushes everything else posted on it.
 * - Faults: injected error completions, stalls, port loss, host loss, failing RTR, and a port that wedges
 *   when RTR is retried after a failure.
 * Queue pairs in other processes are reached over loopback TCP (`listen()`): in the simulation a device's
 * LID is the port its process listens on, so {lid, qpn, gid} exchanged over the control plane is enough.
 */
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import {
  APPLE_LIMITS,
  FRAME_BYTES,
  LINUX_LIMITS,
  VerbsError,
  WcStatus,
  framesOf,
  isIpv4MappedGid,
  type ConnectInfo,
  type Handle,
  type PortInfo,
  type PortState,
  type QpInit,
  type QpState,
  type QpType,
  type RtrAttrs,
  type Slab,
  type Verbs,
  type VerbsLimits,
  type WorkCompletion,
} from './verbs.js';

export interface SimFabricOptions {
  /** 'apple' enforces Thunderbolt RDMA's rules; 'linux' behaves like rdma-core with RC. */
  mode?: 'apple' | 'linux';
  /** One-way delivery latency in microseconds applied to every data and credit message. */
  latencyUs?: number;
  /** Memory registrations allowed per device (Apple reports ~100). */
  maxMrsPerDevice?: number;
  /** Delay before an RC queue pair reports a lost path as RETRY_EXC_ERR. */
  rcRetryMs?: number;
}

export interface SimDeviceSpec {
  name: string;
  /** IPv4 of the paired enX; without it the port has no IPv4-mapped GID and RTR fails. */
  ipv4?: string;
  /** Where the IPv4-mapped GID sits in the GID table (some Apple ports carry it at 2). */
  ipv4GidIndex?: number;
  portState?: PortState;
  activeMtu?: number;
}

interface Credit {
  frames: number;
  bytes: number;
}

interface PostedWr {
  wrId: number;
  mr: SimMr;
  offset: number;
  length: number;
}

/** Where a connected queue pair's traffic goes: another queue pair in this process or over a socket. */
interface RemoteEnd {
  /** Socket ends write at once (the receiving process applies the latency), so nothing sits in a timer. */
  immediate?: boolean;
  credit(c: Credit): void;
  data(payload: Uint8Array, frames: number): void;
  mismatch(): void;
}

class SimCq {
  readonly entries: WorkCompletion[] = [];
  private waiters: Array<() => void> = [];
  constructor(readonly depth: number) {}
  push(wc: WorkCompletion): void {
    this.entries.push(wc);
    const w = this.waiters;
    this.waiters = [];
    for (const resolve of w) resolve();
  }
  wait(): Promise<void> {
    if (this.entries.length > 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}

class SimMr {
  constructor(
    readonly device: SimDevice,
    readonly bytes: Uint8Array,
  ) {}
}

export class SimDevice {
  portState: PortState;
  readonly gids: string[];
  qpCount = 0;
  mrCount = 0;
  pdCount = 0;
  failNextRtr: string | null = null;
  constructor(
    readonly fabric: SimFabric,
    readonly host: string,
    readonly spec: SimDeviceSpec,
  ) {
    this.portState = spec.portState ?? 'ACTIVE';
    this.gids = ['fe80::1:' + (fabric.nextDeviceId++).toString(16), '', '', ''];
    if (spec.ipv4) this.gids[spec.ipv4GidIndex ?? 1] = `::ffff:${spec.ipv4}`;
  }
  get name(): string {
    return this.spec.name;
  }
  get lid(): number {
    return this.fabric.listenPort;
  }
}

export class SimQp {
  state: QpState = 'RESET';
  readonly sendQueue: PostedWr[] = [];
  readonly recvQueue: PostedWr[] = [];
  private readonly credits: Credit[] = [];
  remote: RemoteEnd | null = null;
  pathLost = false;
  stalled = false;
  rtrFailed = false;
  injected: { send?: number; recv?: number } = {};
  destroyed = false;
  /** Receives posted before RTR whose credits still have to reach the peer. */
  private unannounced: Credit[] = [];

  constructor(
    readonly fabric: SimFabric,
    readonly device: SimDevice,
    readonly qpn: number,
    readonly type: QpType,
    readonly sendCq: SimCq,
    readonly recvCq: SimCq,
    readonly maxSendWr: number,
    readonly maxRecvWr: number,
  ) {}

  postSend(wr: PostedWr): void {
    if (this.state === 'ERR') return this.complete('send', wr, WcStatus.WR_FLUSH_ERR);
    if (this.state !== 'RTS') throw new VerbsError('EINVAL', `ibv_post_send on QP ${this.qpn} in state ${this.state} (needs RTS)`);
    if (wr.length > this.fabric.limits.maxMessageBytes) {
      throw new VerbsError('EINVAL', `message of ${wr.length} bytes exceeds the ${this.fabric.limits.maxMessageBytes}-byte limit`);
    }
    if (this.sendQueue.length >= this.maxSendWr) throw new VerbsError('ENOMEM', `send queue of QP ${this.qpn} is full (${this.maxSendWr} WRs)`);
    this.sendQueue.push(wr);
    this.pump();
  }

  postRecv(wr: PostedWr): void {
    if (this.state === 'ERR') return this.complete('recv', wr, WcStatus.WR_FLUSH_ERR);
    if (this.state === 'RESET') throw new VerbsError('EINVAL', `ibv_post_recv on QP ${this.qpn} in state RESET`);
    if (this.recvQueue.length >= this.maxRecvWr) throw new VerbsError('ENOMEM', `receive queue of QP ${this.qpn} is full (${this.maxRecvWr} WRs)`);
    this.recvQueue.push(wr);
    const credit = { frames: framesOf(wr.length), bytes: wr.length };
    if (this.remote) this.send(this.remote, (r) => r.credit(credit));
    else this.unannounced.push(credit);
  }

  /** RECV credits from the peer not yet matched by a SEND (for tests and diagnostics). */
  get pendingCredits(): number {
    return this.credits.length;
  }

  connect(remote: RemoteEnd): void {
    this.remote = remote;
    for (const c of this.unannounced) this.send(remote, (r) => r.credit(c));
    this.unannounced = [];
  }

  private send(remote: RemoteEnd, fn: (r: RemoteEnd) => void): void {
    if (remote.immediate) fn(remote);
    else this.fabric.deliver(() => fn(remote));
  }

  onCredit(c: Credit): void {
    if (this.destroyed || this.state === 'ERR') return;
    this.credits.push(c);
    this.pump();
  }

  /** Matches queued SENDs with the peer's RECV credits, in order. */
  pump(): void {
    while (!this.stalled && !this.pathLost && this.state === 'RTS' && this.sendQueue.length > 0 && this.credits.length > 0) {
      if (!this.device.fabric.pathUp(this)) return;
      const wr = this.sendQueue.shift()!;
      const credit = this.credits.shift()!;
      if (this.injected.send !== undefined) {
        const status = this.injected.send;
        this.injected.send = undefined;
        this.complete('send', wr, status);
        this.toErr();
        return;
      }
      const frames = framesOf(wr.length);
      const mismatch = this.fabric.limits.frameCountMustMatch ? frames !== credit.frames : wr.length > credit.bytes;
      if (mismatch) {
        this.send(this.remote!, (r) => r.mismatch());
        this.complete('send', wr, WcStatus.REM_INV_REQ_ERR);
        this.toErr();
        return;
      }
      // The NIC reads the buffer when the frame leaves, not when the WR was posted.
      const payload = wr.mr.bytes.slice(wr.offset, wr.offset + wr.length);
      this.fabric.stats.sends++;
      this.complete('send', wr, WcStatus.SUCCESS);
      this.send(this.remote!, (r) => r.data(payload, frames));
    }
  }

  onData(payload: Uint8Array, frames: number): void {
    if (this.destroyed || this.state === 'ERR' || this.stalled) return;
    const wr = this.recvQueue.shift();
    if (!wr) return; // cannot happen with credit flow; a peer without credit would be a fabric bug
    if (this.injected.recv !== undefined) {
      const status = this.injected.recv;
      this.injected.recv = undefined;
      this.complete('recv', wr, status);
      this.toErr();
      return;
    }
    if (this.fabric.limits.frameCountMustMatch && frames !== framesOf(wr.length)) {
      this.complete('recv', wr, WcStatus.LOC_LEN_ERR);
      this.toErr();
      return;
    }
    wr.mr.bytes.set(payload, wr.offset);
    this.complete('recv', wr, WcStatus.SUCCESS, payload.length);
  }

  onMismatch(): void {
    if (this.destroyed || this.state === 'ERR') return;
    const wr = this.recvQueue.shift();
    if (wr) this.complete('recv', wr, WcStatus.LOC_LEN_ERR);
    this.toErr();
  }

  /** The path to the peer is gone. UC never notices (sends just stop); RC reports retry exhaustion. */
  onPathLost(): void {
    if (this.pathLost) return;
    this.pathLost = true;
    if (this.type === 'RC' && !this.destroyed) {
      setTimeout(() => {
        if (this.destroyed || this.state === 'ERR') return;
        const head = this.sendQueue.shift();
        if (head) this.complete('send', head, WcStatus.RETRY_EXC_ERR);
        this.toErr();
      }, this.fabric.rcRetryMs).unref();
    }
  }

  toErr(): void {
    this.state = 'ERR';
    for (const wr of this.sendQueue.splice(0)) this.complete('send', wr, WcStatus.WR_FLUSH_ERR);
    for (const wr of this.recvQueue.splice(0)) this.complete('recv', wr, WcStatus.WR_FLUSH_ERR);
  }

  private complete(opcode: 'send' | 'recv', wr: PostedWr, status: number, byteLen = 0): void {
    const cq = opcode === 'send' ? this.sendCq : this.recvCq;
    cq.push({ wrId: wr.wrId, status, opcode, byteLen, qpn: this.qpn });
  }
}

/** FIFO delivery after a fixed latency; sub-millisecond latencies are honoured by re-checking on setImmediate. */
class DeliveryQueue {
  private readonly queue: Array<{ at: number; fn: () => void }> = [];
  private armed = false;
  constructor(private readonly latencyMs: number) {}
  push(fn: () => void): void {
    this.queue.push({ at: performance.now() + this.latencyMs, fn });
    if (!this.armed) this.arm();
  }
  private arm(): void {
    this.armed = true;
    const wait = this.queue[0]!.at - performance.now();
    if (wait >= 1) setTimeout(() => this.drain(), Math.floor(wait));
    else setImmediate(() => this.drain());
  }
  private drain(): void {
    this.armed = false;
    const now = performance.now();
    let n = 0;
    while (n < this.queue.length && this.queue[n]!.at <= now) n++;
    const due = this.queue.splice(0, n);
    for (const d of due) d.fn();
    if (this.queue.length > 0 && !this.armed) this.arm();
  }
}

const enum WireType {
  Credit = 1,
  Data = 2,
  Mismatch = 3,
}
const WIRE_HEADER = 4 + 1 + 4 + 4 + 4; // length, type, dst qpn, frames, bytes

export class SimFabric {
  readonly mode: 'apple' | 'linux';
  readonly limits: VerbsLimits;
  readonly maxMrsPerDevice: number;
  readonly rcRetryMs: number;
  readonly devices: SimDevice[] = [];
  readonly stats = { sends: 0 };
  nextDeviceId = 1;
  listenPort = 0;
  private nextQpn = 0x100;
  private readonly qps = new Map<number, SimQp>();
  private readonly delivery: DeliveryQueue;
  private server: net.Server | null = null;
  private readonly sockets = new Map<number, net.Socket>();
  private readonly accepted = new Set<net.Socket>();
  private readonly deadHosts = new Set<string>();

  constructor(options: SimFabricOptions = {}) {
    this.mode = options.mode ?? 'apple';
    this.limits = this.mode === 'apple' ? APPLE_LIMITS : LINUX_LIMITS;
    this.maxMrsPerDevice = options.maxMrsPerDevice ?? (this.mode === 'apple' ? 100 : 1 << 20);
    this.rcRetryMs = options.rcRetryMs ?? 200;
    this.delivery = new DeliveryQueue((options.latencyUs ?? 0) / 1000);
  }

  /** Adds a host with its RDMA devices and returns its view of the verbs table. */
  addHost(host: string, devices: SimDeviceSpec[]): Verbs {
    for (const spec of devices) this.devices.push(new SimDevice(this, host, spec));
    return new SimVerbs(this, host);
  }

  device(host: string, name: string): SimDevice {
    const d = this.devices.find((x) => x.host === host && x.name === name);
    if (!d) throw new Error(`simulated fabric has no device ${name} on ${host}`);
    return d;
  }

  deliver(fn: () => void): void {
    this.delivery.push(fn);
  }

  pathUp(qp: SimQp): boolean {
    return qp.device.portState === 'ACTIVE' && !this.deadHosts.has(qp.device.host);
  }

  // ---- fault injection -------------------------------------------------------------------------

  /** The next SEND (or RECV) completing on `qpn` completes with `status` and the QP goes to ERR. */
  injectErrorCompletion(qpn: number, on: 'send' | 'recv', status: number = WcStatus.GENERAL_ERR): void {
    const qp = this.qp(qpn);
    qp.injected[on] = status;
  }

  /** Stops `qpn` from transmitting or accepting data until `resume`: its peer's operations hang. */
  stall(qpn: number): void {
    this.qp(qpn).stalled = true;
  }

  resume(qpn: number): void {
    const qp = this.qp(qpn);
    qp.stalled = false;
    qp.pump();
  }

  /** Takes a port down (cable pulled, peer rebooted). Queue pairs on it lose their path. */
  setPortState(host: string, device: string, state: PortState): void {
    const d = this.device(host, device);
    d.portState = state;
    if (state !== 'ACTIVE') for (const qp of this.qps.values()) if (qp.device === d) this.losePath(qp);
  }

  /** The whole host disappears (process killed): every path to it is lost. */
  killHost(host: string): void {
    this.deadHosts.add(host);
    for (const qp of this.qps.values()) if (qp.device.host === host) this.losePath(qp);
  }

  /** The next RTR on this device fails with EINVAL (e.g. a GID that vanished). */
  failNextRtr(host: string, device: string, reason = 'address vector rejected'): void {
    this.device(host, device).failNextRtr = reason;
  }

  queuePairs(host?: string): SimQp[] {
    return [...this.qps.values()].filter((q) => !q.destroyed && (host === undefined || q.device.host === host));
  }

  // ---- internals used by SimVerbs ----------------------------------------------------------------

  allocQpn(): number {
    return this.nextQpn++;
  }

  registerQp(qp: SimQp): void {
    this.qps.set(qp.qpn, qp);
  }

  qp(qpn: number): SimQp {
    const qp = this.qps.get(qpn);
    if (!qp) throw new Error(`simulated fabric has no queue pair ${qpn}`);
    return qp;
  }

  private peers = new Map<SimQp, SimQp>();

  private losePath(qp: SimQp): void {
    qp.onPathLost();
    const peer = this.peers.get(qp);
    if (peer) peer.onPathLost();
  }

  /** Resolves the destination of an RTR to a local queue pair or a socket to another process. */
  resolve(local: SimQp, dest: ConnectInfo): RemoteEnd {
    const device = this.devices.find((d) => d.gids.includes(dest.gid) && d.lid === dest.lid);
    if (device) {
      const peer = this.qps.get(dest.qpn);
      if (!peer || peer.device !== device) throw new VerbsError('EINVAL', `no queue pair ${dest.qpn} behind GID ${dest.gid}`);
      this.peers.set(local, peer);
      const alive = () => !peer.destroyed && this.pathUp(peer) && this.pathUp(local);
      return {
        credit: (c) => alive() && peer.onCredit(c),
        data: (p, f) => alive() && peer.onData(p, f),
        mismatch: () => alive() && peer.onMismatch(),
      };
    }
    if (dest.lid > 0 && this.server) return this.remoteOverSocket(local, dest);
    throw new VerbsError('EINVAL', `no path to GID ${dest.gid} (LID ${dest.lid})`);
  }

  // ---- spanning processes over loopback ----------------------------------------------------------

  /** Accepts traffic from queue pairs in other processes; devices' LID becomes the listening port. */
  async listen(): Promise<number> {
    if (this.server) return this.listenPort;
    const server = net.createServer((socket) => this.acceptSocket(socket));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.listenPort = (server.address() as net.AddressInfo).port;
    return this.listenPort;
  }

  /**
   * Frames that already "left this host" (their send completed) are still in the socket's write buffer:
   * outgoing sockets are ended, not destroyed, so they reach the peer — as they would on a real cable.
   */
  async close(): Promise<void> {
    const outgoing = [...this.sockets.values()];
    this.sockets.clear();
    await Promise.all(
      outgoing.map(
        (s) =>
          new Promise<void>((resolve) => {
            if (s.destroyed) return resolve();
            const timer = setTimeout(() => s.destroy(), 2000);
            s.once('close', () => {
              clearTimeout(timer);
              resolve();
            });
            s.end();
          }),
      ),
    );
    for (const s of this.accepted) s.destroy();
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private acceptSocket(socket: net.Socket): void {
    this.accepted.add(socket);
    socket.setNoDelay(true);
    const touched = new Set<SimQp>();
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      while (pending.length >= 4) {
        const len = pending.readUInt32LE(0);
        if (pending.length < len) break;
        const type = pending.readUInt8(4);
        const qpn = pending.readUInt32LE(5);
        const frames = pending.readUInt32LE(9);
        const bytes = pending.readUInt32LE(13);
        const payload = pending.subarray(WIRE_HEADER, len);
        pending = pending.subarray(len);
        const qp = this.qps.get(qpn);
        if (!qp) continue;
        touched.add(qp);
        if (type === WireType.Credit) this.deliver(() => qp.onCredit({ frames, bytes }));
        else if (type === WireType.Data) {
          const copy = new Uint8Array(payload); // the socket buffer is reused
          this.deliver(() => qp.onData(copy, frames));
        } else if (type === WireType.Mismatch) this.deliver(() => qp.onMismatch());
      }
    });
    const lost = () => {
      this.accepted.delete(socket);
      for (const qp of touched) qp.onPathLost();
    };
    socket.on('close', lost);
    socket.on('error', () => socket.destroy());
  }

  private remoteOverSocket(local: SimQp, dest: ConnectInfo): RemoteEnd {
    let socket = this.sockets.get(dest.lid);
    if (!socket || socket.destroyed) {
      socket = net.connect(dest.lid, '127.0.0.1');
      socket.setNoDelay(true);
      socket.on('error', () => socket!.destroy());
      this.sockets.set(dest.lid, socket);
    }
    const s = socket;
    s.on('close', () => local.onPathLost());
    const write = (type: WireType, frames: number, bytes: number, payload?: Uint8Array) => {
      if (s.destroyed || !this.pathUp(local)) return;
      const header = Buffer.alloc(WIRE_HEADER);
      header.writeUInt32LE(WIRE_HEADER + (payload?.length ?? 0), 0);
      header.writeUInt8(type, 4);
      header.writeUInt32LE(dest.qpn, 5);
      header.writeUInt32LE(frames, 9);
      header.writeUInt32LE(bytes, 13);
      s.write(header);
      if (payload && payload.length > 0) s.write(payload);
    };
    return {
      immediate: true,
      credit: (c) => write(WireType.Credit, c.frames, c.bytes),
      data: (p, f) => write(WireType.Data, f, p.length, p),
      mismatch: () => write(WireType.Mismatch, 0, 0),
    };
  }
}

const MTUS = [256, 512, 1024, 2048, 4096];

/** One host's view of the fabric as a `Verbs` table. */
class SimVerbs implements Verbs {
  readonly kind = 'sim' as const;
  readonly limits: VerbsLimits;
  private nextHandle = 1;
  private readonly contexts = new Map<Handle, SimDevice>();
  private readonly pds = new Map<Handle, SimDevice>();
  private readonly mrs = new Map<Handle, SimMr>();
  private readonly cqs = new Map<Handle, SimCq>();
  private readonly qps = new Map<Handle, SimQp>();
  private readonly slabs = new WeakSet<Uint8Array>();

  constructor(
    private readonly fabric: SimFabric,
    private readonly host: string,
  ) {
    this.limits = fabric.limits;
  }

  private get<T>(map: Map<Handle, T>, h: Handle, what: string): T {
    const v = map.get(h);
    if (v === undefined) throw new VerbsError('EINVAL', `unknown ${what} handle ${h}`);
    return v;
  }

  listDevices(): string[] {
    return this.fabric.devices.filter((d) => d.host === this.host).map((d) => d.name);
  }
  openDevice(name: string): Handle {
    const d = this.fabric.devices.find((x) => x.host === this.host && x.name === name);
    if (!d) throw new VerbsError('ENODEV', `no RDMA device ${name}`);
    const h = this.nextHandle++;
    this.contexts.set(h, d);
    return h;
  }
  closeDevice(ctx: Handle): void {
    this.contexts.delete(ctx);
  }
  queryPort(ctx: Handle, port: number): PortInfo {
    const d = this.get(this.contexts, ctx, 'device');
    if (port !== 1) throw new VerbsError('EINVAL', `${d.name} has only port 1`);
    return { state: d.portState, lid: d.lid, activeMtu: d.spec.activeMtu ?? 4096, gidTableLength: d.gids.length };
  }
  queryGid(ctx: Handle, port: number, index: number): string {
    const d = this.get(this.contexts, ctx, 'device');
    if (port !== 1 || index < 0 || index >= d.gids.length) throw new VerbsError('EINVAL', `no GID ${index} on ${d.name} port ${port}`);
    return d.gids[index]!;
  }
  allocPd(ctx: Handle): Handle {
    const d = this.get(this.contexts, ctx, 'device');
    if (this.fabric.mode === 'apple' && d.pdCount >= 32) throw new VerbsError('ENOMEM', `too many protection domains on ${d.name}`);
    d.pdCount++;
    const h = this.nextHandle++;
    this.pds.set(h, d);
    return h;
  }
  deallocPd(pd: Handle): void {
    const d = this.pds.get(pd);
    if (d) d.pdCount--;
    this.pds.delete(pd);
  }
  allocSlab(bytes: number): Slab {
    const rounded = Math.max(FRAME_BYTES, Math.ceil(bytes / FRAME_BYTES) * FRAME_BYTES);
    const slab = { bytes: new Uint8Array(rounded) };
    this.slabs.add(slab.bytes);
    return slab;
  }
  regMr(pd: Handle, slab: Slab): Handle {
    const d = this.get(this.pds, pd, 'protection domain');
    if (!this.slabs.has(slab.bytes)) {
      throw new VerbsError('EINVAL', 'only page-aligned slabs from allocSlab can be registered (IOMMU)');
    }
    if (d.mrCount >= this.fabric.maxMrsPerDevice) {
      throw new VerbsError('ENOMEM', `${d.name} allows ${this.fabric.maxMrsPerDevice} memory registrations: register a few large slabs`);
    }
    d.mrCount++;
    const h = this.nextHandle++;
    this.mrs.set(h, new SimMr(d, slab.bytes));
    return h;
  }
  deregMr(mr: Handle): void {
    const m = this.mrs.get(mr);
    if (m) m.device.mrCount--;
    this.mrs.delete(mr);
  }
  createCq(ctx: Handle, depth: number): Handle {
    this.get(this.contexts, ctx, 'device');
    const h = this.nextHandle++;
    this.cqs.set(h, new SimCq(depth));
    return h;
  }
  destroyCq(cq: Handle): void {
    this.cqs.delete(cq);
  }
  createQp(pd: Handle, init: QpInit): { qp: Handle; qpn: number } {
    const d = this.get(this.pds, pd, 'protection domain');
    if (!this.limits.qpTypes.includes(init.type)) {
      throw new VerbsError('EINVAL', `${d.name} supports only ${this.limits.qpTypes.join('/')} queue pairs, not ${init.type}`);
    }
    if (d.qpCount >= this.limits.maxQps) throw new VerbsError('ENOMEM', `${d.name} allows at most ${this.limits.maxQps} queue pairs`);
    if (init.maxSendWr > this.limits.maxWr || init.maxRecvWr > this.limits.maxWr) {
      throw new VerbsError('EINVAL', `at most ${this.limits.maxWr} outstanding work requests per queue`);
    }
    const qp = new SimQp(
      this.fabric,
      d,
      this.fabric.allocQpn(),
      init.type,
      this.get(this.cqs, init.sendCq, 'completion queue'),
      this.get(this.cqs, init.recvCq, 'completion queue'),
      init.maxSendWr,
      init.maxRecvWr,
    );
    d.qpCount++;
    this.fabric.registerQp(qp);
    const h = this.nextHandle++;
    this.qps.set(h, qp);
    return { qp: h, qpn: qp.qpn };
  }
  destroyQp(qp: Handle): void {
    const q = this.qps.get(qp);
    if (!q) return;
    q.destroyed = true;
    q.device.qpCount--;
    this.qps.delete(qp);
  }
  modifyQpInit(qp: Handle, port: number): void {
    const q = this.get(this.qps, qp, 'queue pair');
    if (q.state !== 'RESET') throw new VerbsError('EINVAL', `QP ${q.qpn}: INIT from ${q.state}`);
    if (port !== 1) throw new VerbsError('EINVAL', `QP ${q.qpn}: no port ${port}`);
    q.state = 'INIT';
  }
  modifyQpRtr(qp: Handle, attrs: RtrAttrs): void {
    const q = this.get(this.qps, qp, 'queue pair');
    const d = q.device;
    if (q.rtrFailed) {
      // What the platform notes warn about: retrying RTR after a failure wedges the port until reboot.
      d.portState = 'DOWN';
      throw new VerbsError('EIO', `${d.name}: RTR retried after a failure; port wedged`);
    }
    if (q.state !== 'INIT') throw new VerbsError('EINVAL', `QP ${q.qpn}: RTR from ${q.state}`);
    try {
      if (d.portState !== 'ACTIVE') throw new VerbsError('ENETDOWN', `${d.name} port is ${d.portState}`);
      if (d.failNextRtr) {
        const reason = d.failNextRtr;
        d.failNextRtr = null;
        throw new VerbsError('EINVAL', `${d.name}: ${reason}`);
      }
      const sgid = d.gids[attrs.sgidIndex] ?? '';
      if (!isIpv4MappedGid(sgid)) {
        throw new VerbsError('EINVAL', `${d.name}: GID index ${attrs.sgidIndex} is not an IPv4-mapped GID (does the paired enX have an IPv4 address?)`);
      }
      if (!MTUS.includes(attrs.pathMtu) || attrs.pathMtu > (d.spec.activeMtu ?? 4096)) {
        throw new VerbsError('EINVAL', `${d.name}: path MTU ${attrs.pathMtu} not supported`);
      }
      q.connect(this.fabric.resolve(q, attrs.dest));
      q.state = 'RTR';
    } catch (err) {
      q.rtrFailed = true;
      throw err;
    }
  }
  modifyQpRts(qp: Handle, _psn: number): void {
    const q = this.get(this.qps, qp, 'queue pair');
    if (q.state !== 'RTR') throw new VerbsError('EINVAL', `QP ${q.qpn}: RTS from ${q.state}`);
    q.state = 'RTS';
    q.pump();
  }
  postSend(qp: Handle, wrId: number, mr: Handle, offset: number, length: number): void {
    const q = this.get(this.qps, qp, 'queue pair');
    const m = this.checkSge(mr, offset, length);
    q.postSend({ wrId, mr: m, offset, length });
  }
  postRecv(qp: Handle, wrId: number, mr: Handle, offset: number, length: number): void {
    const q = this.get(this.qps, qp, 'queue pair');
    const m = this.checkSge(mr, offset, length);
    q.postRecv({ wrId, mr: m, offset, length });
  }
  private checkSge(mr: Handle, offset: number, length: number): SimMr {
    const m = this.get(this.mrs, mr, 'memory region');
    if (offset < 0 || length < 0 || offset + length > m.bytes.length) {
      throw new VerbsError('EINVAL', `[${offset}, ${offset + length}) is outside the ${m.bytes.length}-byte memory region`);
    }
    return m;
  }
  pollCq(cq: Handle, max: number): WorkCompletion[] {
    const c = this.get(this.cqs, cq, 'completion queue');
    return c.entries.splice(0, max);
  }
  waitCq(cq: Handle): Promise<void> {
    return this.get(this.cqs, cq, 'completion queue').wait();
  }
}
