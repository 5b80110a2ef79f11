import { afterAll, describe, expect, it } from 'vitest';
import { createTestNet, netnsAvailable, type TestNet } from './netns.js';

describe.skipIf(!netnsAvailable())('network namespace harness', () => {
  let net: TestNet | undefined;
  afterAll(async () => net?.destroy());

  it('gives each host its own address, reachable from the others, and removes everything', async () => {
    net = await createTestNet({ hosts: 2 });
    const [a, b] = net.hosts;
    expect(a.ip).not.toBe(b.ip);
    expect(a.exec('ip', ['-4', 'addr', 'show', 'eth0'])).toContain(a.ip);
    const ping = a.exec('ping', ['-c', '1', '-W', '2', b.ip]);
    expect(ping).toMatch(/1 received/);

    net.setLink(1, false);
    expect(() => a.exec('ping', ['-c', '1', '-W', '1', b.ip])).toThrow();
    net.setLink(1, true);

    const names = [a.ns, b.ns];
    await net.destroy();
    const { execFileSync } = await import('node:child_process');
    const list = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
    for (const n of names) expect(list).not.toContain(n);
  });
});
