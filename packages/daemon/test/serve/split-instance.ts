/**
 * A split instance inside the test process: every rank of `layout` over a simulated group, its driver,
 * and a close that stops the followers and the group.
 */
import type { InstanceLayout, ModelShard } from '@orchard/engine';
import { createSimGroup } from '../../src/runner/transport.js';
import { loadRankShard, startRank } from '../../src/runner/local.js';
import type { RunnerInit } from '../../src/runner/protocol.js';
import type { Driver } from '../../src/runner/driver.js';
import type { DraftModel } from '../../src/runner/draft-model.js';

export async function startSplit(dir: string, layout: InstanceLayout, o: { maxBatch: number; batch: NonNullable<RunnerInit['batch']>; shardOf?: (s: ModelShard, rank: number) => ModelShard; draftModel?: DraftModel }) {
  const groups = createSimGroup(layout.stages.length * layout.tensor);
  const shardOf = o.shardOf ?? ((s) => s);
  const ranks = groups.map((g) => startRank(g, layout, shardOf(loadRankShard(dir, layout, g.rank, g, { maxBatch: o.maxBatch }), g.rank), { batch: o.batch, draftModel: g.rank === 0 ? o.draftModel : undefined }));
  const driver = ranks[0].driver as Driver;
  return {
    driver,
    async close() {
      await driver.stop();
      await Promise.all(ranks.map((r) => r.done));
      await Promise.all(groups.map((g) => g.close()));
    },
  };
}

/**
 * `s` as the loops see a device rank that keeps its K/V on the device and does not say it checks drafts
 * exactly (`verifiesDrafts`, as today's GPU ranks do; an older runner's): it batches, but no prefix copies
 * and no speculation.
 */
export function asGpuRank(s: ModelShard): ModelShard {
  return new Proxy(s, {
    get: (t, key) => {
      if (key === 'cachesOnDevice') return true;
      const v = Reflect.get(t, key);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
}
