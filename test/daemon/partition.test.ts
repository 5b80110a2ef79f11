/**
 * Partition and heal, on real daemons in network namespaces: 2 daemons serve the bundled model split
 * over both nodes; one node is cut off for 20 s by an nft table that drops everything on its interface
 * (link and routes stay up, as when a switch port or a firewall drops traffic); each side goes on with
 * its own coordinator and its own copy of the model (split brain, as expected while apart). The cut is
 * lifted: within 15 s the pod is one again (one coordinator, one copy of each model, the same state on
 * both) and a request is served by the merged pod. `orchard status` said the pod was split meanwhile.
 * Skips when not root / no iproute2 or nft; the net and its processes are always removed.
 */
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, waitFor, type TestDaemon } from '../harness/daemons.js';
import { createTestNet, netnsAvailable, type TestHost, type TestNet } from '../harness/netns.js';

const GONE_AFTER_SEC = 3;
const CUT_MS = 20_000;
const MODEL = 'orchard-demo';

let net: TestNet | undefined;
let daemons: TestDaemon[] = [];

function nftAvailable(): boolean {
  try {
    execFileSync('nft', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Drops every packet in and out of `host`'s eth0 (loopback, where its API and runners listen, untouched). */
function cut(host: TestHost): void {
  host.exec('nft', ['add table inet orchard_cut']);
  host.exec('nft', ['add chain inet orchard_cut in { type filter hook input priority -10 ; policy accept ; }']);
  host.exec('nft', ['add chain inet orchard_cut out { type filter hook output priority -10 ; policy accept ; }']);
  host.exec('nft', ['add rule inet orchard_cut in iifname "eth0" drop']);
  host.exec('nft', ['add rule inet orchard_cut out oifname "eth0" drop']);
}

function heal(host: TestHost): void {
  host.exec('nft', ['delete table inet orchard_cut']);
}

function post(d: TestDaemon, path: string, body: unknown): { status: number; json: any } {
  const out = d.host.exec('curl', ['-s', '-m', '60', '-X', 'POST', '-w', '\n%{http_code}', '-H', 'content-type: application/json', '-d', JSON.stringify(body), `http://127.0.0.1:${d.apiPort}${path}`]);
  const i = out.lastIndexOf('\n');
  const text = out.slice(0, i);
  return { status: Number(out.slice(i + 1)), json: text ? JSON.parse(text) : null };
}

type Instance = { id: string; model: string; nodes: string[]; plan: { supersedes?: string } };
const instancesOf = (d: TestDaemon, model = MODEL): Instance[] => (d.tryGet('/api/status')?.instances ?? []).filter((i: Instance) => i.model === model);
/**
 * The copies of the model that take requests: instances not on their way out. (Once the pod is whole
 * the coordinator may place a faster layout over both nodes; the one it replaces retires when idle.)
 */
const copiesOf = (d: TestDaemon, model = MODEL): Instance[] => {
  const all = instancesOf(d, model);
  return all.filter((i) => !all.some((o) => o.plan.supersedes === i.id));
};
const coordinatorOf = (d: TestDaemon): string | null => d.tryGet('/api/status')?.coordinator ?? null;
const shared = (d: TestDaemon) => {
  const s = d.get('/api/status');
  return JSON.stringify({ nodes: s.nodes.map((n: any) => [n.peerId, n.status]), instances: s.instances.map((i: Instance) => i.id).sort(), coordinator: s.coordinator, log: s.log });
};

afterEach(async (ctx) => {
  if (ctx.task.result?.state === 'fail') {
    for (const d of daemons) console.error(`--- ${d.host.ns} log (tail) ---\n${d.log().split('\n').filter((l) => !l.includes('"level":20')).slice(-60).join('\n')}`);
  }
  await net?.destroy();
  net = undefined;
  daemons = [];
});

describe.skipIf(!netnsAvailable() || !nftAvailable())('a partition that heals', () => {
  it('20 s cut, heal: one coordinator and one copy of the model within 15 s, a request served by the merged pod', async () => {
    net = await createTestNet({ hosts: 2 });
    daemons = net.hosts.map((h) => startDaemon(h, { args: ['--gone-after', String(GONE_AFTER_SEC), '--name', h.ns.split('-').pop()!], env: { ORCHARD_LOG_LEVEL: 'info' } }));
    // Start-up is seconds on an idle machine; a loaded CI box may take a minute or more.
    await waitFor('both daemons with profiles in the cluster view', () => daemons.every((d) => d.tryGet('/api/cluster')?.nodes.length === 2), 150_000);
    const ids = daemons.map((d) => d.get('/api/status').self.peerId as string);
    const winner = [...ids].sort()[0];

    // The model split over both nodes, serving.
    const placed = post(daemons[0], '/api/instances', { model: MODEL, strategy: 'pipeline', nodes: 2 });
    expect(placed.status, JSON.stringify(placed.json)).toBe(201);
    expect(new Set(placed.json.instance.nodes).size).toBe(2);
    const first = post(daemons[1], '/v1/completions', { model: MODEL, prompt: 'In the beginning', max_tokens: 8, temperature: 0 });
    expect(first.status, JSON.stringify(first.json)).toBe(200);

    // Cut the second node off.
    const [a, b] = daemons;
    const cutAt = Date.now();
    cut(b.host);
    // Split brain while apart: each side coordinates itself and runs its own copy on its own node.
    await waitFor(
      'each side to lead itself and serve the model on its own node',
      () => daemons.every((d, i) => coordinatorOf(d) === ids[i] && instancesOf(d).some((x) => x.nodes.every((n) => n === ids[i]))),
      CUT_MS - 2000,
      250,
    );
    const splitSeen = await waitFor('a side to say the pod is split', () => daemons.map((d) => d.get('/api/status').partition).find((p) => p?.split), Math.max(1000, CUT_MS - (Date.now() - cutAt)), 250).catch(() => null);
    await new Promise((r) => setTimeout(r, Math.max(0, CUT_MS - (Date.now() - cutAt))));

    const splitCopies = daemons.map((d) => copiesOf(d).map((x) => x.id));
    heal(b.host);
    const healedAt = Date.now();
    // One coordinator, the same state everywhere, and of the two copies made apart one is gone.
    await waitFor(
      'one coordinator and one copy of the model on both nodes',
      () =>
        daemons.every((d) => coordinatorOf(d) === winner && copiesOf(d).length === 1 && splitCopies.flat().filter((id) => instancesOf(d).some((x) => x.id === id)).length === 1) &&
        new Set(daemons.map(shared)).size === 1,
      15_000,
      250,
    );
    const mergedMs = Date.now() - healedAt;
    for (const d of daemons) expect(d.get('/api/status').nodes.map((n: any) => n.status)).toEqual(['live', 'live']);
    // The copy kept is the coordinator's side's (same size: the rule in state/merge.ts).
    const kept = splitCopies.flat().find((id) => instancesOf(a).some((x) => x.id === id));
    expect(splitCopies[ids.indexOf(winner)]).toContain(kept);

    // Served by the merged pod, from either node.
    for (const d of daemons) {
      const r = post(d, '/v1/completions', { model: MODEL, prompt: 'And God said', max_tokens: 8, temperature: 0 });
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      expect(r.json.choices[0].text.length).toBeGreaterThan(0);
    }
    const st = daemons.find((d) => d.get('/api/status').self.peerId === winner)!.get('/api/status');
    expect(st.partition).toMatchObject({ split: false, unreachable: [] });
    expect(st.partition.lastHeal.superseded).toHaveLength(1);
    expect(splitSeen, 'status said the pod was split during the cut').toMatchObject({ split: true });
    expect(splitSeen.unreachable.map((u: { cause: string }) => u.cause)).toContain('no-answer');
    console.log(`pod one again ${mergedMs} ms after the heal (cut ${CUT_MS / 1000} s)`);
  }, 240_000);
});
