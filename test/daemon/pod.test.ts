/**
 * Multi-host proof for the daemon control plane: real daemons as separate processes in network
 * namespaces joined by a bridge (test/harness). Skips when not root / no iproute2.
 */
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, waitFor, type TestDaemon } from '../harness/daemons.js';
import { createTestNet, netnsAvailable, type TestNet } from '../harness/netns.js';
import { newClusterKey } from '../../packages/daemon/src/identity/cluster-key.js';
import { canonicalJson } from '../../packages/daemon/src/state/canonical-json.js';
import { parseCluster } from '@orchard/partitioner';

const GONE_AFTER_SEC = 3;
let net: TestNet | undefined;
let daemons: TestDaemon[] = [];
const everStarted: TestDaemon[] = [];

afterEach(async (ctx) => {
  if (ctx.task.result?.state === 'fail') {
    for (const d of daemons) console.error(`--- ${d.host.ns} log (tail) ---\n${d.log().split('\n').slice(-40).join('\n')}`);
  }
  everStarted.push(...daemons);
  await net?.destroy();
  net = undefined;
  daemons = [];
});

/** The shared part of the state, as every node must see it. */
function sharedState(d: TestDaemon) {
  const s = d.get('/api/status');
  return canonicalJson({ nodes: s.nodes, links: s.links, coordinator: s.coordinator, log: s.log });
}

const liveIds = (d: TestDaemon): string[] => (d.tryGet('/api/cluster')?.nodes ?? []).map((n: { id: string }) => n.id).sort();

describe.skipIf(!netnsAvailable())('daemon pod across network namespaces', () => {
  it('3 daemons with no configuration find each other, agree on one state, measure every pair; a killed one is marked gone', async () => {
    net = await createTestNet({ hosts: 3 });
    daemons = net.hosts.map((h) => startDaemon(h, { args: ['--gone-after', String(GONE_AFTER_SEC), '--name', h.ns.split('-').pop()!] }));
    await waitFor('every daemon to see 3 nodes', () => daemons.every((d) => liveIds(d).length === 3), 60_000);
    const ids = liveIds(daemons[0]);

    // Every pair measured (the smaller id probes), and all three hold byte-identical shared state.
    await waitFor('a measured link for each of the 3 pairs', () => daemons.every((d) => d.get('/api/cluster').links.length === 3), 30_000);
    await waitFor('identical shared state on all daemons', () => new Set(daemons.map(sharedState)).size === 1, 20_000);

    const conns = await waitFor<any[]>('libp2p ping round trips to both peers', () => {
      const c = daemons[2].get('/api/status').connections.filter((x: { pingMs: number | null }) => x.pingMs !== null);
      return new Set(c.map((x: { peer: string }) => x.peer)).size === 2 && c;
    }, 15_000);
    for (const c of conns) expect(c.pingMs).toBeGreaterThanOrEqual(0);

    const cluster = daemons[2].get('/api/cluster');
    expect(cluster.mode).toBe('open');
    expect(cluster.nodes.map((n: { name: string }) => n.name).sort()).toEqual(['h0', 'h1', 'h2']);
    for (const n of cluster.nodes) {
      expect(n.memoryBytes).toBeGreaterThan(0);
      expect(n.memoryBandwidthGBps).toBeGreaterThan(0);
      expect(n.tflops).toBeGreaterThan(0);
    }
    const pairs = cluster.links.map((l: { a: string; b: string }) => [l.a, l.b].sort().join('|')).sort();
    expect(pairs).toEqual([`${ids[0]}|${ids[1]}`, `${ids[0]}|${ids[2]}`, `${ids[1]}|${ids[2]}`]);
    for (const l of cluster.links) {
      expect(l.kind).toBe('ethernet'); // veth
      expect(l.latencyUs).toBeGreaterThan(0);
      expect(l.bandwidthGbps).toBeGreaterThan(0);
    }
    expect(cluster.coordinator).toBe(ids[0]);
    // What `orchard cluster --json` prints is accepted by the planner as is.
    expect(parseCluster(cluster).links).toHaveLength(3);

    // Kill the coordinator (the hardest case: the others must take over, then mark it gone).
    const victim = daemons.find((d) => d.get('/api/status').self.peerId === ids[0])!;
    const others = daemons.filter((d) => d !== victim);
    const killedAt = Date.now();
    victim.kill('SIGKILL');
    await waitFor('the killed daemon marked gone on the others', () => others.every((d) => d.get('/api/status').nodes.find((n: { peerId: string }) => n.peerId === ids[0])?.status === 'gone'), 20_000, 250);
    const elapsed = Date.now() - killedAt;
    // Silence timeout + takeover settle + a few heartbeats of slack on a loaded 2-core machine.
    expect(elapsed).toBeLessThan(GONE_AFTER_SEC * 1000 + 6000);
    await waitFor('survivors agree again', () => new Set(others.map(sharedState)).size === 1, 10_000);
    expect(others[0].get('/api/cluster').coordinator).toBe(ids[1]);
    expect(others[0].get('/api/cluster').links).toHaveLength(1);
    console.log(`gone detected after ${elapsed} ms (timeout ${GONE_AFTER_SEC} s)`);

    // Restart it with the same data dir: same identity, it rejoins, catches up and leads again.
    const restarted = startDaemon(victim.host, { dataDir: victim.dataDir, args: ['--gone-after', String(GONE_AFTER_SEC), '--name', 'h0-again'] });
    daemons.push(restarted);
    const pod = [...others, restarted];
    await waitFor('restarted daemon back in the pod', () => pod.every((d) => liveIds(d).length === 3), 60_000);
    await waitFor('all three agree again after the restart', () => new Set(pod.map(sharedState)).size === 1, 30_000);
    const back = restarted.get('/api/status');
    expect(back.self.peerId).toBe(ids[0]);
    expect(back.coordinator).toBe(ids[0]);
    expect(back.nodes.find((n: { peerId: string }) => n.peerId === ids[0]).name).toBe('h0-again');
  });

  it('with multicast blocked, daemons join through --bootstrap, rejoin after a cable pull, and one without it stays alone', async () => {
    net = await createTestNet({ hosts: 4, multicast: false });
    const [h0, h1, h2, h3] = net.hosts;
    const gone = ['--gone-after', String(GONE_AFTER_SEC)];
    const seed = startDaemon(h0, { args: gone });
    daemons = [seed];
    const seedId = (await waitFor<any>('seed API', () => seed.tryGet('/api/status'), 30_000)).self.peerId as string;
    const boot = [...gone, '--bootstrap', `/ip4/${h0.ip}/tcp/52416/p2p/${seedId}`];
    daemons.push(startDaemon(h1, { args: boot }), startDaemon(h2, { args: boot }), startDaemon(h3, { args: gone }));
    const joined = daemons.slice(0, 3);
    await waitFor('bootstrapped daemons to see 3 nodes', () => joined.every((d) => liveIds(d).length === 3), 60_000);
    await waitFor('a measured link for each pair (B and C know each other only through A)', () => joined.every((d) => d.get('/api/cluster').links.length === 3), 30_000);
    await waitFor('identical shared state', () => new Set(joined.map(sharedState)).size === 1, 20_000);

    // Pull h1's cable: gone on the others; plug it back: it rejoins without multicast.
    const h1Id = daemons[1].get('/api/status').self.peerId;
    net.setLink(1, false);
    await waitFor('the unplugged daemon marked gone', () => seed.get('/api/status').nodes.find((n: { peerId: string }) => n.peerId === h1Id)?.status === 'gone', 20_000, 250);
    net.setLink(1, true);
    await waitFor('the replugged daemon back in the pod', () => joined.every((d) => liveIds(d).length === 3), 30_000);
    await waitFor('identical shared state after the rejoin', () => new Set(joined.map(sharedState)).size === 1, 20_000);

    // A clean stop (SIGTERM) says goodbye: gone at once, without waiting for the silence timeout.
    const leaving = daemons[2];
    const leavingId = leaving.get('/api/status').self.peerId;
    const stoppedAt = Date.now();
    leaving.kill('SIGTERM');
    await waitFor('the stopped daemon marked gone (shutdown)', () => seed.get('/api/status').nodes.find((n: { peerId: string }) => n.peerId === leavingId)?.leftReason === 'shutdown', 10_000, 100);
    expect(Date.now() - stoppedAt).toBeLessThan(GONE_AFTER_SEC * 1000); // faster than the silence timeout
    await waitFor('the stopped daemon to exit', () => leaving.exited(), 10_000, 100);

    // The daemon with neither multicast nor bootstrap peers is alone: proves multicast is really blocked.
    const loner = await waitFor('the lone daemon to list itself', () => liveIds(daemons[3]).length > 0 && liveIds(daemons[3]), 30_000);
    expect(loner).toHaveLength(1);
    expect(liveIds(seed)).not.toContain(loner[0]);
  });


  it('with a cluster key, a key-less daemon is refused ("not in this cluster") and sees no state', async () => {
    net = await createTestNet({ hosts: 3 });
    const keyFile = join(os.tmpdir(), `orchard-test-${process.pid}.key`);
    writeFileSync(keyFile, newClusterKey(), { mode: 0o600 });
    const [h0, h1, h2] = net.hosts;
    daemons = [startDaemon(h0, { args: ['--cluster-key', keyFile] }), startDaemon(h1, { args: ['--cluster-key', keyFile] }), startDaemon(h2)];
    const [a, b, outsider] = daemons;
    await waitFor('keyed daemons to see each other', () => liveIds(a).length === 2 && liveIds(b).length === 2, 60_000);
    const outsiderId = (await waitFor<any>('outsider API', () => outsider.tryGet('/api/status'), 30_000)).self.peerId as string;
    // The outsider hears the others over mDNS and tries them: refused, reported as not in this cluster.
    const st = await waitFor('outsider to report the keyed peers as not in this cluster', () => {
      const s = outsider.get('/api/status');
      return s.notInCluster.length >= 1 ? s : undefined;
    }, 30_000);
    expect(st.mode).toBe('open');
    for (const r of st.notInCluster) expect(r.message).toMatch(/not in this cluster/);
    expect(JSON.stringify(st.notInCluster)).not.toMatch(/noise|decrypt|nonce|ECONNRESET|EOF/i);
    await waitFor('outsider to list itself', () => liveIds(outsider).length > 0, 20_000);
    expect(liveIds(outsider)).toEqual([outsiderId]);
    expect(Object.keys(outsider.get('/api/status').nodes)).toHaveLength(1);
    for (const d of [a, b]) {
      const s = d.get('/api/status');
      expect(s.mode).toBe('private');
      expect(s.clusterKeyId).toMatch(/^[0-9a-f]{12}$/);
      expect(liveIds(d)).not.toContain(outsiderId);
    }
    // The keyed pair measures its link: each opened its probe port on the address the other reaches
    // it by (the bridge) besides 127.0.0.1, and nowhere else.
    await waitFor('the keyed pair to measure its link', () => a.get('/api/cluster').links.length === 1, 30_000);
    for (const [d, h] of [[a, h0], [b, h1]] as const) expect(d.get('/api/status').self.probeAddresses).toEqual([h.ip, '127.0.0.1'].sort());
  }, 150_000);
});

describe.skipIf(!netnsAvailable())('duplicate identity', () => {
  it('two daemons started from a copied data dir both report the duplicate with a fix, instead of flapping', async () => {
    net = await createTestNet({ hosts: 2 });
    const first = startDaemon(net.hosts[0]);
    daemons = [first];
    const id = (await waitFor<any>('first daemon API', () => first.tryGet('/api/status'), 30_000)).self.peerId;
    const copyDir = mkdtempSync(join(os.tmpdir(), 'orchard-copy-'));
    copyFileSync(join(first.dataDir, 'peer.key'), join(copyDir, 'peer.key'));
    const second = startDaemon(net.hosts[1], { dataDir: copyDir });
    daemons.push(second);
    for (const d of daemons) {
      const dup = await waitFor<any>(`${d.host.ns} to report the duplicate`, () => d.tryGet('/api/status')?.duplicateIdentity, 30_000);
      expect(dup.peerId).toBe(id);
      expect(dup.message).toMatch(/uses this node's identity/);
      expect(dup.message).toMatch(/peer\.key/);
      expect(dup.addresses.join(' ')).toContain(d === first ? net.hosts[1].ip : net.hosts[0].ip);
      expect(d.exited()).toBe(false);
    }
  });
});

describe.skipIf(!netnsAvailable())('teardown', () => {
  it('left no daemon process and no namespace behind (runs last, after the tests above)', async () => {
    expect(everStarted.length).toBeGreaterThan(0);
    await waitFor('every daemon process to be gone', () => everStarted.every((d) => d.exited()), 5000, 100);
    const { execFileSync } = await import('node:child_process');
    expect(execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })).not.toContain(`orch-${process.pid}-`);
  });
});
