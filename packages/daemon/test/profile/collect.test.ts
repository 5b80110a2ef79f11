import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ProfileCollector, type ProbeRunner } from '../../src/profile/collect.js';
import { nodeProfileSchema } from '../../src/profile/types.js';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/macos/${name}`, import.meta.url), 'utf8');
const input = { peerId: 'P', name: 'studio', dataDir: mkdtempSync(join(os.tmpdir(), 'orchard-prof-')), probePort: 4000, capability: null };

/** Answers each macOS probe with its recorded output (hand-written, see fixtures/macos/README.md). */
const macRunner: ProbeRunner = async (cmd, args) => {
  const key = `${cmd} ${args.join(' ')}`;
  if (cmd === 'sysctl') return fixture('sysctl.txt');
  if (key === 'system_profiler SPHardwareDataType -json') return fixture('SPHardwareDataType.json');
  if (key === 'system_profiler SPDisplaysDataType -json') return fixture('SPDisplaysDataType.json');
  if (key === 'system_profiler SPThunderboltDataType -json') return fixture('SPThunderboltDataType.json');
  if (key === 'networksetup -listallhardwareports') return fixture('networksetup-listallhardwareports.txt');
  if (key === 'rdma_ctl status') return fixture('rdma_ctl-status.txt');
  if (key === 'ibv_devinfo -v') return fixture('ibv_devinfo.txt');
  if (cmd === 'vm_stat') return fixture('vm_stat.txt');
  return null;
};

const iface = (address: string, cidr: string, family: 'IPv4' | 'IPv6' = 'IPv4') => ({ address, cidr, family, netmask: '', mac: '36:ab:cd:00:00:01', internal: false }) as os.NetworkInterfaceInfo;

describe('profile collection', () => {
  it('macOS: assembles chip, P/E cores, GPU cores, port kinds, Thunderbolt ports with their interfaces, RDMA', async () => {
    const collector = new ProfileCollector({
      platform: 'darwin',
      run: macRunner,
      networkInterfaces: () => ({
        lo0: [iface('127.0.0.1', '127.0.0.1/8')],
        en0: [iface('192.168.1.10', '192.168.1.10/24')],
        en1: [iface('192.168.1.11', '192.168.1.11/24')],
        en2: [iface('169.254.1.2', '169.254.1.2/16')],
      }),
    });
    const p = await collector.collect(input);
    expect(nodeProfileSchema.safeParse(p).success).toBe(true);
    expect(p).toMatchObject({ chip: 'Apple M3 Ultra', cpu: { performanceCores: 24, efficiencyCores: 8 }, gpuCores: 80, os: { platform: 'darwin', release: '26.2' } });
    expect(p.interfaces.map((i) => [i.name, i.kind, i.hardwarePort ?? null])).toEqual([
      ['lo0', 'loopback', null],
      ['en0', 'ethernet', 'Ethernet'],
      ['en1', 'wifi', 'Wi-Fi'],
      ['en2', 'thunderbolt', 'Thunderbolt 1'],
    ]);
    expect(p.thunderbolt.map((t) => [t.receptacle, t.interface, t.speedGbps, t.remoteDomainUuids.length])).toEqual([
      [1, 'en2', 80, 1],
      [2, 'en3', 80, 1],
      [3, 'en4', 80, 0],
    ]);
    expect(p.memory.availableBytes).toBe(Math.min((1843200 + 8192000) * 16384, os.totalmem()));
    expect(p.rdma.enabled).toBe(true);
    expect(p.rdma.devices.filter((d) => d.active && d.ipv4Gid).map((d) => d.interface)).toEqual(['en2']);
  });

  it("RDMA readiness is the transport's verdict: a ready device does not count while the addon is not built", async () => {
    const collector = new ProfileCollector({
      platform: 'darwin',
      run: macRunner,
      networkInterfaces: () => ({ en2: [iface('169.254.1.2', '169.254.1.2/16')] }),
      rdmaAddon: () => ({ state: 'not-built', reason: 'RDMA addon not built' }),
    });
    const p = await collector.collect(input);
    expect(p.rdma.devices.filter((d) => d.active && d.ipv4Gid).map((d) => d.name)).toEqual(['rdma_en2']);
    expect(p.rdma.available).toBe(false);
    expect(p.rdma.summary).toBe('RDMA unavailable: RDMA addon not built; links use TCP');
  });

  it('RDMA disabled by rdma_ctl: not available, and the summary says so', async () => {
    const run: ProbeRunner = async (cmd, args) => (cmd === 'rdma_ctl' ? fixture('rdma_ctl-status-disabled.txt') : macRunner(cmd, args));
    const p = await new ProfileCollector({ platform: 'darwin', run, networkInterfaces: () => ({}), rdmaAddon: () => ({ state: 'not-built', reason: 'RDMA addon not built' }) }).collect(input);
    expect(p.rdma).toMatchObject({ enabled: false, available: false, summary: 'RDMA disabled (rdma_ctl status); links use TCP' });
  });

  it('macOS with every probe missing still yields a valid profile', async () => {
    const p = await new ProfileCollector({ platform: 'darwin', run: async () => null, networkInterfaces: () => ({}) }).collect(input);
    expect(nodeProfileSchema.safeParse(p).success).toBe(true);
    expect(p).toMatchObject({ gpuCores: null, thunderbolt: [], rdma: { enabled: null, devices: [] } });
  });

  it.skipIf(process.platform !== 'linux')('Linux: this machine, from /proc and the OS', async () => {
    const p = await new ProfileCollector().collect(input);
    expect(nodeProfileSchema.safeParse(p).success).toBe(true);
    expect(p.memory.totalBytes).toBeGreaterThan(0);
    expect(p.memory.availableBytes).toBeLessThanOrEqual(p.memory.totalBytes);
    expect(p.cpu.cores).toBe(os.cpus().length);
    expect(p.diskFreeBytes).toBeGreaterThan(0);
    // No RDMA devices on the project's machines: the transport's one-line reason, links on TCP.
    expect(p.rdma.available).toBe(false);
    expect(p.rdma.summary).toMatch(/^RDMA unavailable: .*links use TCP$/);
    expect(p.interfaces.find((i) => i.name === 'lo')?.kind).toBe('loopback');
  });
});
