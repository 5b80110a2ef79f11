/**
 * Loads the optional Node-API verbs addon (packages/transport/native) and wraps it as a `Verbs` table.
 * Every failure is a status with a one-line reason, never an exception: a machine without the addon, the
 * library or RDMA devices simply runs every link on TCP.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import {
  APPLE_LIMITS,
  LINUX_LIMITS,
  VerbsError,
  type Handle,
  type PortInfo,
  type QpInit,
  type RtrAttrs,
  type Slab,
  type Verbs,
  type WorkCompletion,
} from './verbs.js';

export const DEFAULT_ADDON_PATH = fileURLToPath(new URL('../../native/build/Release/orchard_verbs.node', import.meta.url));

export type AddonStatus =
  | { state: 'not-built'; reason: string }
  | { state: 'no-library'; reason: string; kind: 'apple' | 'rdma-core' }
  | { state: 'no-devices'; reason: string; kind: 'apple' | 'rdma-core'; library: string }
  | { state: 'ready'; reason: string; kind: 'apple' | 'rdma-core'; library: string; devices: string[] };

interface LibraryStatus {
  kind: 'apple' | 'rdma-core';
  headers: boolean;
  loaded: boolean;
  library: string;
  error: string;
}

/** The raw addon exports (see native/src/verbs_addon.cc). */
export interface VerbsAddon {
  libraryStatus(): LibraryStatus;
  listDevices(): { devices: string[]; errno: number; message: string };
  openDevice(name: string): number;
  closeDevice(ctx: number): void;
  queryPort(ctx: number, port: number): PortInfo;
  queryGid(ctx: number, port: number, index: number): string;
  allocPd(ctx: number): number;
  deallocPd(pd: number): void;
  allocSlab(bytes: number): ArrayBuffer;
  regMr(pd: number, slab: ArrayBuffer): number;
  deregMr(mr: number): void;
  createCq(ctx: number, depth: number): number;
  destroyCq(cq: number): void;
  createQp(pd: number, type: string, sendCq: number, recvCq: number, maxSendWr: number, maxRecvWr: number): { qp: number; qpn: number };
  destroyQp(qp: number): void;
  modifyQpInit(qp: number, port: number): void;
  modifyQpRtr(qp: number, port: number, pathMtu: number, destQpn: number, destPsn: number, destLid: number, destGid: string, sgidIndex: number): void;
  modifyQpRts(qp: number, psn: number): void;
  postSend(qp: number, wrId: number, mr: number, offset: number, length: number): void;
  postRecv(qp: number, wrId: number, mr: number, offset: number, length: number): void;
  pollCq(cq: number, max: number): WorkCompletion[];
  /** Busy-polls on a libuv pool thread until a completion arrives or `timeoutUs` passes. */
  pollCqAsync(cq: number, max: number, timeoutUs: number): Promise<WorkCompletion[]>;
}

/** How long one native busy-poll runs before JavaScript looks again (watchdog, close). */
const NATIVE_POLL_SLICE_US = 50_000;

const loaded = new Map<string, { addon: VerbsAddon | null; reason: string }>();

/** Loads the addon once per path; `addon` is null with the reason when it is missing or does not load. */
export function loadVerbsAddon(path = DEFAULT_ADDON_PATH): { addon: VerbsAddon | null; reason: string } {
  const cached = loaded.get(path);
  if (cached) return cached;
  let result: { addon: VerbsAddon | null; reason: string };
  if (!existsSync(path)) result = { addon: null, reason: 'RDMA addon not built' };
  else {
    try {
      result = { addon: createRequire(import.meta.url)(path) as VerbsAddon, reason: '' };
    } catch (err) {
      result = { addon: null, reason: `RDMA addon does not load: ${(err as Error).message.split('\n')[0]}` };
    }
  }
  loaded.set(path, result);
  return result;
}

function errnoReason(errno: number, message: string): string {
  // Linux without RDMA in the kernel: ibv_get_device_list fails with ENOSYS.
  return errno ? `no RDMA devices (ibv_get_device_list: ${message})` : 'no RDMA devices';
}

/** What this machine can do with RDMA, for `orchard status`, the planner and the per-link choice. */
export function addonStatus(path = DEFAULT_ADDON_PATH): AddonStatus {
  const { addon, reason } = loadVerbsAddon(path);
  if (!addon) return { state: 'not-built', reason };
  const lib = addon.libraryStatus();
  if (!lib.headers) return { state: 'no-library', kind: lib.kind, reason: lib.error };
  if (!lib.loaded) return { state: 'no-library', kind: lib.kind, reason: `no verbs library: ${lib.error}` };
  const list = addon.listDevices();
  if (list.devices.length === 0) return { state: 'no-devices', kind: lib.kind, library: lib.library, reason: errnoReason(list.errno, list.message) };
  return { state: 'ready', kind: lib.kind, library: lib.library, devices: list.devices, reason: `${list.devices.length} RDMA device(s)` };
}

function wrap<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    const msg = (err as Error).message;
    const code = /^([A-Z]+):/.exec(msg)?.[1] ?? 'EIO';
    throw new VerbsError(code, msg.replace(/^[A-Z]+: /, ''));
  }
}

/** The addon as a `Verbs` table, or null with the reason (then every link falls back to TCP). */
export function nativeVerbs(path = DEFAULT_ADDON_PATH): { verbs: Verbs | null; status: AddonStatus } {
  const status = addonStatus(path);
  if (status.state !== 'ready') return { verbs: null, status };
  const a = loadVerbsAddon(path).addon!;
  const slabs = new WeakMap<Uint8Array, ArrayBuffer>();
  // The busy-poll loop runs on a native thread (pollCqAsync); completions it found wait here for pollCq.
  // While it runs, nothing else polls that queue, and a queue is destroyed only after it returned.
  const stash = new Map<number, WorkCompletion[]>();
  const inflight = new Map<number, Promise<void>>();
  const doomed = new Set<number>();
  const verbs: Verbs = {
    kind: status.kind,
    limits: status.kind === 'apple' ? APPLE_LIMITS : LINUX_LIMITS,
    listDevices: () => a.listDevices().devices,
    openDevice: (name) => wrap(() => a.openDevice(name)),
    closeDevice: (ctx) => wrap(() => a.closeDevice(ctx)),
    queryPort: (ctx, port) => wrap(() => a.queryPort(ctx, port)),
    queryGid: (ctx, port, index) => wrap(() => a.queryGid(ctx, port, index)),
    allocPd: (ctx) => wrap(() => a.allocPd(ctx)),
    deallocPd: (pd) => wrap(() => a.deallocPd(pd)),
    allocSlab: (bytes): Slab => {
      const ab = wrap(() => a.allocSlab(bytes));
      const view = new Uint8Array(ab);
      slabs.set(view, ab);
      return { bytes: view };
    },
    regMr: (pd, slab) => {
      const ab = slabs.get(slab.bytes);
      if (!ab) throw new VerbsError('EINVAL', 'only slabs from allocSlab can be registered');
      return wrap(() => a.regMr(pd, ab));
    },
    deregMr: (mr) => wrap(() => a.deregMr(mr)),
    createCq: (ctx, depth) => wrap(() => a.createCq(ctx, depth)),
    destroyCq: (cq) => {
      stash.delete(cq);
      if (inflight.has(cq)) doomed.add(cq);
      else wrap(() => a.destroyCq(cq));
    },
    createQp: (pd, init: QpInit) => wrap(() => a.createQp(pd, init.type, init.sendCq, init.recvCq, init.maxSendWr, init.maxRecvWr)),
    destroyQp: (qp) => wrap(() => a.destroyQp(qp)),
    modifyQpInit: (qp, port) => wrap(() => a.modifyQpInit(qp, port)),
    modifyQpRtr: (qp, r: RtrAttrs) =>
      wrap(() => a.modifyQpRtr(qp, r.port, r.pathMtu, r.dest.qpn, r.dest.psn, r.dest.lid, r.dest.gid, r.sgidIndex)),
    modifyQpRts: (qp, psn) => wrap(() => a.modifyQpRts(qp, psn)),
    postSend: (qp: Handle, wrId, mr, offset, length) => wrap(() => a.postSend(qp, wrId, mr, offset, length)),
    postRecv: (qp: Handle, wrId, mr, offset, length) => wrap(() => a.postRecv(qp, wrId, mr, offset, length)),
    pollCq: (cq, max) => {
      const ready = stash.get(cq);
      if (ready && ready.length > 0) return ready.splice(0, max);
      if (inflight.has(cq)) return [];
      return wrap(() => a.pollCq(cq, max));
    },
    waitCq: (cq) => {
      const running = inflight.get(cq);
      if (running) return running;
      if ((stash.get(cq)?.length ?? 0) > 0) return Promise.resolve();
      let started: Promise<WorkCompletion[]>;
      try {
        started = a.pollCqAsync(cq, 64, NATIVE_POLL_SLICE_US);
      } catch {
        return Promise.resolve(); // a bad handle: the next synchronous pollCq throws the error
      }
      const p = started
        .then(
          (wcs) => {
            if (wcs.length > 0) stash.set(cq, [...(stash.get(cq) ?? []), ...wcs]);
          },
          () => {
            // the next synchronous pollCq reports the failure
          },
        )
        .finally(() => {
          inflight.delete(cq);
          if (doomed.delete(cq)) a.destroyCq(cq);
        });
      inflight.set(cq, p);
      return p;
    },
  };
  return { verbs, status };
}
