/**
 * Per-link connection setup: for every peer, RDMA when both ends are ready and RTR succeeds, else the
 * fallback link (TCP) — decided by both ends together, with the reason kept for `orchard status` and the planner.
 *
 * Sequence per peer (both sides run it):
 *   1. local readiness: verbs library present, a device reaches the peer, port ACTIVE, IPv4-mapped GID found,
 *      queue pair created and moved RESET → INIT;
 *   2. exchange {ready, reason, lid, qpn, psn, gid, mtu} over the control plane;
 *   3. if both ready: INIT → RTR → RTS, exactly once — a failed or repeated RTR can wedge an Apple port, so a
 *      failure is never retried: the link falls back instead;
 *   4. exchange {ok}; RDMA only if both ends reached RTS.
 */
import { RdmaSetupError, describeRdmaPeer, type RdmaPeer } from './errors.js';
import { CompletionPoller, RdmaLink, type PeerLink } from './link.js';
import { DEFAULT_SIZE_CLASSES, validateSizeClasses } from './size-classes.js';
import { isIpv4MappedGid, type ConnectInfo, type Handle, type Verbs } from './verbs.js';

/** The control plane (libp2p in the daemon): one message each way per round and peer. */
export interface ControlChannel {
  exchange(peer: number, round: string, value: unknown): Promise<unknown>;
}

export interface LinkChoice {
  peer: number;
  transport: PeerLink['transport'];
  /** Device used (RDMA) or why RDMA was not used. */
  reason: string;
}

export interface RdmaMeshOptions {
  rank: number;
  size: number;
  /** null when the addon is not built or no verbs library exists: every link falls back. */
  verbs: Verbs | null;
  /** Why `verbs` is null (the addon's status line), for both ends' reasons. */
  noVerbsReason?: string;
  /** Which RDMA device (cable) reaches `peer`; undefined when none does. */
  deviceFor: (peer: number) => string | undefined;
  /** Why `deviceFor(peer)` found no device, when the caller knows better than "none reaches it" (e.g. ambiguous). */
  noDeviceReason?: (peer: number) => string | undefined;
  /** Ranks to link with. @default every other rank (a mesh); a ring passes rank±1. */
  peers?: number[];
  control: ControlChannel;
  /** Opens the non-RDMA link to `peer` (TCP in the daemon). */
  fallback: (peer: number, reason: string) => Promise<PeerLink>;
  /** Watchdog and default per-operation timeout, ms. */
  timeoutMs?: number;
  /** Buffers in flight per direction and link (≥ 2). */
  depth?: number;
  sizeClasses?: readonly number[];
  /** Bound on each control-plane round, ms. */
  setupTimeoutMs?: number;
  log?: (line: string) => void;
}

export interface RdmaMesh {
  /** One link per rank; `undefined` at this rank's own index. */
  links: (PeerLink | undefined)[];
  choices: LinkChoice[];
  close(): Promise<void>;
}

interface DeviceState {
  name: string;
  ctx: Handle;
  pd: Handle;
  cq: Handle;
  mr: Handle;
  slab: Uint8Array;
  poller: CompletionPoller;
  lid: number;
  mtu: number;
  gid: string;
  gidIndex: number;
  nextSlot: number;
}

interface HelloMessage {
  ready: boolean;
  reason?: string;
  info?: ConnectInfo & { mtu: number };
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new RdmaSetupError(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]);
}

/** Finds the IPv4-mapped GID of port 1 (it may sit at index 1, 2 or elsewhere). */
export function findIpv4GidIndex(verbs: Verbs, ctx: Handle, tableLength: number): { index: number; gid: string } | null {
  for (let i = 0; i < tableLength; i++) {
    let gid = '';
    try {
      gid = verbs.queryGid(ctx, 1, i);
    } catch {
      continue;
    }
    if (gid && isIpv4MappedGid(gid)) return { index: i, gid };
  }
  return null;
}

export async function connectRdmaMesh(options: RdmaMeshOptions): Promise<RdmaMesh> {
  const { rank, size, verbs, control } = options;
  const timeoutMs = options.timeoutMs ?? 5000;
  const depth = options.depth ?? 4;
  const classes = options.sizeClasses ?? DEFAULT_SIZE_CLASSES;
  validateSizeClasses(classes);
  if (!Number.isInteger(depth) || depth < 2) throw new RangeError(`RDMA depth must be an integer >= 2 (double buffering), got ${depth}`);
  if (verbs) {
    const largest = classes[classes.length - 1]!;
    if (largest > verbs.limits.maxMessageBytes) {
      throw new RangeError(`size class ${largest} exceeds the library's ${verbs.limits.maxMessageBytes}-byte message limit`);
    }
    if (depth > verbs.limits.maxWr) throw new RangeError(`depth ${depth} exceeds ${verbs.limits.maxWr} outstanding work requests`);
  }
  const setupTimeoutMs = options.setupTimeoutMs ?? 10_000;
  const log = options.log ?? (() => {});
  const perLinkBytes = RdmaLink.slabBytes(depth, classes);
  const peers = options.peers ?? [...Array(size).keys()].filter((p) => p !== rank);

  // Devices are opened once and their slab registered once, sized for every peer that cable could serve.
  const devices = new Map<string, DeviceState | RdmaSetupError>();
  const openDevice = (name: string, linkCount: number): DeviceState | RdmaSetupError => {
    const cached = devices.get(name);
    if (cached) return cached;
    let state: DeviceState | RdmaSetupError;
    try {
      state = openDeviceState(verbs!, name, linkCount * perLinkBytes, depth * 2 * linkCount + 16, timeoutMs);
    } catch (err) {
      state = err instanceof RdmaSetupError ? err : new RdmaSetupError(`${name}: ${(err as Error).message}`);
    }
    devices.set(name, state);
    return state;
  };
  const linksPerDevice = new Map<string, number>();
  for (const p of peers) {
    const d = options.deviceFor(p);
    if (d) linksPerDevice.set(d, (linksPerDevice.get(d) ?? 0) + 1);
  }

  const links: (PeerLink | undefined)[] = new Array(size).fill(undefined);
  const choices: LinkChoice[] = [];
  const qpsToDestroy: Array<() => void> = [];

  const setupPeer = async (peer: number): Promise<void> => {
    const ref: RdmaPeer = { rank: peer };
    let reason = '';
    let qp: { qp: Handle; qpn: number } | null = null;
    let dev: DeviceState | null = null;
    let hello: HelloMessage;
    const psn = Math.floor(Math.random() * 0xffffff);
    const deviceName = options.deviceFor(peer);
    if (!verbs) reason = options.noVerbsReason ?? 'RDMA addon not built or no verbs library';
    else if (!deviceName) reason = options.noDeviceReason?.(peer) ?? `no RDMA device reaches rank ${peer}`;
    else {
      const d = openDevice(deviceName, linksPerDevice.get(deviceName) ?? 1);
      if (d instanceof RdmaSetupError) reason = d.message;
      else {
        dev = d;
        ref.address = deviceName;
        try {
          qp = verbs.createQp(d.pd, { type: verbs.limits.qpTypes[0]!, sendCq: d.cq, recvCq: d.cq, maxSendWr: depth, maxRecvWr: depth });
          verbs.modifyQpInit(qp.qp, 1);
        } catch (err) {
          reason = `${deviceName}: ${(err as Error).message}`;
          if (qp) verbs.destroyQp(qp.qp);
          qp = null;
        }
      }
    }
    hello = qp && dev ? { ready: true, info: { lid: dev.lid, qpn: qp.qpn, psn, gid: dev.gid, mtu: dev.mtu } } : { ready: false, reason };
    let theirs: HelloMessage;
    try {
      theirs = (await withTimeout(control.exchange(peer, 'rdma-hello', hello), setupTimeoutMs, `RDMA setup with ${describeRdmaPeer(ref)}`)) as HelloMessage;
    } catch (err) {
      if (qp && verbs) verbs.destroyQp(qp.qp);
      throw err;
    }

    let ok = false;
    if (hello.ready && theirs?.ready && theirs.info && qp && dev && verbs) {
      try {
        verbs.modifyQpRtr(qp.qp, {
          port: 1,
          pathMtu: Math.min(dev.mtu, theirs.info.mtu),
          dest: { lid: theirs.info.lid, qpn: theirs.info.qpn, psn: theirs.info.psn, gid: theirs.info.gid },
          sgidIndex: dev.gidIndex,
        });
        verbs.modifyQpRts(qp.qp, psn);
        ok = true;
      } catch (err) {
        // No retry: a second RTR on an Apple port can wedge it until reboot.
        reason = `RTR/RTS on ${dev.name} failed: ${(err as Error).message}`;
      }
    } else if (hello.ready) {
      reason = `rank ${peer} is not RDMA-ready: ${theirs?.reason ?? 'no answer'}`;
    }
    let done: { ok: boolean; reason?: string };
    try {
      done = (await withTimeout(control.exchange(peer, 'rdma-ready', { ok, reason }), setupTimeoutMs, `RDMA setup with ${describeRdmaPeer(ref)}`)) as typeof done;
    } catch (err) {
      if (qp && verbs) verbs.destroyQp(qp.qp);
      throw err;
    }
    if (ok && done?.ok && qp && dev && verbs) {
      const index = dev.nextSlot++;
      const q = qp.qp;
      const link = new RdmaLink({
        verbs,
        poller: dev.poller,
        index,
        qp: q,
        mr: dev.mr,
        slab: dev.slab,
        slabOffset: index * perLinkBytes,
        depth,
        sizeClasses: classes,
        peer: { rank: peer, address: `${dev.name} -> ${theirs.info!.gid}` },
        timeoutMs,
      });
      let destroyed = false;
      qpsToDestroy.push(() => {
        if (!destroyed) verbs.destroyQp(q);
        destroyed = true;
      });
      links[peer] = link;
      choices.push({ peer, transport: 'rdma', reason: dev.name });
      log(`link to rank ${peer}: RDMA on ${dev.name}`);
      return;
    }
    if (ok && !done?.ok) reason = `rank ${peer} could not finish RDMA setup: ${done?.reason ?? 'no answer'}`;
    if (qp && verbs) verbs.destroyQp(qp.qp);
    log(`link to rank ${peer}: TCP (${reason})`);
    links[peer] = await options.fallback(peer, reason);
    choices.push({ peer, transport: links[peer]!.transport, reason });
  };

  const closeAll = async () => {
    await Promise.allSettled(links.map((l) => l?.close()));
    for (const destroy of qpsToDestroy) destroy();
    for (const d of devices.values()) {
      if (d instanceof RdmaSetupError || !verbs) continue;
      d.poller.close();
      verbs.deregMr(d.mr);
      verbs.destroyCq(d.cq);
      verbs.deallocPd(d.pd);
      verbs.closeDevice(d.ctx);
    }
    devices.clear();
  };

  const results = await Promise.allSettled(peers.map(setupPeer));
  const failed = results.find((r) => r.status === 'rejected') as PromiseRejectedResult | undefined;
  if (failed) {
    await closeAll();
    throw failed.reason;
  }
  choices.sort((a, b) => a.peer - b.peer);
  return { links, choices, close: closeAll };
}

function openDeviceState(verbs: Verbs, name: string, slabBytes: number, cqDepth: number, _timeoutMs: number): DeviceState {
  if (!verbs.listDevices().includes(name)) throw new RdmaSetupError(`no RDMA device ${name}`);
  const ctx = verbs.openDevice(name);
  try {
    const port = verbs.queryPort(ctx, 1);
    if (port.state !== 'ACTIVE') {
      throw new RdmaSetupError(`${name} port 1 is ${port.state} (RDMA must be enabled with rdma_ctl on both Macs)`);
    }
    const gid = findIpv4GidIndex(verbs, ctx, port.gidTableLength);
    if (!gid) throw new RdmaSetupError(`${name} has no IPv4-mapped GID: give the paired enX an IPv4 address`);
    const pd = verbs.allocPd(ctx);
    const cq = verbs.createCq(ctx, cqDepth);
    const slab = verbs.allocSlab(slabBytes);
    const mr = verbs.regMr(pd, slab);
    return {
      name,
      ctx,
      pd,
      cq,
      mr,
      slab: slab.bytes,
      poller: new CompletionPoller(verbs, cq),
      lid: port.lid,
      mtu: port.activeMtu,
      gid: gid.gid,
      gidIndex: gid.index,
      nextSlot: 0,
    };
  } catch (err) {
    verbs.closeDevice(ctx);
    throw err;
  }
}
