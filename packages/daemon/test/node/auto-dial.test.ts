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

/** A node that was connected to `peer-b`: connections come and go as the test says; dials fail while `reachable` is false. */
function memberNode(selfId = 'a-self') {
  const listeners = new Map<string, (evt: CustomEvent) => void>();
  const mdnsListeners = new Map<string, (evt: CustomEvent) => void>();
  const peer = { toString: () => 'peer-b' };
  let conns = 0;
  let reachable = true;
  const dials: { at: number; target: string }[] = [];
  const connect = () => {
    conns = 1;
    listeners.get('peer:connect')?.(new CustomEvent('peer:connect', { detail: peer }));
  };
  const node = {
    peerId: { toString: () => selfId },
    services: { mdns: { addEventListener: (n: string, fn: (evt: CustomEvent) => void) => mdnsListeners.set(n, fn), removeEventListener: (n: string) => mdnsListeners.delete(n) } },
    addEventListener: (name: string, fn: (evt: CustomEvent) => void) => listeners.set(name, fn),
    removeEventListener: (name: string) => listeners.delete(name),
    getConnections: () => Array.from({ length: conns }, () => ({})),
    dial: async (target: unknown, o: { signal: AbortSignal }) => {
      dials.push({ at: Date.now(), target: String(Array.isArray(target) ? target[0] : target) });
      if (!reachable) {
        // A partition: the dial hangs until its own timeout.
        await new Promise((_, reject) => o.signal.addEventListener('abort', () => reject(o.signal.reason)));
      }
      connect();
    },
  };
  return {
    node: node as unknown as OrchardNode,
    dials,
    connect,
    drop: () => {
      conns = 0;
      listeners.get('peer:disconnect')?.(new CustomEvent('peer:disconnect', { detail: peer }));
    },
    setReachable: (r: boolean) => (reachable = r),
    mdnsAnswer: () => mdnsListeners.get('peer')?.(new CustomEvent('peer', { detail: { id: peer, multiaddrs: [{ toString: () => '/ip4/10.0.0.2/tcp/52416/p2p/peer-b' }] } })),
  };
}

describe('auto-dialer: pod members whose connection dropped', () => {
  it('re-dials a dropped member with backoff through a partition (each dial bounded), reports it unreachable, and reconnects when it heals', async () => {
    const f = memberNode();
    const dialer = new AutoDialer(f.node, pino({ level: 'silent' }), { privatePod: false, timeoutMs: 60, redial: { baseMs: 40, maxMs: 160, jitter: 0 } });
    f.connect(); // a member now
    f.setReachable(false);
    f.drop();
    expect(dialer.refused().map((r) => [r.peerId, r.reason])).toEqual([['peer-b', 'unreachable']]);
    await new Promise((r) => setTimeout(r, 700));
    const during = f.dials.length;
    // 40, then 80, 160, 160... each after the previous 60 ms timeout: 3 to 5 dials in 700 ms, not a tight loop.
    expect(during).toBeGreaterThanOrEqual(3);
    expect(during).toBeLessThanOrEqual(6);
    const gaps = f.dials.slice(1).map((d, i) => d.at - f.dials[i].at);
    expect(gaps[gaps.length - 1]).toBeGreaterThanOrEqual(gaps[0]);
    const report = dialer.refused()[0];
    expect(report.since).toBeLessThanOrEqual(Date.now() - 600);
    expect(report.attempts).toBeGreaterThanOrEqual(2);
    expect(report.message).toMatch(/peer peer-b is unreachable: its connection dropped \d+ s ago; dialling it again \(\d+ failed dials/);
    f.setReachable(true);
    await new Promise((r) => setTimeout(r, 400));
    expect(dialer.refused()).toEqual([]);
    const after = f.dials.length;
    await new Promise((r) => setTimeout(r, 300));
    expect(f.dials.length).toBe(after); // connected: no more dials
    dialer.stop();
  });

  it('an mDNS answer for a lost member makes its dial due at once instead of after the backoff', async () => {
    const f = memberNode();
    const dialer = new AutoDialer(f.node, pino({ level: 'silent' }), { privatePod: false, timeoutMs: 1000, redial: { baseMs: 5000, maxMs: 5000, jitter: 0 } });
    f.connect();
    f.drop();
    await new Promise((r) => setTimeout(r, 100));
    expect(f.dials).toHaveLength(0); // backing off for 5 s
    f.mdnsAnswer();
    await new Promise((r) => setTimeout(r, 50));
    expect(f.dials).toHaveLength(1);
    expect(f.dials[0].target).toBe('/ip4/10.0.0.2/tcp/52416/p2p/peer-b'); // the address mDNS just gave
    expect(dialer.refused()).toEqual([]);
    dialer.stop();
  });

  it('the end with the larger peer id lets the other dial first (one connection, not two crossing ones)', async () => {
    const f = memberNode('z-self');
    const dialer = new AutoDialer(f.node, pino({ level: 'silent' }), { privatePod: false, timeoutMs: 1000, redial: { baseMs: 5000, maxMs: 5000, jitter: 0 } });
    f.connect();
    f.drop();
    f.mdnsAnswer();
    await new Promise((r) => setTimeout(r, 100));
    expect(f.dials).toHaveLength(0);
    // Due 0.7 s later; a loaded machine's timers run late, so wait for it, bounded.
    for (let t = Date.now(); f.dials.length === 0 && Date.now() - t < 5000; ) await new Promise((r) => setTimeout(r, 50));
    expect(f.dials).toHaveLength(1);
    dialer.stop();
  });

  it('a peer never connected is not re-dialled when it disconnects (only members are)', async () => {
    const f = memberNode();
    const dialer = new AutoDialer(f.node, pino({ level: 'silent' }), { privatePod: false, redial: { baseMs: 20, maxMs: 20, jitter: 0 } });
    f.drop();
    await new Promise((r) => setTimeout(r, 100));
    expect(f.dials).toHaveLength(0);
    expect(dialer.refused()).toEqual([]);
    dialer.stop();
  });
});

describe('auto-dialer: a dial that fails after the member reconnected', () => {
  it('neither forgets the member nor reports it unreachable', async () => {
    const f = memberNode();
    let rejectDial: (e: Error) => void = () => {};
    (f.node as unknown as { dial: unknown }).dial = () => new Promise((_, reject) => (rejectDial = reject));
    const dialer = new AutoDialer(f.node, pino({ level: 'silent' }), { privatePod: false, timeoutMs: 5000, redial: { baseMs: 20, maxMs: 20, jitter: 0 } });
    f.connect();
    f.drop();
    await new Promise((r) => setTimeout(r, 80)); // our dial is under way
    f.connect(); // the member dialled us meanwhile
    rejectDial(new Error('The operation was aborted due to timeout'));
    await new Promise((r) => setTimeout(r, 20));
    expect(dialer.refused()).toEqual([]);
    // Still a member: a later drop is re-dialled again.
    f.drop();
    expect(dialer.refused().map((r) => r.peerId)).toEqual(['peer-b']);
    dialer.stop();
  });
});

describe('auto-dialer: only pod members are dialled again', () => {
  it('a peer connected but never heard on the control topic (another pod, a relay) is not re-dialled when it drops', async () => {
    const f = memberNode();
    const dialer = new AutoDialer(f.node, pino({ level: 'silent' }), { privatePod: false, heardAt: () => undefined, redial: { baseMs: 20, maxMs: 20, jitter: 0 } });
    f.connect();
    f.drop();
    await new Promise((r) => setTimeout(r, 150));
    expect(f.dials).toHaveLength(0);
    expect(dialer.refused()).toEqual([]);
    dialer.stop();
  });
});

describe('auto-dialer: a member connected but silent', () => {
  it('is hung up on (then re-dialled) once it has been silent for silentAfterMs; a member heard recently is left alone', async () => {
    const f = memberNode();
    let hangUps = 0;
    (f.node as unknown as { hangUp: unknown }).hangUp = async () => {
      hangUps++;
      f.drop();
    };
    let heard = Date.now();
    const dialer = new AutoDialer(f.node, pino({ level: 'silent' }), { privatePod: false, heardAt: () => heard, silentAfterMs: 500, redial: { baseMs: 20, maxMs: 20, jitter: 0 } });
    f.connect();
    for (let i = 0; i < 6; i++) {
      await new Promise((r) => setTimeout(r, 50));
      heard = Date.now(); // heartbeats arrive
    }
    expect(hangUps).toBe(0);
    await new Promise((r) => setTimeout(r, 900)); // silence
    // Once per silence period (a reconnection starts a new one), not on every tick.
    expect(hangUps).toBeGreaterThanOrEqual(1);
    expect(hangUps).toBeLessThanOrEqual(2);
    expect(f.dials.length).toBeGreaterThanOrEqual(1); // dialled afresh after the hang-up
    dialer.stop();
  });

  it('a peer never heard (not a pod member: another pod, a relay) is never hung up on', async () => {
    const f = memberNode();
    let hangUps = 0;
    (f.node as unknown as { hangUp: unknown }).hangUp = async () => void hangUps++;
    const dialer = new AutoDialer(f.node, pino({ level: 'silent' }), { privatePod: false, heardAt: () => undefined, silentAfterMs: 50 });
    f.connect();
    await new Promise((r) => setTimeout(r, 300));
    expect(hangUps).toBe(0);
    dialer.stop();
  });
});
