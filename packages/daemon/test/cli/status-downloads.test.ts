import { describe, expect, it } from 'vitest';
import { formatStatus, type StatusJson } from '../../src/cli/format-status.js';
import { profile } from '../state/fixtures.js';

describe('orchard status: downloads by source', () => {
  it('shows each node\'s download with bytes from the hub and each peer, link rates and dropped peers', () => {
    const s: StatusJson = {
      self: { peerId: 'A', name: 'alpha' },
      mode: 'open',
      clusterKeyId: null,
      coordinator: 'A',
      nodes: [
        { peerId: 'A', name: 'alpha', status: 'live', joinedAt: 1, leftAt: null, leftReason: null, profile: profile('A', 'alpha') },
        { peerId: 'B', name: 'beta', status: 'live', joinedAt: 1, leftAt: null, leftReason: null, profile: profile('B', 'beta') },
      ],
      links: [],
      notInCluster: [],
      unreachable: [],
      duplicateIdentity: null,
      downloads: [
        {
          node: 'B',
          model: 'org/m',
          phase: 'download',
          done: 60e6,
          total: 120e6,
          sources: { hub: 10e6, A: 50e6, C: 0 },
          links: [
            { source: 'A', link: '10.10.0.1:40001', bytes: 30e6, rate: 950e6, encryption: null },
            { source: 'A', link: '10.10.1.1:40001', bytes: 20e6, rate: 610e6, encryption: 'aes-256-gcm' },
            { source: 'hub', link: 'hub', bytes: 10e6, rate: 12e6 },
          ],
          badPeers: ['C'],
          at: 1,
        },
        { node: 'A', model: 'org/m', phase: 'load', done: 120e6, total: 120e6, sources: { hub: 120e6 }, at: 1 },
      ],
    };
    const text = formatStatus(s);
    expect(text).toContain('downloads (per node, bytes by source):\n');
    expect(text).toContain('  beta  org/m  downloading 50% of 120.0 MB: hub 10.0 MB, alpha 50.0 MB\n');
    expect(text).toContain('      links: alpha 10.10.0.1:40001 950.0 MB/s unencrypted, alpha 10.10.1.1:40001 610.0 MB/s encrypted (aes-256-gcm), hub 12.0 MB/s\n');
    expect(text).toContain('      dropped C: it served bytes that do not match the pod digest\n');
    expect(text).toContain('  alpha  org/m  loading weights (120.0 MB): hub 120.0 MB\n');
  });
});
