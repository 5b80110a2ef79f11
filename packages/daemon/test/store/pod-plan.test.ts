/**
 * The pure halves of a pod download: the coordinator's hub ledger (each chunk fetched from the hub
 * by one node) and the striping of chunks over links (work by measured rate, failures re-queued,
 * end game), driven here by a simulated clock.
 */
import { describe, expect, it } from 'vitest';
import { HubLedger } from '../../src/store/pod/hub-ledger.js';
import { Stripe } from '../../src/store/pod/stripe.js';

describe('hub ledger', () => {
  const live = () => true;

  it('grants each chunk to the first claimant and sends later ones to it', () => {
    const ledger = new HubLedger();
    expect(ledger.claim('k', [0, 1, 2], 'a', { live }).granted).toEqual([0, 1, 2]);
    const b = ledger.claim('k', [2, 3, 4], 'b', { live });
    expect(b.granted).toEqual([3, 4]);
    expect([...b.elsewhere]).toEqual([['a', [2]]]);
    // A renewed claim by the holder is granted again; other files are separate.
    expect(ledger.claim('k', [0], 'a', { live }).granted).toEqual([0]);
    expect(ledger.claim('other', [0], 'b', { live }).granted).toEqual([0]);
  });

  it('passes a claim on when its holder left or failed the claimant', () => {
    const ledger = new HubLedger();
    ledger.claim('k', [0, 1], 'a', { live });
    expect(ledger.claim('k', [0], 'b', { live: (n) => n !== 'a' }).granted).toEqual([0]);
    expect([...ledger.claim('k', [1], 'c', { live }).elsewhere]).toEqual([['a', [1]]]);
    expect(ledger.claim('k', [1], 'c', { live, failed: ['a'] }).granted).toEqual([1]);
    expect([...ledger.claim('k', [0, 1], 'd', { live }).elsewhere].sort()).toEqual([['b', [0]], ['c', [1]]]);
    ledger.prune((n) => n === 'b');
    expect(ledger.summary()).toEqual(new Map([['k', new Map([['b', 1]])]]));
  });
});

/** Runs a stripe to the end over links moving `rates[link]` bytes/s each, serially per link. */
function simulate(stripe: Stripe, links: Array<{ id: string; peer: string; rate: number; dieAt?: number }>, opts: { hub?: number } = {}) {
  const busyUntil = new Map<string, number>();
  const events: Array<{ at: number; link: string; chunk: number }> = [];
  const got = new Map<string, number>();
  let now = 0;
  for (const l of links) stripe.addLink(l.id, l.peer);
  if (opts.hub) stripe.addLink('hub', 'hub');
  const dead = new Set<string>();
  const fill = () => {
    for (const l of [...links, ...(opts.hub ? [{ id: 'hub', peer: 'hub', rate: opts.hub }] : [])]) {
      if (dead.has(l.id)) continue;
      for (;;) {
        let chunks: number[] = [];
        if (l.id === 'hub') {
          const run = stripe.nextHubRun('hub', 1, now);
          if (run) chunks = [run[0]];
        } else {
          const c = stripe.next(l.id, now);
          if (c !== undefined) chunks = [c];
        }
        if (!chunks.length) break;
        const start = Math.max(now, busyUntil.get(l.id) ?? 0);
        const at = start + (stripe.chunkSize / l.rate) * 1000;
        busyUntil.set(l.id, at);
        events.push({ at, link: l.id, chunk: chunks[0] });
      }
    }
  };
  fill();
  for (let steps = 0; stripe.remaining > 0 && steps < 100_000; steps++) {
    events.sort((a, b) => a.at - b.at);
    const e = events.shift();
    if (!e) break;
    now = e.at;
    const l = links.find((x) => x.id === e.link);
    if (l?.dieAt !== undefined && now >= l.dieAt && !dead.has(l.id)) {
      dead.add(l.id);
      stripe.dropPeer(l.peer);
      for (const x of events.filter((x) => x.link === l.id)) events.splice(events.indexOf(x), 1);
    } else if (!dead.has(e.link) && stripe.delivered(e.chunk, e.link, stripe.chunkSize, now)) {
      got.set(e.link, (got.get(e.link) ?? 0) + 1);
    }
    fill();
  }
  return { got, now };
}

describe('striping', () => {
  it('gives each link work in proportion to its measured rate', () => {
    const stripe = new Stripe(Array.from({ length: 400 }, (_, i) => i), 1 << 20);
    for (let c = 0; c < 400; c++) {
      stripe.addSource(c, 'p', true);
      stripe.addSource(c, 'q', true);
    }
    const { got } = simulate(stripe, [
      { id: 'p/fast', peer: 'p', rate: 300e6 },
      { id: 'p/slow', peer: 'p', rate: 30e6 },
      { id: 'q/a', peer: 'q', rate: 100e6 },
    ]);
    expect(stripe.remaining).toBe(0);
    const total = [...got.values()].reduce((a, b) => a + b, 0);
    expect(total).toBe(400);
    // 300 : 30 : 100 of 430 would be 279 : 28 : 93.
    expect(got.get('p/fast')!).toBeGreaterThan(250);
    expect(got.get('p/slow')!).toBeLessThan(40);
    expect(got.get('q/a')!).toBeGreaterThan(75);
    expect(got.get('q/a')!).toBeLessThan(110);
    const rates = new Map(stripe.links().map((l) => [l.id, l.rate]));
    expect(rates.get('p/fast')! / rates.get('p/slow')!).toBeGreaterThan(5);
  });

  it('a slow link keeps a short queue: its depth follows its rate', () => {
    const stripe = new Stripe([0, 1, 2, 3], 4 << 20);
    stripe.addLink('x', 'p');
    expect(stripe.depth('x')).toBe(2);
    for (let c = 0; c < 4; c++) stripe.addSource(c, 'p', true);
    stripe.next('x', 0);
    stripe.delivered(0, 'x', 4 << 20, 1000); // 4 MiB/s
    expect(stripe.depth('x')).toBe(1);
    stripe.next('x', 1000);
    stripe.delivered(1, 'x', 4 << 20, 1001); // now very fast
    expect(stripe.depth('x')).toBeGreaterThan(1);
  });

  it('a peer that dies mid-transfer: its chunks go to the other peer', () => {
    const stripe = new Stripe(Array.from({ length: 100 }, (_, i) => i), 1 << 20);
    for (let c = 0; c < 100; c++) {
      stripe.addSource(c, 'p', true);
      stripe.addSource(c, 'q', true);
    }
    const { got } = simulate(stripe, [
      { id: 'p', peer: 'p', rate: 100e6, dieAt: 100 },
      { id: 'q', peer: 'q', rate: 100e6 },
    ]);
    expect(stripe.remaining).toBe(0);
    expect(got.get('p')!).toBeLessThan(20);
    expect(got.get('p')! + got.get('q')!).toBe(100);
  });

  it('chunks only the hub can give go to the hub link; orphans are named', () => {
    const stripe = new Stripe([0, 1, 2, 3, 4], 1 << 20);
    stripe.addSource(0, 'p', true);
    stripe.addSource(1, 'p', false);
    expect(stripe.orphans()).toEqual([2, 3, 4]);
    stripe.grantHub([2, 3]);
    expect(stripe.orphans()).toEqual([4]);
    stripe.addLink('hub', 'hub');
    expect(stripe.nextHubRun('hub', 8, 0)).toEqual([2, 4]);
    expect(stripe.nextHubRun('hub', 8, 0)).toBeUndefined();
    stripe.addLink('p', 'p');
    // What the peer has now comes before what it is still fetching.
    expect(stripe.next('p', 0)).toBe(0);
    expect(stripe.next('p', 0)).toBe(1);
    stripe.failed(1, 'p');
    stripe.dropSource(1, 'p');
    expect(stripe.orphans()).toEqual([1, 4]);
  });

  it('end game: an idle fast link takes over a chunk queued on a far slower one; the late copy is ignored', () => {
    const stripe = new Stripe([0, 1, 2, 3], 1 << 20);
    for (let c = 0; c < 4; c++) {
      stripe.addSource(c, 'p', true);
      stripe.addSource(c, 'q', true);
    }
    stripe.addLink('slow', 'p');
    stripe.addLink('fast', 'q');
    // Measure both: slow at 1 MiB/s, fast at 100 MiB/s.
    stripe.next('slow', 0);
    stripe.delivered(0, 'slow', 1 << 20, 1000);
    stripe.next('fast', 1000);
    stripe.delivered(1, 'fast', 1 << 20, 1010);
    expect(stripe.next('slow', 1010)).toBe(2);
    expect(stripe.next('fast', 1010)).toBe(3);
    expect(stripe.next('fast', 1010)).toBe(2); // duplicate of the slow link's chunk
    expect(stripe.delivered(3, 'fast', 1 << 20, 1020)).toBe(true);
    expect(stripe.delivered(2, 'fast', 1 << 20, 1030)).toBe(true);
    expect(stripe.delivered(2, 'slow', 1 << 20, 2010)).toBe(false);
    expect(stripe.remaining).toBe(0);
  });
});
