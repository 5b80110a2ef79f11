/**
 * Where each rank of an instance sits: ranks are numbered stage-major (rank = stage·T + tensorRank),
 * every stage has the same number T of tensor ranks, rank 0 (stage 0, tensor rank 0) drives
 * generation and rank (S-1)·T samples.
 */
import type { ShardSpec } from '@orchard/engine';

export interface InstanceLayout {
  /** Layer range [start, end) per stage, in pipeline order. */
  stages: [number, number][];
  /** Tensor-parallel ranks per stage. */
  tensor: number;
}

export function worldSize(l: InstanceLayout): number {
  return l.stages.length * l.tensor;
}

export function stageOf(l: InstanceLayout, rank: number): { stage: number; tensorRank: number } {
  return { stage: Math.floor(rank / l.tensor), tensorRank: rank % l.tensor };
}

export function rankOf(l: InstanceLayout, stage: number, tensorRank: number): number {
  return stage * l.tensor + tensorRank;
}

/** The rank that samples: tensor rank 0 of the last stage. */
export function samplerRank(l: InstanceLayout): number {
  return rankOf(l, l.stages.length - 1, 0);
}

export function shardSpecOf(l: InstanceLayout, rank: number): ShardSpec {
  const { stage, tensorRank } = stageOf(l, rank);
  return { layers: l.stages[stage], tensor: { rank: tensorRank, size: l.tensor }, embed: stage === 0, head: stage === l.stages.length - 1 };
}

/** Ranks of one stage's tensor group, in rank order. */
export function stageMembers(l: InstanceLayout, stage: number): number[] {
  return Array.from({ length: l.tensor }, (_, r) => rankOf(l, stage, r));
}
