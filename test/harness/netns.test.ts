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
    // A real TCP exchange between the namespaces (no ping: iputils is not on every image).
    const server = b.spawn(process.execPath, ['-e', "require('net').createServer((s) => s.end('hello from b')).listen(7000, '0.0.0.0')"]);
    const connect = (timeoutMs: number) =>
      a.exec(process.execPath, [
        '-e',
        `const s = require('net').connect(7000, '${b.ip}'); let d = ''; s.on('data', (c) => (d += c)); s.on('end', () => { console.log(d); process.exit(0); }); s.on('error', () => process.exit(2)); setTimeout(() => process.exit(3), ${timeoutMs});`,
      ]);
    let reply = '';
    for (let i = 0; i < 50 && !reply.includes('hello'); i++) {
      try {
        reply = connect(2000);
      } catch {
        await new Promise((r) => setTimeout(r, 100)); // server still starting
      }
    }
    expect(reply).toContain('hello from b');

    net.setLink(1, false);
    expect(() => connect(1000)).toThrow();
    net.setLink(1, true);
    server.kill();

    const names = [a.ns, b.ns];
    await net.destroy();
    const { execFileSync } = await import('node:child_process');
    const list = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
    for (const n of names) expect(list).not.toContain(n);
  });
});
