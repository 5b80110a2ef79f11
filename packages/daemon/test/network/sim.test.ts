/**
 * The scale simulation (bench/network-sim.ts) on a small network: what `pnpm bench:network` measures
 * at 1,000+ pods rests on these holding — every offer reaches every pod through the mesh, verified
 * at each hop, and routing over what a pod heard picks the candidate the formula says is best.
 */
import { describe, expect, it } from 'vitest';
import { NetworkSim } from '../../bench/network-sim.js';

describe('network simulation', () => {
  it('an offer floods the whole mesh within a few hop latencies, and every pod can route on what it heard', async () => {
    const sim = await NetworkSim.create({ nodes: 80, degree: 6, seed: 3 });
    expect(sim.nodes.every((n) => n.links.length >= 6)).toBe(true);
    const offers = await sim.signAll();
    for (const [i, o] of offers.entries()) {
      const { reachedAt, messages } = await sim.propagate(o, i);
      expect(Array.from(reachedAt).every(Number.isFinite)).toBe(true);
      expect(messages).toBeGreaterThanOrEqual(79);
      if (i === 0) expect(Math.max(...reachedAt)).toBeLessThan(10 * 40 * 3); // a few hops of a few median latencies
    }
    expect(sim.nodes.every((n) => n.book.size === 80)).toBe(true);
    const model = NetworkSim.models[0];
    const route = sim.route(7, model, () => 50);
    const offering = offers.filter((o) => o.body.peer !== sim.nodes[7].signer.peerId && o.body.models.some((m) => m.name === model));
    expect(route.candidates.map((c) => c.peer).sort()).toEqual(offering.map((o) => o.body.peer).sort());
    const etas = route.candidates.map((c) => c.etaMs);
    expect(etas).toEqual([...etas].sort((a, b) => a - b));
  }, 60_000);
});
