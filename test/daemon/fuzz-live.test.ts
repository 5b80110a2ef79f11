/**
 * A live daemon (separate process, loopback, no namespaces needed) receives a flood of malformed
 * and hostile control messages from a real libp2p peer over gossipsub; it must log and drop them,
 * keep serving its API and keep its state.
 */
import '../../packages/daemon/src/polyfills.js';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CONTROL_TOPIC } from '../../packages/daemon/src/control/messages.js';
import { loadOrCreatePeerKey } from '../../packages/daemon/src/identity/peer-key.js';
import { createNode, type OrchardNode } from '../../packages/daemon/src/node/create-node.js';
import { multiaddr } from '../../packages/daemon/src/node/multiaddr.js';
import { startLoopbackDaemon, waitFor } from '../harness/daemons.js';

let child: ChildProcess | undefined;
let fuzzer: OrchardNode | undefined;
afterAll(async () => {
  child?.kill('SIGKILL');
  await fuzzer?.stop();
});

describe('fuzzed control messages against a running daemon', () => {
  it('drops and logs every malformed message with its sender, stays up, keeps its state', async () => {
    const dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-fuzz-'));
    const d = await startLoopbackDaemon(dataDir);
    child = d.child;
    const { apiPort, logFile } = d;
    const api = async (path: string): Promise<any> => (await fetch(`http://127.0.0.1:${apiPort}${path}`, { signal: AbortSignal.timeout(2000) })).json();
    const st = await waitFor<any>('daemon API', async () => api('/api/status').catch(() => undefined), 60_000);
    const daemonId: string = st.self.peerId;
    await waitFor('daemon to list itself', async () => ((await api('/api/cluster')).nodes.length === 1 ? true : undefined), 20_000);

    fuzzer = await createNode({ privateKey: (await loadOrCreatePeerKey(mkdtempSync(join(os.tmpdir(), 'orchard-fuzzer-')))).key, listen: ['/ip4/127.0.0.1/tcp/0'], bootstrap: [], clusterKey: null, mdns: false });
    await fuzzer.start();
    const pubsub = fuzzer.services.pubsub;
    pubsub.subscribe(CONTROL_TOPIC);
    await fuzzer.dial(multiaddr(st.self.addresses.find((a: string) => a.includes('127.0.0.1'))));
    await waitFor('gossipsub to see the daemon on the topic', () => pubsub.getSubscribers(CONTROL_TOPIC).some((p) => p.toString() === daemonId), 20_000, 100);

    const me = fuzzer.peerId.toString();
    const enc = (v: unknown) => new TextEncoder().encode(typeof v === 'string' ? v : JSON.stringify(v));
    const hostile: Uint8Array[] = [
      enc('not json at all'),
      Uint8Array.from([0xff, 0xfe, 0x00, 0x80]),
      enc('{"type":"heartbeat"'),
      enc({ type: 'heartbeat', from: me, name: 42, bootId: 'b', at: 'now', log: {} }),
      enc({ type: 'no-such-type', from: me }),
      enc({ type: 'goodbye', from: daemonId }), // spoofing the daemon itself
      enc({ type: 'profile', from: me, profile: { peerId: daemonId } }),
      enc({ type: 'event', from: me, epoch: 999, seq: 1, event: { type: 'node-left', peerId: daemonId, at: 1, reason: 'silent' } }),
      enc({ type: 'snapshot', from: me, epoch: 999, seq: 9, state: { nodes: { x: 1 }, links: [], instances: null } }),
      enc({ type: 'links', from: me, links: Array.from({ length: 5000 }, () => ({})) }),
      enc({ __proto__: { type: 'goodbye' }, constructor: { prototype: { polluted: true } } }),
      enc('['.repeat(5000) + ']'.repeat(5000)),
      enc({ type: 'heartbeat', from: me, name: 'x'.repeat(900_000), bootId: 'b', at: 1, log: { epoch: 0, leader: '', seq: 0 } }),
      new Uint8Array(1_100_000).fill(0x7b),
    ];
    for (let round = 0; round < 5; round++) {
      for (const bytes of hostile) await pubsub.publish(CONTROL_TOPIC, bytes).catch(() => {});
      for (let i = 0; i < 40; i++) await pubsub.publish(CONTROL_TOPIC, Uint8Array.from({ length: 1 + ((i * 37) % 300) }, (_, j) => (i * 131 + j * 7) & 0xff)).catch(() => {});
      // A flood of snapshot requests must not turn into a flood of snapshots.
      for (let i = 0; i < 50; i++) await pubsub.publish(CONTROL_TOPIC, enc({ type: 'sync-request', from: me, to: daemonId, purpose: 'follow', n: i })).catch(() => {});
    }
    await new Promise((r) => setTimeout(r, 2500));

    expect(child.exitCode).toBeNull();
    expect(child.signalCode).toBeNull();
    const after = await api('/api/status');
    const selfEntry = after.nodes.find((n: { peerId: string }) => n.peerId === daemonId);
    expect(selfEntry.status).toBe('live');
    expect(selfEntry.profile).not.toBeNull();
    // Every random-bytes message (5 rounds x 40) reached the daemon's decoder and was dropped there.
    expect(after.controlMessages.dropped).toBeGreaterThanOrEqual(200);
    const log = readFileSync(logFile, 'utf8');
    const drops = log.split('\n').filter((l) => l.includes('dropped control message'));
    expect(drops.length).toBeGreaterThan(0);
    expect(drops.some((l) => l.includes(me))).toBe(true);
    expect(log).not.toMatch(/uncaught|unhandled/i);
  });
});
