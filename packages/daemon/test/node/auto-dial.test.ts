/**
 * The auto-dialer tries a refused peer again on its own: discovery reports a known peer once, so a
 * first dial that timed out on a busy machine would otherwise keep two pod members apart for good.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { AutoDialer } from '../../src/node/discovery.js';
import type { OrchardNode } from '../../src/node/create-node.js';

function fakeNode(failures: number) {
  const listeners = new Map<string, (evt: CustomEvent) => void>();
  let dials = 0;
  const node = {
    peerId: { toString: () => 'self' },
    addEventListener: (name: string, fn: (evt: CustomEvent) => void) => listeners.set(name, fn),
    removeEventListener: (name: string) => listeners.delete(name),
    getConnections: () => [],
    dial: async () => {
      dials++;
      if (dials <= failures) throw new Error('The operation was aborted due to timeout');
      listeners.get('peer:connect')?.(new CustomEvent('peer:connect', { detail: { toString: () => 'peer-b' } }));
    },
  };
  return { node: node as unknown as OrchardNode, dials: () => dials, discover: (detail: unknown) => listeners.get('peer:discovery')?.(new CustomEvent('peer:discovery', { detail })) };
}

describe('auto-dialer', () => {
  it('dials a refused peer again without a new discovery event, until it connects', async () => {
    const f = fakeNode(2);
    const dialer = new AutoDialer(f.node, pino({ level: 'silent' }), { privatePod: false, retryMs: 60 });
    f.discover({ id: { toString: () => 'peer-b' }, multiaddrs: [{ toString: () => '/ip4/10.0.0.2/tcp/52416/p2p/peer-b' }] });
    await new Promise((r) => setTimeout(r, 20));
    expect(f.dials()).toBe(1);
    expect(dialer.refused().map((r) => r.peerId)).toEqual(['peer-b']);
    await new Promise((r) => setTimeout(r, 400));
    expect(f.dials()).toBe(3);
    expect(dialer.refused()).toEqual([]);
    // Connected: no more dials.
    await new Promise((r) => setTimeout(r, 200));
    expect(f.dials()).toBe(3);
    dialer.stop();
  });
});
