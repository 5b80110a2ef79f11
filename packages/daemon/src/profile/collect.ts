/**
 * Gathers this machine's profile by running the probes and feeding their output to the pure
 * parsers. Every probe has a timeout and a missing tool only leaves its fields empty.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, readlinkSync, statfsSync } from 'node:fs';
import os from 'node:os';
import { basename } from 'node:path';
import si from 'systeminformation';
import { parseCpuinfo, parseMeminfo } from './linux/proc.js';
import { linuxInterfaceKind } from './linux/interfaces.js';
import { parseHardwarePorts, type HardwarePort } from './macos/networksetup.js';
import { parseSysctl, sysctlFacts } from './macos/sysctl.js';
import { parseVmStat } from './macos/vm-stat.js';
import { parseDisplays, parseHardware, parseThunderbolt } from './macos/system-profiler.js';
import { rdma } from '@orchard/transport';
import { parseRdmaCtlStatus, profileDevice } from './rdma.js';
import type { Capability, NetInterface, NodeProfile, RdmaDevice, RdmaState, ThunderboltPort } from './types.js';
import type { NodeGpu } from './gpu.js';

/** Runs a probe; null when the tool is missing, fails or times out. */
export type ProbeRunner = (cmd: string, args: string[], timeoutMs?: number) => Promise<string | null>;

function run(cmd: string, args: string[], timeoutMs = 5000): Promise<string | null> {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: timeoutMs, maxBuffer: 4 << 20 }, (err, stdout) => resolve(err ? null : stdout));
  });
}

function safe<T>(f: () => T, fallback: T): T {
  try {
    return f();
  } catch {
    return fallback;
  }
}

/** Addresses from the OS, kinds from the platform's hardware-port table. */
export function listInterfaces(
  kindOf: (name: string) => Pick<NetInterface, 'kind' | 'hardwarePort'>,
  source: () => NodeJS.Dict<os.NetworkInterfaceInfo[]> = os.networkInterfaces,
): NetInterface[] {
  const out: NetInterface[] = [];
  for (const [name, addrs] of Object.entries(source())) {
    if (!addrs) continue;
    const { kind, hardwarePort } = kindOf(name);
    out.push({
      name,
      kind,
      ...(hardwarePort ? { hardwarePort } : {}),
      mac: addrs.find((a) => a.mac && a.mac !== '00:00:00:00:00:00')?.mac,
      ipv4: addrs.filter((a) => a.family === 'IPv4').map((a) => a.cidr ?? a.address),
      ipv6: addrs.filter((a) => a.family === 'IPv6').map((a) => a.cidr ?? a.address),
    });
  }
  return out;
}

/**
 * Device facts plus the transport's readiness verdict: the planner marks a link RDMA only where the runner's
 * per-link setup would try RDMA too (addon built, verbs library present, port active, IPv4-mapped GID).
 * With a working addon the facts come from the library itself (rdmaReadiness), else from `ibv_devinfo -v`.
 */
async function rdmaState(onMac: boolean, run: ProbeRunner, addon: () => rdma.AddonStatus, interfaces: Record<string, string[]>): Promise<RdmaState> {
  const enabled = onMac ? parseRdmaCtlStatus((await run('rdma_ctl', ['status'])) ?? '') : null;
  const status = addon();
  let readiness: rdma.RdmaReadiness;
  let devices: RdmaDevice[];
  if (status.state === 'ready') {
    readiness = await rdma.rdmaReadiness();
    devices = readiness.devices.map((d) => ({ name: d.device, interface: d.netdev, portState: d.portState, active: /ACTIVE$/.test(d.portState), ipv4Gid: d.ipv4Gid !== null }));
  } else {
    const devinfo = await run('ibv_devinfo', ['-v']);
    let parsed = devinfo ? rdma.parseIbvDevinfo(devinfo) : [];
    if (parsed.length === 0) {
      // ibv_devinfo missing or failing: still list the devices ibv_devices knows.
      parsed = rdma.parseIbvDevices((await run('ibv_devices', [])) ?? '').map((d) => ({ name: d.name, transport: null, netdev: rdma.pairedNetdev(d.name), ports: [] }));
    }
    readiness = rdma.summarizeReadiness({ addon: status, devices: parsed, interfaces, source: devinfo ? 'ibv_devinfo' : 'none' });
    devices = parsed.map(profileDevice);
  }
  const available = readiness.available && enabled !== false;
  const summary = enabled === false ? 'RDMA disabled (rdma_ctl status); links use TCP' : readiness.summary;
  return { enabled, devices, available, summary };
}

export interface ProfileInput {
  peerId: string;
  name: string;
  dataDir: string;
  probePort: number;
  capability: Capability | null;
  /** The GPU runners use (backend/node.ts), or null. */
  gpu?: NodeGpu | null;
  /** Memory kept outside the planner's plan per instance (serving/reserved-memory.ts). */
  reservedBytes?: number;
}

/** Static facts (chip, cores, ports) are probed once; memory and disk on every refresh. */
export class ProfileCollector {
  #platform: NodeJS.Platform;
  #run: ProbeRunner;
  #interfaces: () => NodeJS.Dict<os.NetworkInterfaceInfo[]>;
  #addon: () => rdma.AddonStatus;

  /**
   * Platform, probe runner, interface list and the RDMA addon's status are injectable so the macOS path runs
   * in tests on recorded outputs.
   */
  constructor(
    deps: { platform?: NodeJS.Platform; run?: ProbeRunner; networkInterfaces?: () => NodeJS.Dict<os.NetworkInterfaceInfo[]>; rdmaAddon?: () => rdma.AddonStatus } = {},
  ) {
    this.#platform = deps.platform ?? process.platform;
    this.#run = deps.run ?? run;
    this.#interfaces = deps.networkInterfaces ?? os.networkInterfaces;
    this.#addon = deps.rdmaAddon ?? (() => rdma.addonStatus());
  }

  #static: Promise<Omit<NodeProfile, 'peerId' | 'name' | 'memory' | 'diskFreeBytes' | 'capability' | 'probePort' | 'updatedAt' | 'interfaces'> & { ports: HardwarePort[] }> | null = null;

  async collect(input: ProfileInput): Promise<NodeProfile> {
    this.#static ??= this.#probeStatic();
    const st = await this.#static;
    const onMac = this.#platform === 'darwin';
    let memory = { totalBytes: os.totalmem(), availableBytes: os.freemem() };
    if (onMac) {
      const vm = parseVmStat((await this.#run('vm_stat', [])) ?? '');
      if (vm) memory = { ...memory, availableBytes: Math.min(vm.availableBytes, memory.totalBytes) };
    } else {
      const mi = safe(() => parseMeminfo(readFileSync('/proc/meminfo', 'utf8')), { totalBytes: null, availableBytes: null });
      memory = { totalBytes: mi.totalBytes ?? memory.totalBytes, availableBytes: mi.availableBytes ?? memory.availableBytes };
    }
    const diskFreeBytes = safe(() => {
      const s = statfsSync(input.dataDir);
      return s.bavail * s.bsize;
    }, null);
    const portsByDevice = new Map(st.ports.map((p) => [p.device, p]));
    const interfaces = listInterfaces((name) => {
      if (onMac) {
        const p = portsByDevice.get(name);
        if (p) return { kind: p.kind, hardwarePort: p.port };
        return { kind: name === 'lo0' ? 'loopback' : 'other' };
      }
      return {
        kind: linuxInterfaceKind(name, {
          wireless: existsSync(`/sys/class/net/${name}/wireless`) || existsSync(`/sys/class/net/${name}/phy80211`),
          driver: safe(() => basename(readlinkSync(`/sys/class/net/${name}/device/driver`)), null),
        }),
      };
    }, this.#interfaces);
    const { ports: _ports, ...rest } = st;
    return {
      ...rest,
      peerId: input.peerId,
      name: input.name,
      memory,
      diskFreeBytes,
      load: Number((os.loadavg()[0] / Math.max(1, os.availableParallelism())).toFixed(3)),
      interfaces,
      capability: input.capability,
      gpu: input.gpu ?? null,
      ...(input.reservedBytes ? { reservedBytes: input.reservedBytes } : {}),
      probePort: input.probePort,
      updatedAt: Date.now(),
    };
  }

  async #probeStatic() {
    const onMac = this.#platform === 'darwin';
    const run = this.#run;
    const base = {
      hostname: os.hostname(),
      os: { platform: this.#platform as string, release: os.release(), arch: process.arch },
      chip: os.cpus()[0]?.model ?? 'unknown',
      cpu: { cores: os.cpus().length, performanceCores: null as number | null, efficiencyCores: null as number | null },
      gpuCores: null as number | null,
      thunderbolt: [] as ThunderboltPort[],
      rdma: { enabled: null, devices: [] } as RdmaState,
      ports: [] as HardwarePort[],
    };
    if (onMac) {
      const [sysctl, hw, disp, tb, ns] = await Promise.all([
        run('sysctl', ['hw.memsize', 'hw.ncpu', 'hw.perflevel0.physicalcpu', 'hw.perflevel1.physicalcpu', 'machdep.cpu.brand_string', 'kern.osproductversion']),
        run('system_profiler', ['SPHardwareDataType', '-json'], 20_000),
        run('system_profiler', ['SPDisplaysDataType', '-json'], 20_000),
        run('system_profiler', ['SPThunderboltDataType', '-json'], 20_000),
        run('networksetup', ['-listallhardwareports']),
      ]);
      const sc = sysctlFacts(parseSysctl(sysctl ?? ''));
      const hwf = safe(() => parseHardware(hw ?? ''), null);
      base.chip = hwf?.chip ?? sc.chip ?? base.chip;
      base.cpu.performanceCores = sc.performanceCores ?? hwf?.performanceCores ?? null;
      base.cpu.efficiencyCores = sc.efficiencyCores ?? hwf?.efficiencyCores ?? null;
      base.gpuCores = safe(() => parseDisplays(disp ?? '').gpuCores, null);
      base.ports = parseHardwarePorts(ns ?? '');
      base.thunderbolt = safe(() => parseThunderbolt(tb ?? ''), []).map((port) => ({
        ...port,
        interface: base.ports.find((p) => p.port === `Thunderbolt ${port.receptacle}`)?.device ?? null,
      }));
      if (sc.osVersion) base.os.release = sc.osVersion;
    } else {
      const ci = safe(() => parseCpuinfo(readFileSync('/proc/cpuinfo', 'utf8')), { model: null, cores: 0 });
      base.chip = ci.model ?? base.chip;
      // systeminformation knows P/E core splits (hybrid Intel, Apple); bounded so a slow probe cannot stall start-up.
      const cpu = await Promise.race([si.cpu().catch(() => null), new Promise<null>((r) => setTimeout(() => r(null), 3000).unref())]);
      if (cpu?.performanceCores && cpu.efficiencyCores) {
        base.cpu.performanceCores = cpu.performanceCores;
        base.cpu.efficiencyCores = cpu.efficiencyCores;
      }
    }
    const ipv4: Record<string, string[]> = {};
    for (const [name, addrs] of Object.entries(this.#interfaces())) ipv4[name] = (addrs ?? []).filter((a) => a.family === 'IPv4').map((a) => a.address);
    base.rdma = await rdmaState(onMac, run, this.#addon, ipv4);
    return base;
  }
}
