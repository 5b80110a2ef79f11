/**
 * Which data-plane connections a runner wants encrypted: every one that leaves the machine except
 * a direct cable, from the addresses of the connection's two ends; `always`/`never` override; and
 * a real pair of data planes reports what it chose.
 */
import { describe, expect, it } from 'vitest';
import { createDataPlane } from '../../src/runner/data-plane.js';
import { directCidrsOf, directLinkReason, encryptionPolicy, type DataPlaneSecurity } from '../../src/runner/link-security.js';
import { listenTcp } from '../../src/runner/transport.js';
import type { NetInterface } from '../../src/profile/types.js';

const tb: NetInterface = { name: 'en2', kind: 'thunderbolt', ipv4: ['10.10.0.1/30', '169.254.3.4/16'], ipv6: [] };
const eth: NetInterface = { name: 'en0', kind: 'ethernet', ipv4: ['192.168.1.10/24'], ipv6: [] };
const wifi: NetInterface = { name: 'en1', kind: 'wifi', ipv4: ['192.168.5.10/24'], ipv6: [] };

const ends = (localAddress: string, remoteAddress: string) => ({ peer: 1, localAddress, remoteAddress });

describe('data-plane link security', () => {
  const cidrs = directCidrsOf([tb, eth, wifi]);

  it('direct cables are the Thunderbolt interfaces’ subnets', () => {
    expect(cidrs).toEqual(['10.10.0.1/30', '169.254.3.4/16']);
    expect(directCidrsOf(undefined)).toEqual([]);
  });

  it('plain only across a direct cable or inside this machine', () => {
    expect(directLinkReason('10.10.0.1', '10.10.0.2', cidrs)).toBe('direct cable (10.10.0.1/30)');
    expect(directLinkReason('::ffff:169.254.3.4', '::ffff:169.254.9.9', cidrs)).toBe('direct cable (169.254.3.4/16)');
    expect(directLinkReason('127.0.0.1', '127.0.0.1', cidrs)).toBe('same machine');
    expect(directLinkReason('192.168.1.10', '192.168.1.10', cidrs)).toBe('same machine');
    // Ethernet, Wi-Fi, and a Thunderbolt address reaching a peer that is not at the cable's other end (routed).
    expect(directLinkReason('192.168.1.10', '192.168.1.11', cidrs)).toBeNull();
    expect(directLinkReason('192.168.5.10', '192.168.5.77', cidrs)).toBeNull();
    expect(directLinkReason('10.10.0.1', '10.20.0.2', cidrs)).toBeNull();
    // The peer on the cable's subnet but reached from the Ethernet address: not the cable.
    expect(directLinkReason('192.168.1.10', '10.10.0.2', cidrs)).toBeNull();
    // A host name is not loopback however it starts.
    expect(directLinkReason('127.example.com', '10.0.0.1', cidrs)).toBeNull();
  });

  it('auto asks for encryption off the cable; always and never override', () => {
    const policy = (encryption: DataPlaneSecurity['encryption']) => encryptionPolicy({ encryption, cipher: 'auto', directCidrs: cidrs });
    expect(policy('auto').wants(ends('192.168.1.10', '192.168.1.11'))).toBe(true);
    expect(policy('auto').wants(ends('10.10.0.1', '10.10.0.2'))).toBe(false);
    expect(policy('always').wants(ends('10.10.0.1', '10.10.0.2'))).toBe(true);
    expect(policy('never').wants(ends('192.168.1.10', '192.168.1.11'))).toBe(false);
    expect(encryptionPolicy({ encryption: 'auto', cipher: 'chacha20-poly1305', directCidrs: [] }).cipher).toBe('chacha20-poly1305');
  });

  async function pair(security: (rank: number) => DataPlaneSecurity | undefined) {
    const listeners = await Promise.all([0, 1].map(() => listenTcp({ host: '127.0.0.1' })));
    const peers = listeners.map((l) => ({ addresses: [l.address] }));
    const none = { verbs: null, reason: 'test', deviceFor: () => undefined, noDeviceReason: () => undefined, close: async () => {} };
    return Promise.all(
      listeners.map((listener, rank) =>
        createDataPlane({ rank, peers, groupId: 'sec', secret: Buffer.from('k'), listener, connectTimeoutMs: 5000, rdma: none, security: security(rank) }),
      ),
    );
  }

  it('a data plane reports each TCP link’s protection: plain inside the machine by default, encrypted when either end says always', async () => {
    let planes = await pair(() => undefined);
    expect(planes.map((p) => p.links.map((l) => l.encryption))).toEqual([[null], [null]]);
    expect(planes[0].summary).toMatch(/TCP unencrypted$/);
    await Promise.all(planes.map((p) => p.group.close()));

    planes = await pair((rank) => (rank === 0 ? { encryption: 'always', cipher: 'chacha20-poly1305', directCidrs: [] } : undefined));
    // Rank 1 dials rank 0 and proposes its own (auto) cipher; rank 0 asked for encryption.
    const cipher = planes[1].links[0].encryption;
    expect(['aes-256-gcm', 'chacha20-poly1305']).toContain(cipher);
    expect(planes[0].links[0].encryption).toBe(cipher);
    expect(planes[0].summary).toContain(`TCP encrypted (${cipher})`);
    const x = Float32Array.of(1, 2, 3);
    const y = Float32Array.of(10, 20, 30);
    await Promise.all([planes[0].group.allReduce(x), planes[1].group.allReduce(y)]);
    expect([...x]).toEqual([11, 22, 33]);
    await Promise.all(planes.map((p) => p.group.close()));
  });
});
