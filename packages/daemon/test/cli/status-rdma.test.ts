import { describe, expect, it } from 'vitest';
import { formatStatus, type StatusJson } from '../../src/cli/format-status.js';
import { profile } from '../state/fixtures.js';

describe('orchard status: RDMA readiness and each link of the data plane', () => {
  it('shows each node\'s RDMA line and, per instance, RDMA with the devices or TCP with the reason', () => {
    const alpha = profile('A', 'alpha');
    alpha.rdma = { enabled: true, devices: [], available: true, summary: 'RDMA ready on rdma_en2 (en2), rdma_en3 (en3)' };
    const beta = profile('B', 'beta');
    beta.rdma = { enabled: null, devices: [], available: false, summary: 'RDMA unavailable: no RDMA devices; links use TCP' };
    const s: StatusJson = {
      self: { peerId: 'A', name: 'alpha' },
      mode: 'open',
      clusterKeyId: null,
      coordinator: 'A',
      nodes: [
        { peerId: 'A', name: 'alpha', status: 'live', joinedAt: 1, leftAt: null, leftReason: null, profile: alpha },
        { peerId: 'B', name: 'beta', status: 'live', joinedAt: 1, leftAt: null, leftReason: null, profile: beta },
      ],
      links: [],
      notInCluster: [],
      unreachable: [],
      duplicateIdentity: null,
      dataPlane: [
        {
          instance: 'm-1',
          model: 'org/m',
          ranks: 3,
          links: [
            { rank: 0, peer: 1, transport: 'rdma', reason: 'rdma_en2' },
            { rank: 0, peer: 2, transport: 'tcp', reason: 'RTR/RTS on rdma_en3 failed: EINVAL' },
            { rank: 1, peer: 0, transport: 'rdma', reason: 'rdma_en4' },
            { rank: 2, peer: 0, transport: 'tcp', reason: 'rank 0 could not finish RDMA setup: RTR/RTS on rdma_en3 failed: EINVAL' },
          ],
        },
        { instance: 'm-2', model: 'org/m', ranks: 2, links: [] },
        {
          instance: 'm-3',
          model: 'org/m',
          ranks: 3,
          links: [
            { rank: 0, peer: 1, transport: 'tcp', reason: 'RDMA unavailable: none', encryption: 'aes-256-gcm' },
            { rank: 1, peer: 0, transport: 'tcp', reason: 'RDMA unavailable: none', encryption: 'aes-256-gcm' },
            { rank: 0, peer: 2, transport: 'tcp', reason: 'RDMA unavailable: none', encryption: null },
          ],
        },
      ],
    };
    const text = formatStatus(s);
    expect(text).toContain('      RDMA ready on rdma_en2 (en2), rdma_en3 (en3)\n');
    expect(text).toContain('      RDMA unavailable: no RDMA devices; links use TCP\n');
    expect(text).toContain(
      [
        'data plane (per instance, rank <-> rank):',
        '  m-1 (org/m, 3 ranks)',
        '    0 <-> 1  RDMA (rank 0 on rdma_en2, rank 1 on rdma_en4)',
        '    0 <-> 2  TCP (RTR/RTS on rdma_en3 failed: EINVAL; rank 0 could not finish RDMA setup: RTR/RTS on rdma_en3 failed: EINVAL)',
        '  m-2 (org/m, 2 ranks)',
        '    links not reported yet (runners still starting)',
        '  m-3 (org/m, 3 ranks)',
        '    0 <-> 1  TCP (RDMA unavailable: none), encrypted (aes-256-gcm)',
        '    0 <-> 2  TCP (RDMA unavailable: none), unencrypted',
      ].join('\n'),
    );
  });

  it('an older daemon (no RDMA summary, no data plane) prints as before', () => {
    const s: StatusJson = {
      self: { peerId: 'A', name: 'alpha' },
      mode: 'open',
      clusterKeyId: null,
      coordinator: 'A',
      nodes: [{ peerId: 'A', name: 'alpha', status: 'live', joinedAt: 1, leftAt: null, leftReason: null, profile: profile('A', 'alpha') }],
      links: [],
      notInCluster: [],
      unreachable: [],
      duplicateIdentity: null,
    };
    expect(formatStatus(s)).not.toMatch(/RDMA|data plane/);
  });
});
