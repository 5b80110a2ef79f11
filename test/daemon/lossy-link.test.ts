/**
 * A lossy, rate-capped link between the two nodes of a pod, on real daemons in network namespaces:
 * the bundled model is split as a 2-stage pipeline over both hosts, then one host's link drops 5% of
 * its packets each way (an nft rule on `numgen random mod 100 < 5`; this kernel has no netem) and
 * both hosts' outgoing traffic is capped at 2 Mbit/s (tc tbf). Streams through both daemons, several
 * at once, must all complete with the same greedy text as `orchard run` in one process, within loose
 * time bounds, and the pod stays one (both nodes live, the instance unchanged).
 * Skips when not root / no iproute2, nft or tc; with ORCHARD_REQUIRE_NETNS_TESTS=1 that is a failure.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { orchardRunOn, REPO_ROOT, startDaemon, waitFor, type TestDaemon } from '../harness/daemons.js';
import { createTestNet, netnsAvailable, netToolsAvailable, type TestHost, type TestNet } from '../harness/netns.js';

const MODEL = 'orchard-demo';
const LOSS_PERCENT = 5;
const RATE = '2mbit';
const TOKENS = 24;
/** Generous: a 24-token stream on this model takes well under a second on an idle link. */
const STREAM_DEADLINE_MS = 60_000;

let net: TestNet | undefined;
let daemons: TestDaemon[] = [];

/** Drops LOSS_PERCENT% of packets in and out of `host`'s eth0, at random. */
function lossy(host: TestHost): void {
  host.exec('nft', ['add table inet orchard_loss']);
  host.exec('nft', ['add chain inet orchard_loss in { type filter hook input priority -10 ; policy accept ; }']);
  host.exec('nft', ['add chain inet orchard_loss out { type filter hook output priority -10 ; policy accept ; }']);
  host.exec('nft', [`add rule inet orchard_loss in iifname "eth0" numgen random mod 100 < ${LOSS_PERCENT} counter drop`]);
  host.exec('nft', [`add rule inet orchard_loss out oifname "eth0" numgen random mod 100 < ${LOSS_PERCENT} counter drop`]);
}

function capped(host: TestHost): void {
  host.exec('tc', ['qdisc', 'replace', 'dev', 'eth0', 'root', 'tbf', 'rate', RATE, 'burst', '16kb', 'latency', '400ms']);
}

/** Packets the loss rules dropped so far on `host` (both directions). */
function dropped(host: TestHost): number {
  const out = host.exec('nft', ['list table inet orchard_loss']);
  return [...out.matchAll(/counter packets (\d+)/g)].reduce((a, m) => a + Number(m[1]), 0);
}

/** A streamed completion through `d`'s OpenAI route, by curl in its namespace: the text and how long it took. */
function stream(d: TestDaemon, prompt: string): Promise<{ text: string; ms: number; done: boolean; raw: string }> {
  const t0 = Date.now();
  const body = JSON.stringify({ model: MODEL, prompt, max_tokens: TOKENS, temperature: 0, stream: true });
  const child = d.host.spawn('curl', ['-sN', '-m', String(STREAM_DEADLINE_MS / 1000), '-X', 'POST', '-H', 'content-type: application/json', '-d', body, `http://127.0.0.1:${d.apiPort}/v1/completions`], { stdio: ['ignore', 'pipe', 'ignore'] });
  let raw = '';
  child.stdout!.on('data', (c) => (raw += c));
  return new Promise((resolve) =>
    child.on('close', () => {
      const events = raw.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
      resolve({ text: events.map((e) => e.choices?.[0]?.text ?? '').join(''), ms: Date.now() - t0, done: raw.includes('data: [DONE]'), raw });
    }),
  );
}

function post(d: TestDaemon, path: string, body: unknown): { status: number; json: any } {
  const out = d.host.exec('curl', ['-s', '-m', '60', '-X', 'POST', '-w', '\n%{http_code}', '-H', 'content-type: application/json', '-d', JSON.stringify(body), `http://127.0.0.1:${d.apiPort}${path}`]);
  const i = out.lastIndexOf('\n');
  return { status: Number(out.slice(i + 1)), json: i > 0 ? JSON.parse(out.slice(0, i)) : null };
}

afterEach(async (ctx) => {
  if (ctx.task.result?.state === 'fail') for (const d of daemons) console.error(`--- ${d.host.ns} log (tail) ---\n${d.log().split('\n').filter((l) => !l.includes('"level":20')).slice(-40).join('\n')}`);
  await net?.destroy();
  net = undefined;
  daemons = [];
});

describe.skipIf(!netnsAvailable() || !netToolsAvailable(['nft', 'tc']))('a lossy, rate-capped link', () => {
  it(`${LOSS_PERCENT}% loss each way and a ${RATE} cap between the two stages of a pipeline: every stream completes with orchard run's text`, async () => {
    net = await createTestNet({ hosts: 2 });
    daemons = net.hosts.map((h) => startDaemon(h, { args: ['--name', h.ns.split('-').pop()!], env: { ORCHARD_LOG_LEVEL: 'info' } }));
    // The single-process references while the daemons start.
    const prompts = ['In the beginning', 'And God said', 'The waters', 'Let there be light', 'And the evening', 'The earth was'];
    const want = prompts.map((p) => orchardRunOn(join(REPO_ROOT, 'models', MODEL), p, TOKENS));
    expect(new Set(want).size, 'the prompts lead to different texts').toBeGreaterThan(1);
    await waitFor('both daemons with profiles in the cluster view', () => daemons.every((d) => d.tryGet('/api/cluster')?.nodes.length === 2), 150_000);
    const placed = post(daemons[0], '/api/instances', { model: MODEL, strategy: 'pipeline', nodes: 2 });
    expect(placed.status, JSON.stringify(placed.json)).toBe(201);
    expect(new Set(placed.json.instance.nodes).size).toBe(2);
    // Loaded and served once on the clean link (the runners start, the weights load).
    expect(post(daemons[1], '/v1/completions', { model: MODEL, prompt: prompts[0], max_tokens: TOKENS, temperature: 0 }).json.choices[0].text).toBe(want[0]);

    lossy(net.hosts[1]);
    for (const h of net.hosts) capped(h);
    const t0 = Date.now();
    // Two rounds of six streams at once, half through each daemon.
    const results = [];
    for (let round = 0; round < 2; round++) results.push(...(await Promise.all(prompts.map((p, i) => stream(daemons[(i + round) % 2], p)))));
    const elapsed = Date.now() - t0;
    const drops = dropped(net.hosts[1]);
    results.forEach((r, i) => {
      expect(r.done, `stream ${i} ended with [DONE]: ${r.raw.slice(-300)}`).toBe(true);
      expect(r.raw).not.toMatch(/"error"/);
      expect(r.text, `stream ${i}`).toBe(want[i % prompts.length]);
      expect(r.ms).toBeLessThan(STREAM_DEADLINE_MS);
    });
    expect(elapsed).toBeLessThan(2 * STREAM_DEADLINE_MS);
    // The faults were really on: packets were dropped while the streams ran.
    expect(drops, 'packets dropped by the loss rule').toBeGreaterThan(0);
    // Still one pod, the same instance.
    for (const d of daemons) {
      const s = d.get('/api/status');
      expect(s.nodes.map((n: { status: string }) => n.status)).toEqual(['live', 'live']);
      expect(s.instances.map((i: { id: string }) => i.id)).toEqual([placed.json.instance.id]);
    }
    const ms = results.map((r) => r.ms).sort((a, b) => a - b);
    console.log(`lossy link (${LOSS_PERCENT}% each way on one host, ${RATE} cap): ${results.length}/${results.length} streams complete with orchard run's text in ${elapsed} ms; per stream median ${ms[ms.length >> 1]} ms, max ${ms[ms.length - 1]} ms; ${drops} packets dropped`);
  }, 420_000);
});
