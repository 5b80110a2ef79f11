import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.js';
import { formatStatus, type StatusJson } from '../../src/cli/format-status.js';
import { profile, link } from '../state/fixtures.js';

async function run(args: string[]) {
  let out = '';
  let err = '';
  const o = vi.spyOn(process.stdout, 'write').mockImplementation((s) => ((out += String(s)), true));
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((s) => ((err += String(s)), true));
  try {
    const code = await main(args);
    return { code, out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

describe('orchard CLI (control plane commands)', () => {
  it('key new writes a key once and refuses to overwrite without --force', async () => {
    const file = join(mkdtempSync(join(os.tmpdir(), 'orchard-cli-')), 'pod.key');
    const r = await run(['key', 'new', file]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/wrote cluster key .*pod\.key \(id [0-9a-f]{12}\)/);
    expect(readFileSync(file, 'utf8')).toMatch(/^\/key\/swarm\/psk\/1\.0\.0\//);
    const again = await run(['key', 'new', file]);
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/already exists/);
    expect((await run(['key', 'new', file, '--force'])).code).toBe(0);
  });

  it('status and cluster say clearly when no daemon answers', async () => {
    const r = await run(['status', '--url', 'http://127.0.0.1:1']);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/^orchard: cannot reach the daemon at http:\/\/127\.0\.0\.1:1 .*orchard start/);
    const c = await run(['cluster', '--json', '--url', 'not a url']);
    expect(c.code).toBe(2);
    expect(c.err).toMatch(/--url not a url is not a URL/);
  });

  it('start refuses a public API without a token, before starting anything', async () => {
    const r = await run(['start', '--data-dir', mkdtempSync(join(os.tmpdir(), 'orchard-cli-')), '--api-host', '0.0.0.0']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--api-token/);
  });

  it('start says in one line when its address is taken', async () => {
    const net = await import('node:net');
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as { port: number }).port;
    try {
      const r = await run(['start', '--data-dir', mkdtempSync(join(os.tmpdir(), 'orchard-cli-')), '--listen', `/ip4/127.0.0.1/tcp/${port}`, '--api-port', '0', '--no-mdns']);
      expect(r.code).toBe(1);
      expect(r.err).toBe(`orchard: address 127.0.0.1:${port} already in use; is another orchard daemon running? Pick others with --listen and --api-port\n`);
    } finally {
      blocker.close();
    }
  });

  it('status text shows mode, nodes, links and refusals', () => {
    const s: StatusJson = {
      self: { peerId: 'A', name: 'alpha' },
      mode: 'private',
      clusterKeyId: 'abcdef012345',
      coordinator: 'A',
      nodes: [
        { peerId: 'A', name: 'alpha', status: 'live', joinedAt: 1, leftAt: null, leftReason: null, profile: profile('A', 'alpha') },
        { peerId: 'B', name: 'beta', status: 'gone', joinedAt: 1, leftAt: 2, leftReason: 'silent', profile: null },
      ],
      links: [link('A', 'B', { latencyUs: 123.4, bandwidthGbps: 9.87 })],
      notInCluster: [{ peerId: 'Z', message: 'peer Z is not in this cluster (it has no cluster key or a different one)' }],
      unreachable: [],
      duplicateIdentity: null,
      thunderboltCables: [{ bus: 'thunderboltusb4_bus_0', peerId: 'B', peerBus: 'thunderboltusb4_bus_1', speedGbps: 80 }],
    };
    const text = formatStatus(s);
    expect(text).toMatch(/thunderboltusb4_bus_0 -> beta \(thunderboltusb4_bus_1\), 80 Gb\/s/);
    expect(text).toMatch(/pod: private \(cluster key abcdef012345\), 1 node/);
    expect(text).toMatch(/● alpha A \[this node, coordinator\]/);
    expect(text).toMatch(/○ beta B gone \(silent\)/);
    expect(text).toMatch(/alpha <-> beta {2}ethernet via eth0->10\.0\.0\.2 {2}123 us {2}9\.87 Gbit\/s/);
    expect(text).toMatch(/peer Z is not in this cluster/);
  });
});
