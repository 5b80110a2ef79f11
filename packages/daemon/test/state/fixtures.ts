import type { LinkMeasurement } from '../../src/links/types.js';
import type { NodeProfile } from '../../src/profile/types.js';

export function profile(peerId: string, name = peerId, over: Partial<NodeProfile> = {}): NodeProfile {
  return {
    peerId,
    name,
    hostname: `${name}.local`,
    os: { platform: 'linux', release: '6.1', arch: 'x64' },
    chip: 'Test CPU',
    cpu: { cores: 4, performanceCores: null, efficiencyCores: null },
    gpuCores: null,
    memory: { totalBytes: 16 * 2 ** 30, availableBytes: 12 * 2 ** 30 },
    diskFreeBytes: 100 * 2 ** 30,
    interfaces: [{ name: 'eth0', kind: 'ethernet', ipv4: ['10.0.0.1/24'], ipv6: [] }],
    thunderbolt: [],
    rdma: { enabled: null, devices: [] },
    capability: { memoryBandwidthGBps: 10, matmulGflops: 5, method: 'test', measuredAt: 1 },
    probePort: 4000,
    updatedAt: 1,
    ...over,
  };
}

export function link(a: string, b: string, over: Partial<LinkMeasurement> = {}): LinkMeasurement {
  return {
    a,
    b,
    kind: 'ethernet',
    aInterface: 'eth0',
    bInterface: 'eth0',
    address: '10.0.0.2',
    rdmaCapable: false,
    latencyUs: 100,
    bandwidthGbps: 1,
    measuredAt: 1,
    measuredBy: a,
    ...over,
  };
}
