/**
 * RDMA device discovery and the readiness summary the daemon shows in `orchard status` and feeds to the
 * planner. Parsers are pure (tested on recorded outputs); `rdmaReadiness()` gathers the inputs: the addon's
 * own queries when it is built, else the `ibv_devinfo -v` tool, plus the IPv4 addresses of the enX interfaces.
 */
import { execFile } from 'node:child_process';
import os from 'node:os';
import { addonStatus, loadVerbsAddon, type AddonStatus } from './native.js';

export interface IbvGid {
  index: number;
  gid: string;
  /** "RoCE v2" etc. when the tool prints it. */
  type?: string;
}

export interface IbvPort {
  port: number;
  /** As printed: PORT_ACTIVE, PORT_DOWN, ... */
  state: string;
  activeMtu: number | null;
  linkLayer: string | null;
  gids: IbvGid[];
}

export interface IbvDevice {
  name: string;
  transport: string | null;
  /** The IP interface paired with the device: rdma_en2 -> en2 (Apple's naming). */
  netdev: string | null;
  ports: IbvPort[];
}

/** `ibv_devices`: header, dashed rule, then `name guid` rows. */
export function parseIbvDevices(text: string): { name: string; guid: string | null }[] {
  const out: { name: string; guid: string | null }[] = [];
  for (const raw of text.split('\n')) {
    const cols = raw.trim().split(/\s+/).filter(Boolean);
    if (cols.length === 0 || cols[0] === 'device' || /^-+$/.test(cols[0]!)) continue;
    out.push({ name: cols[0]!, guid: cols[1] ?? null });
  }
  return out;
}

export function pairedNetdev(device: string): string | null {
  return /^rdma_(en\d+)$/.exec(device)?.[1] ?? null;
}

/** `::ffff:a.b.c.d` (compressed) or `0000:...:ffff:aabb:ccdd` (ibv_devinfo's full form) → a.b.c.d. */
export function ipv4FromMappedGid(gid: string): string | null {
  const g = gid.trim().toLowerCase();
  let m = /^::ffff:(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})$/.exec(g);
  if (m) return m[1]!;
  m = /^(?:0{1,4}:){5}ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(g) ?? /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(g);
  if (!m) return null;
  const hi = parseInt(m[1]!, 16);
  const lo = parseInt(m[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** `ibv_devinfo [-v]`: one block per `hca_id:`, ports under `port:`, GIDs only with -v. */
export function parseIbvDevinfo(text: string): IbvDevice[] {
  const devices: IbvDevice[] = [];
  let dev: IbvDevice | null = null;
  let port: IbvPort | null = null;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = /^hca_id:\s*(\S+)/.exec(line))) {
      dev = { name: m[1]!, transport: null, netdev: pairedNetdev(m[1]!), ports: [] };
      port = null;
      devices.push(dev);
    } else if (!dev) continue;
    else if ((m = /^transport:\s*(.+?)\s*(?:\(\d+\))?$/.exec(line)) && !port) dev.transport = m[1]!;
    else if ((m = /^port:\s*(\d+)/.exec(line))) {
      port = { port: Number(m[1]), state: 'UNKNOWN', activeMtu: null, linkLayer: null, gids: [] };
      dev.ports.push(port);
    } else if (!port) continue;
    else if ((m = /^state:\s*(\S+)/.exec(line))) port.state = m[1]!;
    else if ((m = /^active_mtu:\s*(\d+)/.exec(line))) port.activeMtu = Number(m[1]);
    else if ((m = /^link_layer:\s*(\S+)/.exec(line))) port.linkLayer = m[1]!;
    else if ((m = /^GID\[\s*(\d+)\]:\s*([0-9a-fA-F:.]+)(?:,\s*(.+))?$/.exec(line))) {
      const gid: IbvGid = { index: Number(m[1]), gid: m[2]! };
      if (m[3]) gid.type = m[3].trim();
      port.gids.push(gid);
    }
  }
  return devices;
}

export interface DeviceReadiness {
  device: string;
  netdev: string | null;
  portState: string;
  /** IPv4 address of the paired interface, when it has one. */
  interfaceIpv4: string | null;
  /** Index and address of port 1's IPv4-mapped GID (the sgid_index RTR needs). */
  ipv4Gid: { index: number; ipv4: string } | null;
  ready: boolean;
  reason: string;
}

export interface RdmaReadiness {
  /** True when the addon works and at least one device is ready. */
  available: boolean;
  /** One line for `orchard status`. */
  summary: string;
  addon: AddonStatus['state'];
  /** Where the device facts came from. */
  source: 'addon' | 'ibv_devinfo' | 'none';
  devices: DeviceReadiness[];
}

function activeState(state: string): boolean {
  return state === 'PORT_ACTIVE' || state === 'ACTIVE';
}

/** Pure: what each device can do, and one line saying so. */
export function summarizeReadiness(input: {
  addon: AddonStatus;
  devices: IbvDevice[];
  /** IPv4 addresses per interface name. */
  interfaces: Record<string, string[]>;
  source: RdmaReadiness['source'];
}): RdmaReadiness {
  const devices: DeviceReadiness[] = input.devices.map((d) => {
    const port = d.ports.find((p) => p.port === 1) ?? d.ports[0];
    const portState = port?.state ?? 'UNKNOWN';
    const gid = port?.gids.map((g) => ({ index: g.index, ipv4: ipv4FromMappedGid(g.gid) })).find((g) => g.ipv4 !== null);
    const interfaceIpv4 = d.netdev ? (input.interfaces[d.netdev]?.[0] ?? null) : null;
    let reason: string;
    if (!port) reason = 'no port';
    else if (!activeState(portState)) reason = `port ${portState}: enable RDMA (rdma_ctl enable, from Recovery) on both Macs and check the cable`;
    else if (!gid) {
      reason = d.netdev && !interfaceIpv4 ? `no IPv4-mapped GID: give ${d.netdev} an IPv4 address` : 'no IPv4-mapped GID';
    } else reason = `ready (GID index ${gid.index}, ${gid.ipv4})`;
    return {
      device: d.name,
      netdev: d.netdev,
      portState,
      interfaceIpv4,
      ipv4Gid: gid ? { index: gid.index, ipv4: gid.ipv4! } : null,
      ready: !!port && activeState(portState) && !!gid,
      reason,
    };
  });
  const ready = devices.filter((d) => d.ready);
  const addonOk = input.addon.state === 'ready';
  let summary: string;
  if (!addonOk && input.addon.state !== 'no-devices') summary = `RDMA unavailable: ${input.addon.reason}; links use TCP`;
  else if (devices.length === 0) summary = `RDMA unavailable: ${input.addon.reason || 'no RDMA devices'}; links use TCP`;
  else if (ready.length === 0) summary = `RDMA not ready: ${devices.map((d) => `${d.device} ${d.reason}`).join('; ')}`;
  else summary = `RDMA ready on ${ready.map((d) => `${d.device}${d.netdev ? ` (${d.netdev})` : ''}`).join(', ')}`;
  return { available: addonOk && ready.length > 0, summary, addon: input.addon.state, source: input.source, devices };
}

function ipv4Interfaces(): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [name, addrs] of Object.entries(os.networkInterfaces())) {
    out[name] = (addrs ?? []).filter((a) => a.family === 'IPv4').map((a) => a.address);
  }
  return out;
}

/** Device facts straight from the library through the addon (no command-line tools needed). */
function devicesFromAddon(): IbvDevice[] {
  const a = loadVerbsAddon().addon;
  if (!a) return [];
  const out: IbvDevice[] = [];
  for (const name of a.listDevices().devices) {
    let ctx = 0;
    try {
      ctx = a.openDevice(name);
      const p = a.queryPort(ctx, 1);
      const gids: IbvGid[] = [];
      for (let i = 0; i < p.gidTableLength; i++) {
        try {
          const gid = a.queryGid(ctx, 1, i);
          if (gid) gids.push({ index: i, gid });
        } catch {
          // unreadable entries are skipped, like ibv_devinfo does
        }
      }
      out.push({ name, transport: null, netdev: pairedNetdev(name), ports: [{ port: 1, state: `PORT_${p.state}`, activeMtu: p.activeMtu, linkLayer: null, gids }] });
    } catch {
      out.push({ name, transport: null, netdev: pairedNetdev(name), ports: [] });
    } finally {
      if (ctx) a.closeDevice(ctx);
    }
  }
  return out;
}

function runDevinfo(timeoutMs: number): Promise<string | null> {
  return new Promise((resolve) => {
    execFile('ibv_devinfo', ['-v'], { timeout: timeoutMs }, (err, stdout) => resolve(err ? null : stdout));
  });
}

/** Re-detect at every start: device names and addresses change across reboots. */
export async function rdmaReadiness(options: { timeoutMs?: number } = {}): Promise<RdmaReadiness> {
  const addon = addonStatus();
  const interfaces = ipv4Interfaces();
  if (addon.state === 'ready') return summarizeReadiness({ addon, devices: devicesFromAddon(), interfaces, source: 'addon' });
  if (addon.state === 'no-devices') return summarizeReadiness({ addon, devices: [], interfaces, source: 'addon' });
  const text = await runDevinfo(options.timeoutMs ?? 3000);
  const devices = text ? parseIbvDevinfo(text) : [];
  return summarizeReadiness({ addon, devices, interfaces, source: text ? 'ibv_devinfo' : 'none' });
}
