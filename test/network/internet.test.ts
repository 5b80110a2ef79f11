/**
 * The network across a namespace internet (test/harness/internet.ts): three home LANs, each one
 * machine behind its own NAT router, and a public host running `orchard relay`. Pods B and C hold a
 * model (a generated Llama with a 2048-token context) and lend; pod A holds nothing and routes.
 *
 *   1. A chat from A is served whole by C, whose address A found through the DHT; the test reports
 *      whether the connection was hole-punched or relayed. Both sides keep the same receipt, it
 *      verifies, and balances move (B refuses A at first: its deny list, changed with `orchard lend`).
 *   2. C is killed after accepting a job, before its first token: the job is rerouted to B.
 *   3. B lends only while idle: while its owner streams locally it refuses, and A is told why.
 *   4. A peer offering 100,000 tokens/s for free gets one job, is measured at ~3, and the next job
 *      goes to B.
 *   5. A daemon without --network (D, in LAN B) sees and serves nothing of the network.
 *
 * Needs root, iproute2 and nft; skips otherwise (ORCHARD_REQUIRE_NETNS_TESTS=1 makes that a failure).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { writeRandomModel } from '@orchard/engine/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BENCH_VERSION, CAPABILITY_FILE, machineFingerprint } from '../../packages/daemon/src/capability/cache.js';
import { verifyReceipt } from '../../packages/daemon/src/network/receipts.js';
import { REPO_ROOT, startDaemon, waitFor, type TestDaemon } from '../harness/daemons.js';
import { createInternet, internetAvailable, type Internet } from '../harness/internet.js';
import type { TestHost } from '../harness/netns.js';

const NETWORK = 'testnet';
const MODEL = 'test/net-llama';
const CLI = join(REPO_ROOT, 'packages/daemon/src/cli/main.ts');
const available = internetAvailable();
if (!available && process.env.ORCHARD_REQUIRE_NETNS_TESTS === '1') throw new Error('the internet test needs root, iproute2 and nft (ORCHARD_REQUIRE_NETNS_TESTS=1)');

let inet: Internet | undefined;
let relay: ChildProcess | undefined;
let relayLog = '';
let relayAddr = '';
const pods: Record<'a' | 'b' | 'c' | 'd', TestDaemon | undefined> = { a: undefined, b: undefined, c: undefined, d: undefined };
let liarLog = '';

/** A pod's data dir, holding the test model (B and C) and a lending policy written ahead. */
function dataDir(name: string, o: { model: boolean; lending?: object }): string {
  const dir = mkdtempSync(join(os.tmpdir(), `orchard-net-${name}-`));
  // Fixed capability figures: the four daemons skip their micro-benchmark (seconds each on a busy machine).
  const capability = { memoryBandwidthGBps: 10, matmulGflops: 20, method: 'fixed by the internet test', measuredAt: Date.now() };
  writeFileSync(join(dir, CAPABILITY_FILE), JSON.stringify({ machine: machineFingerprint(), version: BENCH_VERSION, capability }));
  if (o.model) {
    const modelDir = join(dir, 'models', ...MODEL.split('/'));
    mkdirSync(modelDir, { recursive: true });
    // Big enough that a long local answer keeps B busy for seconds, small enough to load in one.
    const info = writeRandomModel(modelDir, { numLayers: 4, hiddenSize: 384, intermediateSize: 1024, numHeads: 6, numKvHeads: 2, maxPositionEmbeddings: 2048, seed: 5 });
    // A random model says its eos early (137 tokens into B's local answer); an id past the vocabulary
    // never comes, so every answer runs to max_tokens and B's local stream lasts as long as the test asks.
    writeFileSync(join(modelDir, 'generation_config.json'), JSON.stringify({ eos_token_id: [info.config.vocab_size], do_sample: false }));
  }
  if (o.lending) {
    mkdirSync(join(dir, 'network', NETWORK), { recursive: true });
    writeFileSync(join(dir, 'network', NETWORK, 'lending.json'), JSON.stringify(o.lending));
  }
  return dir;
}

/** Runs curl inside a namespace without blocking this process; resolves with status and parsed body. */
function curl(host: TestHost, method: string, url: string, body?: unknown, timeoutS = 150): Promise<{ status: number; json: any; text: string }> {
  return new Promise((resolve, reject) => {
    const args = ['-s', '-N', '-m', String(timeoutS), '-X', method, '-w', '\n%{http_code}', url, ...(body === undefined ? [] : ['-H', 'content-type: application/json', '-d', JSON.stringify(body)])];
    const child = host.spawn('curl', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('exit', () => {
      const i = out.lastIndexOf('\n');
      const text = out.slice(0, i);
      let json: any = null;
      try {
        json = JSON.parse(text);
      } catch {
        /* SSE or empty */
      }
      resolve({ status: Number(out.slice(i + 1)), json, text });
    });
  });
}

const api = (d: TestDaemon, path: string) => `http://127.0.0.1:${d.apiPort}${path}`;
const status = async (d: TestDaemon) => (await curl(d.host, 'GET', api(d, '/api/network'))).json;
const chat = (d: TestDaemon, content: string, maxTokens: number) => curl(d.host, 'POST', api(d, '/v1/chat/completions'), { model: MODEL, messages: [{ role: 'user', content }], max_tokens: maxTokens, temperature: 0 });
const peerOf = (d: TestDaemon) => d.get('/api/status').self.peerId as string;

/** `orchard <args>` inside a namespace (what a person would type). */
function orchard(host: TestHost, args: string[]): string {
  return host.exec(process.execPath, ['--import', 'tsx', CLI, ...args]);
}

function startPod(host: TestHost, dir: string, args: string[] = []): TestDaemon {
  return startDaemon(host, { dataDir: dir, args: ['--no-mdns', '--backend', 'wasm', '--gone-after', '3', '--network', NETWORK, '--network-bootstrap', relayAddr, ...args], env: { ORCHARD_LOG_LEVEL: 'info' } });
}

function dumpLogs(): void {
  for (const [name, d] of Object.entries(pods)) if (d) console.error(`--- ${name} log (tail) ---\n${d.log().split('\n').slice(-25).join('\n')}`);
  console.error(`--- relay ---\n${relayLog.slice(-3000)}\n--- liar ---\n${liarLog.slice(-2000)}`);
}

describe.skipIf(!available)('a network of pods across NAT (namespace internet)', () => {
  let a: TestDaemon;
  let b: TestDaemon;
  let c: TestDaemon;
  let ids: { a: string; b: string; c: string };

  beforeAll(async () => {
    try {
      await setUp();
    } catch (err) {
      dumpLogs();
      throw err;
    }
  }, 480_000);

  async function setUp() {
    inet = await createInternet({ lans: 3 });
    const relayDir = mkdtempSync(join(os.tmpdir(), 'orchard-net-relay-'));
    // A relay on a VPS announces its public address (libp2p announces an interface's public address only once verified).
    relay = inet.pub.spawn(process.execPath, ['--import', 'tsx', CLI, 'relay', '--network', NETWORK, '--data-dir', relayDir, '--announce', `/ip4/${inet.pub.ip}/tcp/52418`], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    relay.stdout!.on('data', (d) => (relayLog += d));
    relay.stderr!.on('data', (d) => (relayLog += d));
    relayAddr = await waitFor('the relay to print its address', () => /--network-bootstrap (\/ip4\/11\.\S+)/.exec(relayLog)?.[1], 120_000);
    const [la, lb, lc] = inet.lans;
    // B refuses A at first (its deny list); its price is higher than C's.
    const lending = { enabled: true, mode: 'idle', maxTokensPerJob: 2048 };
    b = startPod(lb.host, dataDir('b', { model: true, lending: { ...lending, pricePer1M: 2000 } }), ['--name', 'lan-b', '--network-region', 'Lisbon@38.7,-9.1']);
    c = startPod(lc.host, dataDir('c', { model: true, lending: { ...lending, pricePer1M: 1000 } }), ['--name', 'lan-c', '--network-region', 'Osaka@34.7,135.5']);
    a = startPod(la.host, dataDir('a', { model: false }), ['--name', 'lan-a', '--network-region', 'Berlin@52.5,13.4']);
    pods.a = a;
    pods.b = b;
    pods.c = c;
    // D: LAN B's machine runs a second daemon that joined no network.
    pods.d = startDaemon(lb.host, { dataDir: dataDir('d', { model: false }), apiPort: 52515, args: ['--no-mdns', '--backend', 'wasm', '--listen', '/ip4/0.0.0.0/tcp/52516'], env: { ORCHARD_LOG_LEVEL: 'info' } });
    // Generous: on a 2-core machine shared with other test runs, four daemons take minutes to start.
    await waitFor('the pods to answer', () => [a, b, c, pods.d!].every((d) => d.tryGet('/api/status')), 300_000);
    ids = { a: peerOf(a), b: peerOf(b), c: peerOf(c) };
    orchard(lb.host, ['lend', 'on', '--deny', ids.a, '--url', api(b, '')]);
    await waitFor('A to hear B and C offer the model', async () => {
      const s = await status(a);
      return [ids.b, ids.c].every((p) => s?.nodes.some((n: any) => n.peer === p && n.online && n.models.some((m: any) => m.name === MODEL)));
    }, 60_000);
  }

  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail') dumpLogs();
  });

  afterAll(async () => {
    await inet?.destroy();
  });

  it('a chat from LAN A is served whole by LAN C, found through the DHT; both keep the same verified receipt and balances move', async () => {
    const r = await chat(a, 'In the beginning', 24);
    // B takes A's jobs again from here on (lifted first, so a failure below does not fail the tests after).
    orchard(inet!.lans[1].host, ['lend', 'on', '--deny', '', '--url', api(b, '')]);
    expect(r.status, r.text).toBe(200);
    expect(r.json.choices[0].message.content.length).toBeGreaterThan(0);
    const seen = await status(a);
    const job = seen.jobs.find((j: any) => j.ok && j.role === 'requested');
    expect(job).toMatchObject({ peer: ids.c, model: MODEL });
    // C's address reached A through the DHT either way (NAT: nothing else carries it): 'dht' when A
    // looked C up for this job, 'known' when A's DHT routing-table refresh had connected them before.
    expect(['dht', 'known']).toContain(job.found);
    // B, asked first or not, must not have served (it denies A).
    expect(job.tried.every((t: any) => t.peer === ids.b && t.code === 'peer_refused')).toBe(true);
    console.log(`LAN A -> LAN C: ${job.path} connection (${job.path === 'direct' ? 'hole-punched by DCUtR' : 'through the relay'}), address ${job.found === 'dht' ? 'looked up in the DHT for the job' : 'known from the DHT before'}; ${job.tokens} tokens, ${job.charge} micro-credits`);
    // The same receipt on both sides, and it verifies from the peer ids alone.
    const receiptsOf = (d: TestDaemon) => readFileSync(join(d.dataDir, 'network', NETWORK, 'receipts.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    await waitFor('C to keep the receipt', () => receiptsOf(c).length === 1, 10_000);
    const [mine, theirs] = [receiptsOf(a), receiptsOf(c)];
    expect(mine).toEqual(theirs);
    const v = await verifyReceipt(mine[0]);
    expect(v.ok).toBe(true);
    if (v.ok) expect(v.receipt.ticket).toMatchObject({ requester: ids.a, server: ids.c, pricePer1M: 1000 });
    const net = (s: any, p: string) => s.balances.find((x: any) => x.peer === p)?.net;
    expect(net(seen, ids.a)).toBe(-job.charge);
    expect(net(await status(c), ids.c)).toBe(job.charge);
    await waitFor('the receipt to reach B through gossip', async () => net(await status(b), ids.c) === job.charge, 15_000);
  }, 240_000);

  it('killing the chosen pod after it accepted the job, before its first token, reroutes the job to another', async () => {
    // C unloads, so its next job waits for a load: the window in which it is killed.
    const instances = (await curl(c.host, 'GET', api(c, '/api/instances'))).json.instances;
    for (const i of instances) await curl(c.host, 'DELETE', api(c, `/api/instances/${i.id}`));
    const pending = chat(a, 'And God said', 16);
    await waitFor('C to accept the job', () => c.log().includes('network job accepted') && c.log().split('network job accepted').length > 2, 60_000, 50);
    c.kill('SIGKILL');
    const r = await pending;
    expect(r.status, r.text).toBe(200);
    const job = (await status(a)).jobs.find((j: any) => j.ok);
    expect(job.peer).toBe(ids.b);
    expect(job.tried).toEqual([{ peer: ids.c, code: 'broken' }]);
  }, 240_000);

  it('a pod lending only while idle refuses while its owner streams locally', async () => {
    const local = chat(b, 'Let there be light', 1500);
    await waitFor('B to run the local request', () => (b.tryGet('/api/instances')?.instances ?? []).some((i: any) => i.status.active > 0), 90_000, 100);
    const r = await chat(a, 'And the evening', 16);
    expect(r.status).toBe(503);
    expect(r.json.error.message).toMatch(/busy|only while idle/);
    expect((await local).status).toBe(200);
    expect((await status(b)).lending.refused).toBeGreaterThanOrEqual(1);
  }, 240_000);

  it('a peer that lies about its speed gets one job, is measured, and the next goes elsewhere', async () => {
    const dir = mkdtempSync(join(os.tmpdir(), 'orchard-net-liar-'));
    const liar = inet!.lans[2].host.spawn(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'packages/daemon/test/network/fixtures/liar.ts'), NETWORK, MODEL, dir, relayAddr], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    liar.stdout!.on('data', (d) => (out += d));
    liar.stderr!.on('data', (d) => (liarLog += d));
    const liarId = await waitFor('the liar to join', () => /^(12D3\S+)$/m.exec(out)?.[1], 60_000);
    await waitFor('A to hear the liar', async () => (await status(a)).nodes.some((n: any) => n.peer === liarId && n.online && n.models.length), 30_000);
    const first = await chat(a, 'Blessed are', 600);
    expect(first.status, first.text).toBe(200);
    expect(first.json.choices[0].message.content).toMatch(/^lie0 /);
    const view = (await status(a)).nodes.find((n: any) => n.peer === liarId);
    expect(view.reputation).toBeLessThan(1);
    const second = await chat(a, 'Blessed are', 600);
    expect(second.status, second.text).toBe(200);
    expect(second.json.choices[0].message.content).not.toMatch(/^lie0 /);
    expect((await status(a)).jobs.find((j: any) => j.ok).peer).toBe(ids.b);
    liar.kill('SIGTERM');
  }, 240_000);

  it('a daemon without --network sees and serves nothing of the network', async () => {
    const d = pods.d!;
    const r = await curl(d.host, 'GET', api(d, '/api/network'));
    expect(r.status).toBe(404);
    expect(r.json.error.message).toContain('has not joined a network');
    const c2 = await chat(d, 'Hello', 4);
    expect(c2.status).toBe(404);
    expect(d.log()).not.toContain('joined network');
    const dId = peerOf(d);
    expect((await status(a)).nodes.some((n: any) => n.peer === dId)).toBe(false);
    expect((await status(b)).nodes.some((n: any) => n.peer === dId)).toBe(false);
  }, 60_000);
});
