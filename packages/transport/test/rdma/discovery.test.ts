/**
 * Discovery parsers on outputs written by hand from the documented formats (see fixtures/README.md —
 * not captured on hardware), and the readiness summary built from them.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  ipv4FromMappedGid,
  parseIbvDevices,
  parseIbvDevinfo,
  rdmaReadiness,
  summarizeReadiness,
} from '../../src/rdma/discovery.js';
import type { AddonStatus } from '../../src/rdma/native.js';

const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8');
const READY_ADDON: AddonStatus = { state: 'ready', kind: 'apple', library: 'librdma.dylib', devices: ['rdma_en2', 'rdma_en3', 'rdma_en4'], reason: '3 RDMA device(s)' };

describe('RDMA discovery parsers (hand-written fixtures from the documented formats)', () => {
  it('ibv_devices: names and GUIDs', () => {
    expect(parseIbvDevices(fixture('ibv_devices-macos.txt'))).toEqual([
      { name: 'rdma_en2', guid: '36abcdfffe000001' },
      { name: 'rdma_en3', guid: '36abcdfffe000002' },
      { name: 'rdma_en4', guid: '36abcdfffe000003' },
    ]);
    expect(parseIbvDevices('')).toEqual([]);
  });

  it('ibv_devinfo -v on a Mac: rdma_enX <-> enX, port state, GID table', () => {
    const devs = parseIbvDevinfo(fixture('ibv_devinfo-v-macos.txt'));
    expect(devs.map((d) => [d.name, d.netdev, d.transport, d.ports[0]?.state])).toEqual([
      ['rdma_en2', 'en2', 'Thunderbolt', 'PORT_ACTIVE'],
      ['rdma_en3', 'en3', 'Thunderbolt', 'PORT_ACTIVE'],
      ['rdma_en4', 'en4', 'Thunderbolt', 'PORT_DOWN'],
    ]);
    expect(devs[0]!.ports[0]!.gids.map((g) => g.index)).toEqual([0, 1, 2]);
    expect(devs[0]!.ports[0]!.gids[2]!.gid).toBe('::ffff:10.10.0.1');
    expect(devs[2]!.ports[0]!.activeMtu).toBe(1024);
  });

  it('ibv_devinfo -v from rdma-core (RoCE): both GID spellings and the type suffix', () => {
    const [d] = parseIbvDevinfo(fixture('ibv_devinfo-v-linux-roce.txt'));
    expect(d!.netdev).toBeNull();
    expect(d!.transport).toBe('InfiniBand');
    const gids = d!.ports[0]!.gids;
    expect(gids.map((g) => g.type)).toEqual(['RoCE v1', 'RoCE v2', 'RoCE v1', 'RoCE v2']);
    expect(gids.map((g) => ipv4FromMappedGid(g.gid))).toEqual([null, null, '192.168.1.10', '192.168.1.10']);
  });

  it('IPv4-mapped GIDs in every spelling', () => {
    expect(ipv4FromMappedGid('::ffff:10.0.0.2')).toBe('10.0.0.2');
    expect(ipv4FromMappedGid('0000:0000:0000:0000:0000:ffff:a9fe:0102')).toBe('169.254.1.2');
    expect(ipv4FromMappedGid('::ffff:a9fe:102')).toBe('169.254.1.2');
    expect(ipv4FromMappedGid('fe80::1')).toBeNull();
    expect(ipv4FromMappedGid('')).toBeNull();
  });
});

describe('rdmaReadiness summary', () => {
  it('names per device what is ready and what is missing, with the GID index RTR needs', () => {
    const r = summarizeReadiness({
      addon: READY_ADDON,
      devices: parseIbvDevinfo(fixture('ibv_devinfo-v-macos.txt')),
      interfaces: { en2: ['10.10.0.1'], en3: [] },
      source: 'ibv_devinfo',
    });
    expect(r.available).toBe(true);
    expect(r.summary).toBe('RDMA ready on rdma_en2 (en2)');
    expect(r.devices[0]).toMatchObject({ device: 'rdma_en2', ready: true, ipv4Gid: { index: 2, ipv4: '10.10.0.1' }, interfaceIpv4: '10.10.0.1' });
    expect(r.devices[1]).toMatchObject({ ready: false, reason: 'no IPv4-mapped GID: give en3 an IPv4 address' });
    expect(r.devices[2]!.reason).toMatch(/^port PORT_DOWN: enable RDMA \(rdma_ctl enable/);
  });

  it('without the addon or without devices it says so in one line', () => {
    const none = summarizeReadiness({ addon: { state: 'not-built', reason: 'RDMA addon not built' }, devices: [], interfaces: {}, source: 'none' });
    expect(none).toMatchObject({ available: false, summary: 'RDMA unavailable: RDMA addon not built; links use TCP' });
    const enosys = summarizeReadiness({
      addon: { state: 'no-devices', kind: 'rdma-core', library: 'libibverbs.so.1', reason: 'no RDMA devices (ibv_get_device_list: Function not implemented)' },
      devices: [],
      interfaces: {},
      source: 'addon',
    });
    expect(enosys.summary).toBe('RDMA unavailable: no RDMA devices (ibv_get_device_list: Function not implemented); links use TCP');
    const notReady = summarizeReadiness({
      addon: READY_ADDON,
      devices: parseIbvDevinfo(fixture('ibv_devinfo-v-macos.txt')).slice(2),
      interfaces: {},
      source: 'addon',
    });
    expect(notReady.available).toBe(false);
    expect(notReady.summary).toMatch(/^RDMA not ready: rdma_en4 port PORT_DOWN/);
  });

  it('on this machine (no RDMA hardware) reports unavailable without throwing', async () => {
    const r = await rdmaReadiness({ timeoutMs: 2000 });
    expect(r.available).toBe(false);
    expect(r.summary).toMatch(/^RDMA unavailable: /);
  });
});
