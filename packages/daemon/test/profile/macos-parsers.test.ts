import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseHardwarePorts } from '../../src/profile/macos/networksetup.js';
import { parseSysctl, sysctlFacts } from '../../src/profile/macos/sysctl.js';
import { parseVmStat } from '../../src/profile/macos/vm-stat.js';
import { parseDisplays, parseHardware, parseMemorySize, parseThunderbolt } from '../../src/profile/macos/system-profiler.js';
import { isIpv4MappedGid, parseIbvDevices, parseIbvDevinfo, parseRdmaCtlStatus } from '../../src/profile/rdma.js';
import { matchThunderboltPeers } from '../../src/profile/thunderbolt-match.js';

// Outputs written from the documented formats (see fixtures/macos/README.md), not captured on a Mac.
const fixture = (name: string) => readFileSync(new URL(`../fixtures/macos/${name}`, import.meta.url), 'utf8');

describe('macOS probe parsers on recorded outputs', () => {
  it('sysctl: memory, cores and P/E split', () => {
    const f = sysctlFacts(parseSysctl(fixture('sysctl.txt')));
    expect(f).toEqual({
      memoryBytes: 549755813888,
      cores: 32,
      performanceCores: 24,
      efficiencyCores: 8,
      chip: 'Apple M3 Ultra',
      osVersion: '26.2',
    });
  });

  it('SPHardwareDataType: chip, memory, processor split', () => {
    expect(parseHardware(fixture('SPHardwareDataType.json'))).toEqual({
      chip: 'Apple M3 Ultra',
      model: 'Mac Studio',
      memoryBytes: 512 * 2 ** 30,
      cores: 32,
      performanceCores: 24,
      efficiencyCores: 8,
    });
    expect(parseMemorySize('1 TB')).toBe(2 ** 40);
    expect(parseMemorySize('lots')).toBeNull();
    expect(() => parseHardware('not json')).toThrow(/SPHardwareDataType: output is not JSON/);
  });

  it('SPDisplaysDataType: GPU cores from the string field', () => {
    expect(parseDisplays(fixture('SPDisplaysDataType.json'))).toEqual({ gpu: 'Apple M3 Ultra', gpuCores: 80 });
    expect(parseDisplays('{"SPDisplaysDataType":[{"_name":"x"}]}').gpuCores).toBeNull();
  });

  it('SPThunderboltDataType: buses, speed, cabled peers', () => {
    const ports = parseThunderbolt(fixture('SPThunderboltDataType.json'));
    expect(ports).toHaveLength(3);
    expect(ports[0]).toMatchObject({
      bus: 'thunderboltusb4_bus_0',
      domainUuid: '6A0C2F1E-8B3D-4C59-9E1A-0D4B7F2C3A11',
      speedGbps: 80,
      receptacle: 1,
      connected: true,
      remoteDomainUuids: ['B71D4E20-33A9-4F0C-8C2E-5A6F9D1E7B22'],
      remoteNames: ['Mac Studio'],
    });
    expect(ports[2]).toMatchObject({ connected: false, remoteDomainUuids: [], receptacle: 3 });
    const tb4 = parseThunderbolt(fixture('SPThunderboltDataType-tb4.json'));
    expect(tb4).toHaveLength(1);
    expect(tb4[0].speedGbps).toBe(40);
  });

  it('networksetup: hardware ports with kinds, Thunderbolt Bridge not a cable', () => {
    const ports = parseHardwarePorts(fixture('networksetup-listallhardwareports.txt'));
    expect(ports.map((p) => [p.port, p.device, p.kind])).toEqual([
      ['Ethernet', 'en0', 'ethernet'],
      ['Wi-Fi', 'en1', 'wifi'],
      ['Thunderbolt 1', 'en2', 'thunderbolt'],
      ['Thunderbolt 2', 'en3', 'thunderbolt'],
      ['Thunderbolt 3', 'en4', 'thunderbolt'],
      ['Thunderbolt Bridge', 'bridge0', 'other'],
    ]);
    expect(ports[0].mac).toBe('1c:57:dc:01:02:03');
  });

  it('vm_stat: free + inactive pages as available memory', () => {
    expect(parseVmStat(fixture('vm_stat.txt'))).toEqual({ pageSize: 16384, availableBytes: (1843200 + 8192000) * 16384 });
    expect(parseVmStat('garbage')).toBeNull();
  });

  it('rdma_ctl status', () => {
    expect(parseRdmaCtlStatus(fixture('rdma_ctl-status.txt'))).toBe(true);
    expect(parseRdmaCtlStatus(fixture('rdma_ctl-status-disabled.txt'))).toBe(false);
    expect(parseRdmaCtlStatus('command not found')).toBeNull();
  });

  it('ibv_devices and ibv_devinfo: devices, port state, IPv4 GID', () => {
    expect(parseIbvDevices(fixture('ibv_devices.txt'))).toEqual(['rdma_en2', 'rdma_en3', 'rdma_en4']);
    expect(parseIbvDevinfo(fixture('ibv_devinfo.txt'))).toEqual([
      { name: 'rdma_en2', interface: 'en2', portState: 'PORT_ACTIVE', active: true, ipv4Gid: true },
      { name: 'rdma_en3', interface: 'en3', portState: 'PORT_ACTIVE', active: true, ipv4Gid: false },
      { name: 'rdma_en4', interface: 'en4', portState: 'PORT_DOWN', active: false, ipv4Gid: false },
    ]);
    expect(isIpv4MappedGid('::ffff:169.254.1.2')).toBe(true);
    expect(isIpv4MappedGid('fe80:0000:0000:0000:34ab:cdff:fe00:0001')).toBe(false);
    expect(parseIbvDevinfo('')).toEqual([]);
  });

  it('matches Thunderbolt cables to peers by domain UUID', () => {
    const mine = parseThunderbolt(fixture('SPThunderboltDataType.json'));
    const peerPort = (uuid: string, bus: string) => ({
      bus, domainUuid: uuid, speedGbps: 80, receptacle: 1, interface: null, connected: true, remoteDomainUuids: [], remoteNames: [],
    });
    const cables = matchThunderboltPeers(mine, [
      { peerId: 'peerB', thunderbolt: [peerPort('b71d4e20-33a9-4f0c-8c2e-5a6f9d1e7b22', 'bus_0')] },
      { peerId: 'peerC', thunderbolt: [peerPort('D94F6B52-1E8C-4A7D-B2C4-0E1F3A5B6C44', 'bus_1')] },
      { peerId: 'peerD', thunderbolt: [peerPort('99999999-0000-0000-0000-000000000000', 'bus_0')] },
    ]);
    expect(cables).toEqual([
      { bus: 'thunderboltusb4_bus_0', peerId: 'peerB', peerBus: 'bus_0', speedGbps: 80 },
      { bus: 'thunderboltusb4_bus_1', peerId: 'peerC', peerBus: 'bus_1', speedGbps: 80 },
    ]);
  });
});
