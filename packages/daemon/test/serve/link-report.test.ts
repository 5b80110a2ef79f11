import { describe, expect, it } from 'vitest';
import { decodeServe, encodeServe } from '../../src/serving/messages.js';
import { DataPlaneLinks } from '../../src/serving/link-report.js';

describe('data-plane link report', () => {
  it("a node's runners' choices travel in one serve message; only ranks the plan gives the sender are taken", () => {
    const mine = new DataPlaneLinks();
    mine.record('inst', 0, [{ peer: 1, transport: 'rdma', reason: 'rdma_en2' }]);
    mine.record('inst', 2, [{ peer: 1, transport: 'fallback', reason: 'RTR/RTS on rdma_en3 failed: ' + 'x'.repeat(500) }]);
    const m = mine.message('A', 'inst', [0, 2])!;
    const decoded = decodeServe(encodeServe(m), 'A');
    expect(decoded.ok).toBe(true);

    const theirs = new DataPlaneLinks();
    if (decoded.ok && decoded.message.type === 'links') theirs.accept(decoded.message, ['A', 'B', 'A']);
    theirs.record('inst', 1, [
      { peer: 2, transport: 'tcp', reason: 'rank 2 could not finish RDMA setup' },
      { peer: 0, transport: 'rdma', reason: 'rdma_en5' },
    ]);
    expect(theirs.of('inst').map((l) => `${l.rank}->${l.peer} ${l.transport}`)).toEqual(['0->1 rdma', '1->0 rdma', '1->2 tcp', '2->1 tcp']);
    expect(theirs.of('inst')[3]!.reason).toHaveLength(300);

    // B claims rank 0, which the plan puts on A: ignored.
    theirs.accept({ type: 'links', from: 'B', instance: 'inst', ranks: [{ rank: 0, links: [{ peer: 1, transport: 'tcp', reason: 'spoofed' }] }] }, ['A', 'B', 'A']);
    expect(theirs.of('inst')[0]!.reason).toBe('rdma_en2');
    // Unknown instance (not in the state): ignored; removed instances are forgotten.
    theirs.accept({ ...m, instance: 'other' }, undefined);
    expect(theirs.of('other')).toEqual([]);
    theirs.retain(() => false);
    expect(theirs.of('inst')).toEqual([]);
    expect(mine.message('A', 'nothing-yet', [0])).toBeNull();
  });

  it('a malformed links message is dropped by the serve schema', () => {
    const bad = new TextEncoder().encode(JSON.stringify({ type: 'links', from: 'A', instance: 'i', ranks: [{ rank: 0, links: [{ peer: 1, transport: 'carrier-pigeon', reason: '' }] }] }));
    expect(decodeServe(bad, 'A').ok).toBe(false);
  });
});
