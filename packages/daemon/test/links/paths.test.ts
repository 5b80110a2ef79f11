import { describe, expect, it } from 'vitest';
import { classifyLink, linkPaths, sameSubnet } from '../../src/links/paths.js';
import { measurePeer, pathSignature } from '../../src/links/measurer.js';
import { profile } from '../state/fixtures.js';

const rdmaDev = (iface: string, active = true, ipv4Gid = true) => ({ name: `rdma_${iface}`, interface: iface, portState: active ? 'PORT_ACTIVE' : 'PORT_DOWN', active, ipv4Gid });

describe('link paths', () => {
  it('subnet matching', () => {
    expect(sameSubnet('10.0.0.1/24', '10.0.0.2/24')).toBe(true);
    expect(sameSubnet('10.0.0.1/24', '10.0.1.2/24')).toBe(false);
    expect(sameSubnet('10.0.0.1/24', '10.0.0.1/24')).toBe(false);
    expect(sameSubnet('169.254.3.1/16', '169.254.200.9/16')).toBe(true);
    expect(sameSubnet('fe80::1/64', '10.0.0.1/24')).toBe(false);
  });

  it('kinds: Wi-Fi anywhere is Wi-Fi; Thunderbolt needs both ends', () => {
    expect(classifyLink('thunderbolt', 'thunderbolt')).toBe('thunderbolt');
    expect(classifyLink('thunderbolt', 'ethernet')).toBe('ethernet');
    expect(classifyLink('ethernet', 'wifi')).toBe('wifi');
  });

  it('one path per shared subnet, RDMA only when both ends have an active port with an IPv4 GID', () => {
    const a = profile('A', 'a', {
      interfaces: [
        { name: 'en0', kind: 'ethernet', ipv4: ['192.168.1.10/24'], ipv6: [] },
        { name: 'en1', kind: 'wifi', ipv4: ['192.168.2.10/24'], ipv6: [] },
        { name: 'en2', kind: 'thunderbolt', ipv4: ['169.254.10.1/16'], ipv6: [] },
        { name: 'lo0', kind: 'loopback', ipv4: ['127.0.0.1/8'], ipv6: [] },
      ],
      rdma: { enabled: true, devices: [rdmaDev('en2')] },
    });
    const b = profile('B', 'b', {
      interfaces: [
        { name: 'en0', kind: 'ethernet', ipv4: ['192.168.1.20/24'], ipv6: [] },
        { name: 'en5', kind: 'thunderbolt', ipv4: ['169.254.20.2/16'], ipv6: [] },
        { name: 'lo0', kind: 'loopback', ipv4: ['127.0.0.1/8'], ipv6: [] },
      ],
      rdma: { enabled: true, devices: [rdmaDev('en5')] },
    });
    const paths = linkPaths(a, b);
    expect(paths.map((p) => [p.localInterface, p.remoteAddress, p.kind, p.rdmaCapable])).toEqual([
      ['en0', '192.168.1.20', 'ethernet', false],
      ['en2', '169.254.20.2', 'thunderbolt', true],
    ]);
    const noGid = { ...b, rdma: { enabled: true, devices: [rdmaDev('en5', true, false)] } };
    expect(linkPaths(a, noGid).find((p) => p.kind === 'thunderbolt')?.rdmaCapable).toBe(false);
    const disabled = { ...b, rdma: { enabled: false, devices: [rdmaDev('en5')] } };
    expect(linkPaths(a, disabled).find((p) => p.kind === 'thunderbolt')?.rdmaCapable).toBe(false);
    // The transport says RDMA is unusable there (e.g. the addon is not built): not an RDMA link either.
    const noAddon = { ...b, rdma: { enabled: true, devices: [rdmaDev('en5')], available: false, summary: 'RDMA unavailable: RDMA addon not built; links use TCP' } };
    expect(linkPaths(a, noAddon).find((p) => p.kind === 'thunderbolt')?.rdmaCapable).toBe(false);
  });

  it('re-measure trigger: the signature changes when addresses or the probe port change, not otherwise', () => {
    const a = profile('A');
    const b = profile('B', 'b', { interfaces: [{ name: 'eth0', kind: 'ethernet', ipv4: ['10.0.0.2/24'], ipv6: [] }] });
    const sig = pathSignature(a, b);
    expect(pathSignature(a, { ...b, memory: { totalBytes: 1, availableBytes: 1 }, updatedAt: 99 })).toBe(sig);
    expect(pathSignature(a, { ...b, probePort: 4001 })).not.toBe(sig);
    expect(pathSignature(a, { ...b, interfaces: [{ name: 'eth0', kind: 'ethernet', ipv4: ['10.0.0.3/24'], ipv6: [] }] })).not.toBe(sig);
  });

  it('measurePeer reports measurements as rdma kind when capable, and failures by address', async () => {
    const a = profile('A', 'a', { interfaces: [{ name: 'eth0', kind: 'ethernet', ipv4: ['10.0.0.1/24'], ipv6: [] }, { name: 'eth1', kind: 'ethernet', ipv4: ['10.1.0.1/24'], ipv6: [] }] });
    const b = profile('B', 'b', { interfaces: [{ name: 'eth0', kind: 'ethernet', ipv4: ['10.0.0.2/24'], ipv6: [] }, { name: 'eth1', kind: 'ethernet', ipv4: ['10.1.0.2/24'], ipv6: [] }] });
    const r = await measurePeer(a, b, async (path) => {
      if (path.remoteAddress === '10.1.0.2') throw new Error('connect ECONNREFUSED');
      return { latencyUs: 42, bandwidthGbps: 9 };
    });
    expect(r.measurements).toHaveLength(1);
    expect(r.measurements[0]).toMatchObject({ a: 'A', b: 'B', kind: 'ethernet', latencyUs: 42, bandwidthGbps: 9, measuredBy: 'A', address: '10.0.0.2' });
    expect(r.failures).toEqual([{ peerId: 'B', address: '10.1.0.2', error: 'connect ECONNREFUSED' }]);
  });
});
