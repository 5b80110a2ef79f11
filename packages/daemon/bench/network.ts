/**
 * `pnpm bench:network`: the network at scale, in one process, with the real offer and routing code
 * (bench/network-sim.ts): BENCH_NODES pods (default 1000) in a gossip mesh of degree 8 with
 * log-normal link latencies around 40 ms.
 *
 *   - offer propagation: one pod's offer flooding the mesh, each node verifying it before
 *     forwarding (virtual time; verification CPU measured and charged per hop). Baseline: the
 *     median one-hop latency, so the ratio is the number of hop-latencies a pod waits to be known.
 *   - offer intake: verifying and storing every pod's offer on one node (the steady load of a
 *     refresh round).
 *   - routing decision time: `rankCandidates` over a book of 100 (baseline), BENCH_NODES and
 *     10 x BENCH_NODES offers. The bar: under 50 ms at 1,000 offers.
 */
import os from 'node:os';
import { OfferBook } from '../src/network/offer-book.js';
import { verifyOffer, type Offer } from '../src/network/offer.js';
import { NetworkSim, quantile } from './network-sim.js';

const N = Number(process.env.BENCH_NODES ?? 1000);
const ROUTES = Number(process.env.BENCH_ROUTES ?? 300);
const t = () => performance.now();
const fmt = (ms: number) => (ms < 1 ? `${(ms * 1000).toFixed(0)} us` : `${ms.toFixed(ms < 10 ? 2 : 0)} ms`);

console.log(`network bench: ${N} pods, mesh degree 8, median link 40 ms; load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
let start = t();
const sim = await NetworkSim.create({ nodes: N, seed: 7 });
const offers = await sim.signAll();
console.log(`set-up: ${N} keys and signed offers in ${fmt(t() - start)}`);

// ---- propagation
const oneHop = quantile(sim.nodes.flatMap((n) => n.links.map((l) => l.ms)), 0.5);
const runs: { p50: number; p95: number; max: number; messages: number; reached: number }[] = [];
for (const origin of [0, Math.floor(N / 3), Math.floor((2 * N) / 3), N - 1]) {
  const r = await sim.propagate(offers[origin], origin);
  const reached = Array.from(r.reachedAt).filter(Number.isFinite);
  runs.push({ p50: quantile(reached, 0.5), p95: quantile(reached, 0.95), max: Math.max(...reached), messages: r.messages, reached: reached.length });
}
const avg = (k: keyof (typeof runs)[number]) => runs.reduce((s, r) => s + r[k], 0) / runs.length;
console.log(`\noffer propagation (${runs.length} origins; baseline: median one-hop latency ${fmt(oneHop)})`);
console.log(`  reached ${avg('reached').toFixed(0)}/${N} pods; p50 ${fmt(avg('p50'))} (${(avg('p50') / oneHop).toFixed(1)}x), p95 ${fmt(avg('p95'))} (${(avg('p95') / oneHop).toFixed(1)}x), last ${fmt(avg('max'))} (${(avg('max') / oneHop).toFixed(1)}x)`);
console.log(`  ${avg('messages').toFixed(0)} messages per offer (${(avg('messages') / N).toFixed(1)} per pod: the mesh's duplicates)`);

// ---- intake: one node verifies and stores every offer
const wire = offers.map((o) => JSON.parse(JSON.stringify(o.signed)));
const book = new OfferBook();
start = t();
for (const [i, w] of wire.entries()) {
  const v = await verifyOffer(w, { network: sim.network, now: sim.now, from: offers[i].body.peer });
  if (!v.ok) throw new Error(v.reason);
  book.add(v.offer, sim.now);
}
const intake = t() - start;
console.log(`\noffer intake on one node: ${N} offers verified and stored in ${fmt(intake)} (${fmt(intake / N)} each, ${Math.round((N / intake) * 1000)} offers/s on one core)`);

// ---- routing decision time
/** Wall time of each decision, and the process CPU time of them all divided by their number. */
async function routeTimes(bookOffers: Offer[]): Promise<{ times: number[]; cpuMs: number }> {
  const b = new OfferBook({ capacity: bookOffers.length + 1 });
  for (const o of bookOffers) b.add(o, sim.now);
  const rtt = new Map(bookOffers.map((o, i) => [o.body.peer, 20 + ((i * 37) % 200)]));
  sim.nodes[0].book = b;
  for (let i = 0; i < 20; i++) sim.route(0, NetworkSim.models[i % NetworkSim.models.length], (p) => rtt.get(p)); // warm-up (JIT)
  const times: number[] = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < ROUTES; i++) {
    const model = NetworkSim.models[i % NetworkSim.models.length];
    const s = t();
    const r = sim.route(0, model, (p) => rtt.get(p));
    times.push(t() - s);
    if (r.candidates.length === 0 && bookOffers.length >= 100) throw new Error(`no candidate for ${model}`);
  }
  const cpu = process.cpuUsage(cpu0);
  return { times, cpuMs: (cpu.user + cpu.system) / 1000 / ROUTES };
}
const bigger = await NetworkSim.create({ nodes: 10 * N, degree: 2, seed: 9 });
const biggerOffers = await bigger.signAll();
const sizes: [string, Offer[]][] = [
  ['100 offers (baseline)', offers.slice(0, 100)],
  [`${N} offers`, offers],
  [`${10 * N} offers`, biggerOffers],
];
console.log(`\nrouting decision (${ROUTES} decisions per size after a warm-up, a model offered by ~35% of pods; wall time per decision, and CPU time per decision, which a busy machine inflates less)`);
let base = 0;
for (const [label, list] of sizes) {
  const { times, cpuMs } = await routeTimes(list);
  if (!base) base = cpuMs;
  console.log(`  ${label.padEnd(22)} wall p50 ${fmt(quantile(times, 0.5)).padStart(7)}  p99 ${fmt(quantile(times, 0.99)).padStart(7)}   cpu ${fmt(cpuMs).padStart(7)} (${(cpuMs / base).toFixed(1)}x)`);
}
console.log(`\nload average after: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
