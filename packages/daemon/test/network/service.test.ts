/**
 * The network service end to end in one process: a relay and member nodes on loopback whose only
 * address is a circuit through the relay (as for pods behind NAT), fake pods behind them. Real
 * libp2p throughout: gossipsub offers, DHT lookups, relayed job streams, receipts.
 * (The namespace test, test/network/internet.test.ts, does the same with real daemons behind NAT.)
 */
import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromString } from '@libp2p/peer-id';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFailed } from 'vitest';
import { ServeError } from '../../src/requests/errors.js';
import type { ServeEvent, ServeRequest } from '../../src/requests/request.js';
import { DEFAULT_LENDING } from '../../src/network/lending.js';
import { NetworkRelay } from '../../src/network/relay.js';
import { NetworkService, type PodPort } from '../../src/network/service.js';

const NET = 'loopnet';
/** Every member's log lines, printed when a test fails. */
const lines: string[] = [];
const log = pino({ level: 'debug' }, { write: (l: string) => void lines.push(l) });
const request: ServeRequest = { kind: 'chat', messages: [{ role: 'user', content: 'In the beginning' }], maxTokens: 32, temperature: 0, topP: 1, seed: 1, stop: [] };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor<T>(what: string, check: () => T | undefined | false | Promise<T | undefined | false>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

interface FakePod extends PodPort {
  runs: number;
  /** Awaited before the first token of a job. */
  beforeFirst?: () => Promise<void> | void;
  /** Awaited after the second token of a job. */
  midway?: () => Promise<void> | void;
}

/**
 * A pod that serves `orchard-demo` and offers `offeredTps`. Honest pods (`msPerToken` 0) stream
 * their tokens at once, so what the requester measures is never below the offer however loaded the
 * machine; a slow pod sleeps `msPerToken` per token.
 */
function fakePod(name: string, offeredTps: number, msPerToken = 0): FakePod {
  const pod: FakePod = {
    name,
    runs: 0,
    models: () => [{ name: 'orchard-demo', state: 'serving', contextTokens: 2048, decodeTps: offeredTps, prefillTps: offeredTps * 4, bytes: 7_000_000 }],
    nodes: () => [{ name: `${name}-mac`, chip: 'Apple M4 Pro', memoryBytes: 64 * 2 ** 30 }],
    load: () => ({ active: 0, queued: 0, capacity: 1 }),
    speaksForPod: () => true,
    async run(_model, req, emit, signal) {
      pod.runs++;
      await pod.beforeFirst?.();
      emit({ type: 'start', promptTokens: 5 });
      const n = req.maxTokens ?? 32;
      for (let i = 0; i < n; i++) {
        if (i === 2) await pod.midway?.();
        if (msPerToken) await sleep(msPerToken);
        else if (i % 16 === 15) await new Promise((r) => setImmediate(r));
        if (signal.aborted) throw new ServeError(499, 'cancelled', 'cancelled');
        emit({ type: 'text', text: `${name}${i} ` });
      }
      emit({ type: 'done', finishReason: 'length', promptTokens: 5, completionTokens: n, decodeTokensPerSecond: offeredTps });
    },
  };
  return pod;
}

describe('network service over a relay (in process)', () => {
  const dirs: string[] = [];
  let relay: NetworkRelay;
  let relayAddr: string;
  const members: NetworkService[] = [];

  async function member(pod: FakePod | null, o: { route?: boolean; lend?: boolean } = {}) {
    const dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-net-'));
    dirs.push(dataDir);
    const svc = await NetworkService.start({
      key: await generateKeyPair('Ed25519'),
      dataDir,
      log,
      pod: pod ?? { ...fakePod('requester', 1, 1), models: () => [] },
      settings: { name: NET, listen: [], announce: [], bootstrap: [relayAddr], privateAddresses: true, region: { label: 'Test', lat: 0, lon: 0 }, route: o.route ?? false, priceCap: null, trusted: null, offerIntervalMs: 500, offerTtlMs: 30_000 },
    });
    if (o.lend) svc.setLending({ ...DEFAULT_LENDING, enabled: true, mode: 'idle', maxTokensPerJob: 256 });
    members.push(svc);
    await waitFor('a relay reservation', () => svc.status().self.relayReservations.length > 0);
    return svc;
  }

  const seesOffer = (svc: NetworkService, peer: string) => waitFor(`an offer of ${peer.slice(-6)}`, () => svc.status().nodes.some((n) => n.peer === peer && n.online && n.models.length > 0));

  async function chat(a: NetworkService, trusted?: string[]) {
    const events: ServeEvent[] = [];
    await a.run('orchard-demo', request, (e) => events.push(e), AbortSignal.timeout(30_000), { trusted });
    return { text: events.flatMap((e) => (e.type === 'text' ? [e.text] : [])).join(''), done: events.find((e) => e.type === 'done') };
  }

  let a: NetworkService;
  let b: NetworkService;
  let c: NetworkService;
  // Speeds far apart, so RTTs measured on a loaded machine cannot reorder them: B offers 20
  // tokens/s and makes up to 40, C offers 50 and streams at once.
  const podB = fakePod('B', 20, 25);
  const podC = fakePod('C', 50);

  beforeAll(async () => {
    relay = await NetworkRelay.start({ key: await generateKeyPair('Ed25519'), settings: { network: NET, listen: ['/ip4/127.0.0.1/tcp/0'], announce: [], bootstrap: [], privateAddresses: true }, log });
    relayAddr = relay.addresses()[0];
    [a, b, c] = await Promise.all([member(null, { route: true }), member(podB, { lend: true }), member(podC, { lend: true })]);
    await seesOffer(a, b.signer.peerId);
    await seesOffer(a, c.signer.peerId);
  }, 60_000);

  // On a failure, what the requester saw: its recent jobs and its view of each peer.
  beforeEach(() =>
    onTestFailed(() => {
      const st = a?.status();
      if (!st) return;
      const name = (p: string) => (p === b.signer.peerId ? 'B' : p === c.signer.peerId ? 'C' : p.slice(-6));
      console.log('jobs', JSON.stringify(st.jobs.slice(0, 4).map((j) => ({ ...j, peer: name(j.peer), tried: j.tried.map((t) => `${name(t.peer)}:${t.code}`) }))));
      console.log('nodes', JSON.stringify(st.nodes.map((n) => ({ peer: name(n.peer), online: n.online, rtt: n.rttMs, rep: n.reputation }))));
      console.log(lines.slice(-40).join(''));
    }),
  );

  afterAll(async () => {
    await Promise.all(members.map((m) => m.stop()));
    await relay?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('a job goes whole to the pod expected to finish first, found through the DHT, relayed; both sides keep the receipt and balances move', async () => {
    const { text, done } = await chat(a);
    expect(text).toBe(Array.from({ length: 32 }, (_, i) => `C${i} `).join(''));
    expect(done).toMatchObject({ completionTokens: 32, promptTokens: 5 });
    const job = a.status().jobs[0];
    expect(job).toMatchObject({ role: 'requested', peer: c.signer.peerId, ok: true, found: 'dht', path: 'relayed', tokens: 37, charge: 37 * 1000 });
    await waitFor('the server to keep the receipt', () => c.status().jobs.find((j) => j.role === 'served' && j.job === job.job));
    const net = (svc: NetworkService, peer: string) => svc.status().balances.find((x) => x.peer === peer)?.net;
    expect(net(a, a.signer.peerId)).toBe(-37_000);
    expect(net(a, c.signer.peerId)).toBe(37_000);
    expect(net(c, a.signer.peerId)).toBe(-37_000);
    // the receipt reached everyone through gossip, and B, which took no part, computes the same balances
    await waitFor('B to hear the receipt', () => net(b, c.signer.peerId) === 37_000);
    await waitFor('the relay to hear the receipt', () => relay.status().receipts >= 1);
    expect(podB.runs).toBe(0);
  });

  it('a pod lending only while idle refuses while its owner streams locally, and the job goes to the next pod', async () => {
    const done = c.localStarted();
    try {
      const { text } = await chat(a);
      expect(text.startsWith('B0 ')).toBe(true);
      expect(a.status().jobs[0]).toMatchObject({ peer: b.signer.peerId, ok: true, tried: [{ peer: c.signer.peerId, code: 'busy' }] });
      expect(c.status().lending.refused).toBeGreaterThanOrEqual(1);
    } finally {
      done();
    }
  });

  it('a local request preempts a running network job with a clear error to its requester', async () => {
    let ended: (() => void) | null = null;
    podC.midway = () => void (ended = c.localStarted());
    const err = await chat(a).then(
      () => null,
      (e: ServeError) => e,
    );
    podC.midway = undefined;
    (ended as (() => void) | null)?.();
    expect(err).toBeInstanceOf(ServeError);
    expect(err).toMatchObject({ code: 'preempted', message: expect.stringContaining('needed its machine back') });
    expect(c.status().lending.preempted).toBe(1);
    expect(podB.runs).toBe(1); // only the idle-mode test's job: a job preempted mid-answer is not moved
  });

  it('a peer that lies about its speed is routed away from once measured', async () => {
    // L claims 100,000 tokens/s and makes at most 16; the requester trusts only B and L here.
    const liarPod = fakePod('L', 100_000, 60);
    const liar = await member(liarPod, { lend: true });
    await seesOffer(a, liar.signer.peerId);
    // L's relay address must be in the DHT: its offer arrives by gossip first, and a job sent before A
    // can find L goes to B without testing what this test is about.
    const findL = () => a.node.peerRouting.findPeer(peerIdFromString(liar.signer.peerId), { signal: AbortSignal.timeout(5000) });
    await waitFor('L found through the DHT', () => findL().then((info) => info.multiaddrs.length > 0, () => undefined), 60_000);
    const pair = [b.signer.peerId, liar.signer.peerId];
    try {
      await liarCase(pair, liarPod);
    } finally {
      await liar.stop();
    }
  }, 120_000);

  async function liarCase(pair: string[], liarPod: ReturnType<typeof fakePod>) {
    const liarId = pair[1];
    const first = await chat(a, pair);
    expect(first.text.startsWith('L0 ')).toBe(true); // its offer wins while nothing is measured
    const seen = a.status().nodes.find((n) => n.peer === liarId)!;
    expect(seen.reputation).toBeLessThan(1);
    const second = await chat(a, pair);
    expect(second.text.startsWith('B0 ')).toBe(true);
    expect(liarPod.runs).toBe(1);
  }

  it('killing the chosen pod before its first token reroutes the job to another', async () => {
    podC.beforeFirst = () => c.stop();
    const { text } = await chat(a);
    expect(text.startsWith('B0 ')).toBe(true);
    const job = a.status().jobs[0];
    expect(job).toMatchObject({ peer: b.signer.peerId, ok: true });
    expect(job.tried.map((t) => t.peer)).toEqual([c.signer.peerId]);
    expect(a.status().nodes.find((n) => n.peer === c.signer.peerId)!.reputation).toBeLessThan(1);
  });
});
