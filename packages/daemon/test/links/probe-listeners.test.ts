/**
 * The link-probe port in a private pod: open only on the addresses pod members reach this node by
 * (and 127.0.0.1, which holds the port), serving only holders of the pod's secret; in an open pod,
 * every address as before. 127.0.0.2 stands in for a LAN address here (Linux routes 127/8 to lo).
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { probeLink } from '@orchard/transport';
import { ProbeListeners, podFacingAddresses } from '../../src/links/probe-listeners.js';
import { profile } from '../state/fixtures.js';

/** Whether a TCP connection to host:port is accepted. */
function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

const probe = (host: string, port: number, secret: string) => probeLink({ host, port, secret, pings: 3, bulkBytes: 64 * 1024, timeoutMs: 5000 });

describe('link-probe listeners', () => {
  it('pod-facing addresses: this node’s addresses on a subnet a live member is on, and no others', () => {
    const self = profile('A', 'a', {
      interfaces: [
        { name: 'eth0', kind: 'ethernet', ipv4: ['192.168.1.10/24'], ipv6: [] },
        { name: 'wlan0', kind: 'wifi', ipv4: ['10.77.0.5/16'], ipv6: [] },
        { name: 'en2', kind: 'thunderbolt', ipv4: ['10.10.0.1/30'], ipv6: [] },
        { name: 'lo', kind: 'loopback', ipv4: ['127.0.0.1/8'], ipv6: [] },
      ],
    });
    const b = profile('B', 'b', {
      interfaces: [
        { name: 'eth0', kind: 'ethernet', ipv4: ['192.168.1.20/24'], ipv6: [] },
        { name: 'en3', kind: 'thunderbolt', ipv4: ['10.10.0.2/30'], ipv6: [] },
      ],
    });
    const c = profile('C', 'c', { interfaces: [{ name: 'eth0', kind: 'ethernet', ipv4: ['172.16.0.9/24'], ipv6: [] }] });
    expect(podFacingAddresses(self, [self, b, c])).toEqual(['10.10.0.1', '192.168.1.10']);
    expect(podFacingAddresses(self, [self])).toEqual([]);
  });

  it('private pod: closed off the pod’s networks, opened and closed as members come and go, only for the pod’s secret', async () => {
    const l = await ProbeListeners.start({ port: 0, secret: 'pod-secret', maxBulkBytes: 1 << 20, podOnly: true });
    try {
      expect(l.addresses).toEqual(['127.0.0.1']);
      expect(await reachable('127.0.0.2', l.port)).toBe(false);
      await l.update(['127.0.0.2']);
      expect(l.addresses).toEqual(['127.0.0.1', '127.0.0.2']);
      expect((await probe('127.0.0.2', l.port, 'pod-secret')).bandwidthGbps).toBeGreaterThan(0);
      await expect(probe('127.0.0.2', l.port, 'not-the-pod')).rejects.toThrow(/prove|secret|closed/i);
      await l.update([]);
      expect(l.addresses).toEqual(['127.0.0.1']);
      expect(await reachable('127.0.0.2', l.port)).toBe(false);
    } finally {
      await l.close();
    }
  });

  it('an address that cannot be bound is reported and the others still open', async () => {
    const errors: string[] = [];
    const l = await ProbeListeners.start({ port: 0, secret: 's', maxBulkBytes: 1 << 20, podOnly: true, onBindError: (a) => errors.push(a) });
    try {
      await l.update(['192.0.2.1', '127.0.0.3']); // TEST-NET-1: not an address of this machine
      expect(errors).toEqual(['192.0.2.1']);
      expect(l.addresses).toEqual(['127.0.0.1', '127.0.0.3']);
    } finally {
      await l.close();
    }
  });

  it('open pod: every address, as before', async () => {
    const l = await ProbeListeners.start({ port: 0, secret: '', maxBulkBytes: 1 << 20, podOnly: false });
    try {
      expect(l.addresses).toEqual(['0.0.0.0']);
      expect(await reachable('127.0.0.2', l.port)).toBe(true);
      await l.update([]);
      expect(await reachable('127.0.0.2', l.port)).toBe(true);
    } finally {
      await l.close();
    }
  });
});
