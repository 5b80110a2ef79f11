/**
 * The runners' data plane between two hosts on an Ethernet bridge (network namespaces): encrypted by
 * default, plain when the interface is a direct cable, and `never` on both ends plain. Each rank runs
 * in its own process inside its host (plane-rank.ts), as runners do. Skips when not root.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../harness/daemons.js';
import { createTestNet, netnsAvailable, type TestNet } from '../harness/netns.js';

let net: TestNet | undefined;

async function plane(encryption: 'auto' | 'never', direct: boolean): Promise<{ links: any[]; summary: string; sum: number[] }[]> {
  const hosts = net!.hosts;
  const peers = hosts.map((h) => ({ addresses: [{ host: h.ip, port: 7461 }] }));
  const runs = hosts.map(
    (h, rank) =>
      new Promise<any>((resolve, reject) => {
        // The bridge's /24 is each host's "Thunderbolt" subnet when `direct`.
        const arg = JSON.stringify({ peers, encryption, directCidrs: direct ? [`${h.ip}/24`] : [] });
        const child = h.spawn(process.execPath, ['--import', 'tsx', 'test/serve/plane-rank.ts', String(rank), arg], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        child.stdout!.on('data', (d) => (out += d));
        child.stderr!.on('data', (d) => (err += d));
        const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
        child.on('exit', (code) => {
          clearTimeout(timer);
          if (code === 0) resolve(JSON.parse(out.trim().split('\n').pop()!));
          else reject(new Error(`rank ${rank} exited ${code}: ${err.slice(-1500)}`));
        });
      }),
  );
  return Promise.all(runs);
}

describe.skipIf(!netnsAvailable())('data-plane encryption between hosts', () => {
  beforeAll(async () => {
    net = await createTestNet({ hosts: 2, multicast: false });
  });
  afterAll(async () => {
    await net?.destroy();
  });

  it('Ethernet (a bridge): encrypted by default, with the same cipher at both ends, and the sums right', async () => {
    const r = await plane('auto', false);
    const cipher = r[0].links[0].encryption;
    expect(['aes-256-gcm', 'chacha20-poly1305']).toContain(cipher);
    expect(r[1].links[0].encryption).toBe(cipher);
    for (const x of r) {
      expect(x.summary).toContain(`TCP encrypted (${cipher})`);
      expect(x.sum).toEqual([1, 3, 2 * (299_999 % 7) + 1]);
    }
  }, 120_000);

  it('a direct cable (the interface is a Thunderbolt one) stays plain; so does never on both ends', async () => {
    for (const [encryption, direct] of [['auto', true], ['never', false]] as const) {
      const r = await plane(encryption, direct);
      for (const x of r) {
        expect(x.links[0].encryption, `${encryption} direct=${direct}`).toBeNull();
        expect(x.summary).toContain('TCP unencrypted');
      }
    }
  }, 120_000);
});
