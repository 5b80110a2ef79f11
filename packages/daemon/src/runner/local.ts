/**
 * An instance inside one process over any set of groups (one per rank): loads every rank's shard,
 * starts the followers and hands back the driver. For tests and the benchmark's baselines; the
 * daemon runs each rank in its own runner process instead.
 */
import { loadModelConfig, loadShard, type Backend, type ModelShard } from '@orchard/engine';
import { Driver } from './driver.js';
import { runFollower } from './follower.js';
import { POLL_MS, stageAllReduce } from './poll.js';
import type { CompileConstraint } from './requests.js';
import { type InstanceLayout, shardSpecOf, stageMembers, stageOf, worldSize } from '@orchard/engine';
import { BatchDriver } from './batch-driver.js';
import type { Group } from './transport.js';
import type { RunnerInit } from './protocol.js';
import type { DraftModel } from './draft-model.js';
import type { MtpHead } from '@orchard/engine';

export interface LoadRankOptions {
  backend?: Backend;
  maxBatch?: number;
  maxSeqLen?: number;
  stepMs?: number;
  /** See POLL_MS in poll.ts. */
  pollMs?: number;
}

/**
 * Loads the shard of `rank` with its stage's all-reduce wired to the group. The group may be given
 * later (a getter): a runner loads its weights while the other ranks are still starting.
 */
export function loadRankShard(dir: string, layout: InstanceLayout, rank: number, group: Group | (() => Group), o: LoadRankOptions = {}): ModelShard {
  const stepMs = o.stepMs ?? 30_000;
  const groupOf = typeof group === 'function' ? group : () => group;
  const { stage } = stageOf(layout, rank);
  const config = loadModelConfig(dir);
  return loadShard(dir, shardSpecOf(layout, rank), {
    config,
    backend: o.backend,
    maxBatch: o.maxBatch,
    maxSeqLen: o.maxSeqLen,
    allReduce: layout.tensor > 1 ? stageAllReduce(groupOf, rank, stageMembers(layout, stage), stepMs, o.pollMs) : undefined,
  });
}

/**
 * Starts a rank: the driver for rank 0 (returned), a follower loop otherwise (its promise in `done`).
 * A one-rank instance batches its sequences (batch-driver.ts); split ones run the data-plane Driver,
 * which batches them too (`batch.sequences` at most) and keeps a prefix cache on every rank (split-prefix.ts).
 */
export function startRank(
  group: Group,
  layout: InstanceLayout,
  shard: ModelShard,
  o: { stepMs?: number; pollMs?: number; compile?: CompileConstraint; batch?: RunnerInit['batch']; draftModel?: DraftModel; mtp?: MtpHead; stepClock?: () => number } = {},
): { driver: Driver | BatchDriver | null; done: Promise<void> } {
  const { draftModel, stepClock } = o;
  if (worldSize(layout) === 1) return { driver: new BatchDriver(shard, { compile: o.compile, maxSequences: o.batch?.sequences, prefixCacheBytes: o.batch?.prefixCacheBytes, speculate: o.batch?.speculate, draftModel, mtp: o.mtp, stepClock }), done: Promise.resolve() };
  const ctx = { group, layout, shard, maxBatch: shard.maxBatch, stepMs: o.stepMs ?? 30_000, pollMs: o.pollMs ?? POLL_MS, compile: o.compile, prefixCacheBytes: o.batch?.prefixCacheBytes, speculate: o.batch?.speculate, draftModel, stepClock };
  if (group.rank === 0) return { driver: new Driver(ctx, o.batch?.sequences), done: Promise.resolve() };
  return { driver: null, done: runFollower(ctx) };
}
