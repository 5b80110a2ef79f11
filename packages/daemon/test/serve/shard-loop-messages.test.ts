/**
 * What one tensor-parallel decode step puts on the data plane (TP 2, one stage, 6 layers): the two
 * ranks meet in 2 all-reduces per layer; besides those, the driver sends the header and the embedded
 * row, and the other head rank sends its logit slice to the sampler — one-way messages, no meeting.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { pipelineStages, vocabSlice } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { createSimFabric, type Group } from '../../src/runner/transport.js';
import { loadRankShard, startRank } from '../../src/runner/local.js';
import { HeaderCodec } from '../../src/runner/header.js';
import type { InstanceLayout } from '@orchard/engine';

const LAYERS = 6;
const dir = mkdtempSync(join(os.tmpdir(), 'orchard-loop-messages-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const model = writeRandomModel(dir, { numLayers: LAYERS, hiddenSize: 64, numHeads: 4, numKvHeads: 2, seed: 9 });
const D = 64;
const V = model.config.vocab_size as number;

interface Sent {
  from: number;
  to: number;
  values: number;
}

/**
 * Records every user send of `g`, and each all-reduce on a sub-group of `g` (the stage's) as the one
 * message it sends to each other member — the direct all-reduce; the fabric's own message count checks it.
 */
function recordSends(g: Group, log: Sent[]): void {
  const send = g.send.bind(g);
  g.send = (peer, buf, options) => {
    log.push({ from: g.rank, to: peer, values: (buf as Float32Array).length });
    return send(peer, buf, options);
  };
  const subgroup = g.subgroup.bind(g);
  const recorded = new Set<Group>();
  g.subgroup = (members) => {
    const sub = subgroup(members);
    if (recorded.has(sub)) return sub;
    recorded.add(sub);
    const allReduce = sub.allReduce.bind(sub);
    sub.allReduce = (buf, op, options) => {
      for (const m of members) if (m !== g.rank) log.push({ from: g.rank, to: m, values: buf.length });
      return allReduce(buf, op, options);
    };
    return sub;
  };
}

describe('data plane of a tensor-parallel decode step', () => {
  it('2 all-reduces per layer; one-way: header + row from the driver, the logit slice to the sampler', async () => {
    const layout: InstanceLayout = { stages: pipelineStages(LAYERS, 1), tensor: 2 };
    const fabric = createSimFabric(2);
    const groups = fabric.groups;
    const log: Sent[] = [];
    groups.forEach((g) => recordSends(g, log));
    const onWire: number[] = [];
    const ranks = groups.map((g) => startRank(g, layout, loadRankShard(dir, layout, g.rank, g, { maxBatch: 4 })));
    const marks: number[] = [];
    await ranks[0].driver!.generate({ promptIds: [1, 2, 3], maxTokens: 4, stopTokenIds: [] }, () => {
      marks.push(log.length);
      onWire.push(fabric.stats.messages);
      return true;
    });
    await ranks[0].driver!.stop();
    await Promise.all(ranks.map((r) => r.done));
    await Promise.all(groups.map((g) => g.close()));

    const headerValues = new HeaderCodec(4).buffer.length; // header fields + maxBatch token slots
    const allReduce = (from: number): Sent[] => Array.from({ length: 2 * LAYERS }, () => ({ from, to: 1 - from, values: D }));
    const [s0, s1] = vocabSlice(V, 1, 2);
    // Between two tokens handed out lies exactly one decode step (the sampler is the driver, rank 0).
    for (let t = 1; t < marks.length; t++) {
      const step = log.slice(marks[t - 1], marks[t]);
      const sentBy = (from: number) => step.filter((m) => m.from === from);
      expect(sentBy(0)).toEqual([{ from: 0, to: 1, values: headerValues }, { from: 0, to: 1, values: D }, ...allReduce(0)]);
      expect(sentBy(1)).toEqual([...allReduce(1), { from: 1, to: 0, values: s1 - s0 }]);
      // What went over the fabric in that step: exactly the messages recorded (2 + 12 + 12 + 1).
      expect(onWire[t] - onWire[t - 1]).toBe(step.length);
    }
    expect(marks).toHaveLength(4);
  });
});
