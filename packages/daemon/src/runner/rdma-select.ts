/**
 * Which verbs a runner uses and which device (cable) reaches each peer rank.
 *
 * Real hardware: the native addon (`nativeVerbs`); the cable to a peer is the `rdma_enX` whose paired `enX`
 * shares an IPv4 subnet with one of the peer's data-plane addresses (each Thunderbolt cable is its own
 * point-to-point network). Where several cables share the subnet (link-local on every port) the device is
 * ambiguous and that link uses TCP rather than guessing: a wrong cable would only show up as a stall.
 *
 * Tests: `ORCHARD_RDMA_SIM` selects the simulated fabric instead (test-only; see below).
 */
import os from 'node:os';
import { rdma, type TcpPeer } from './transport.js';
import { sameSubnet } from '../links/paths.js';

export interface RdmaSelection {
  verbs: rdma.Verbs | null;
  /** Why `verbs` is null (one line), '' when verbs exist. */
  reason: string;
  /** The device whose cable reaches `peer`. */
  deviceFor(peer: number): string | undefined;
  /** Why `deviceFor(peer)` is undefined, when more is known than "no device reaches it". */
  noDeviceReason(peer: number): string | undefined;
  /** Releases what the selection opened (the simulated fabric's sockets). */
  close(): Promise<void>;
}

/**
 * TEST-ONLY. Set in a runner's environment, every runner uses the simulated fabric (Apple's rules, queue
 * pairs reaching other runner processes over loopback sockets) instead of the native addon. Value: `1`, or
 * JSON `{"failRtr": [[rank, peer], ...], "noVerbs": [rank, ...]}` to make RTR fail on rank's link to peer,
 * or to give ranks no verbs at all.
 */
export const RDMA_SIM_ENV = 'ORCHARD_RDMA_SIM';

interface SimSettings {
  failRtr: [number, number][];
  noVerbs: number[];
}

function parseSimSettings(text: string): SimSettings {
  if (text.trim() === '1') return { failRtr: [], noVerbs: [] };
  let raw: { failRtr?: unknown; noVerbs?: unknown };
  try {
    raw = JSON.parse(text) as typeof raw;
  } catch {
    throw new Error(`${RDMA_SIM_ENV} must be 1 or JSON, got ${text.slice(0, 80)}`);
  }
  const pairs = Array.isArray(raw.failRtr) ? raw.failRtr : [];
  return {
    failRtr: pairs.filter((p): p is [number, number] => Array.isArray(p) && p.length === 2 && p.every(Number.isInteger)),
    noVerbs: Array.isArray(raw.noVerbs) ? raw.noVerbs.filter(Number.isInteger) : [],
  };
}

/** One simulated cable per peer, named after it, so both ends agree without discovery. */
export function simDeviceName(peer: number): string {
  return `rdma_sim${peer}`;
}

async function simSelection(rank: number, size: number, settings: SimSettings): Promise<RdmaSelection> {
  const none = { deviceFor: () => undefined, noDeviceReason: () => undefined, close: async () => {} };
  if (settings.noVerbs.includes(rank)) return { verbs: null, reason: `no verbs on rank ${rank} (${RDMA_SIM_ENV} test setting)`, ...none };
  const fabric = new rdma.SimFabric({ mode: 'apple' });
  await fabric.listen();
  const host = `rank${rank}`;
  const specs = [...Array(size).keys()].filter((p) => p !== rank).map((p) => ({ name: simDeviceName(p), ipv4: `10.${rank}.${p}.1` }));
  const verbs = fabric.addHost(host, specs);
  for (const [r, p] of settings.failRtr) if (r === rank) fabric.failNextRtr(host, simDeviceName(p), `${RDMA_SIM_ENV}: injected RTR failure`);
  return { verbs, reason: '', deviceFor: (p) => (p === rank ? undefined : simDeviceName(p)), noDeviceReason: () => undefined, close: () => fabric.close() };
}

/** IPv4 CIDRs per interface name. */
function interfaceCidrs(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [name, addrs] of Object.entries(os.networkInterfaces())) {
    out.set(name, (addrs ?? []).filter((a) => a.family === 'IPv4' && a.cidr).map((a) => a.cidr!));
  }
  return out;
}

/** The devices whose paired interface shares a subnet with one of `peer`'s addresses. */
export function cablesTo(devices: string[], cidrs: Map<string, string[]>, peer: TcpPeer | undefined): string[] {
  const hosts = peer?.addresses.map((a) => a.host) ?? [];
  return devices.filter((d) => {
    const netdev = rdma.pairedNetdev(d);
    return !!netdev && (cidrs.get(netdev) ?? []).some((c) => hosts.some((h) => sameSubnet(c, h)));
  });
}

function nativeSelection(peers: TcpPeer[]): RdmaSelection {
  const { verbs, status } = rdma.nativeVerbs();
  if (!verbs) return { verbs: null, reason: status.reason, deviceFor: () => undefined, noDeviceReason: () => undefined, close: async () => {} };
  const devices = verbs.listDevices();
  const cidrs = interfaceCidrs();
  return {
    verbs,
    reason: '',
    deviceFor: (p) => {
      const found = cablesTo(devices, cidrs, peers[p]);
      return found.length === 1 ? found[0] : undefined;
    },
    noDeviceReason: (p) => {
      const found = cablesTo(devices, cidrs, peers[p]);
      if (found.length > 1) return `${found.join(', ')} all share a subnet with rank ${p}: give each Thunderbolt cable its own subnet`;
      return `no RDMA device's interface shares a subnet with rank ${p}'s addresses`;
    },
    close: async () => {},
  };
}

/** `sim`: the daemon's ORCHARD_RDMA_SIM setting (tests), null for the native verbs library. */
export async function selectRdma(rank: number, peers: TcpPeer[], sim: string | null): Promise<RdmaSelection> {
  if (sim) return simSelection(rank, peers.length, parseSimSettings(sim));
  return nativeSelection(peers);
}
